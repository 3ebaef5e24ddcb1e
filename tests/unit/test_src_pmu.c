/* src_pmu: attrs checked against libpfm4's own encoding (a Skylake PMU forced through
 * LIBPFM_FORCE_PMU, since this machine has none), sysfs type/format parsing from a fake
 * tree, `--access auto` order and its one-line reasons, explicit absent sources. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/access/src_pmu.h"
#include <perfmon/pfmlib_perf_event.h>

static char root[256];

static void mkfile(const char *rel, const char *text)
{
	char path[512], dir[512];

	snprintf(path, sizeof(path), "%s/bus/event_source/devices/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			memcpy(dir, path, (size_t)(p - path));
			dir[p - path] = '\0';
			mkdir(dir, 0755);
		}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup_tree(void **state)
{
	snprintf(root, sizeof(root), "/tmp/test_src_pmu.XXXXXX");
	assert_non_null(mkdtemp(root));
	mkfile("ibs_op/type", "11\n");
	mkfile("ibs_op/format/cnt_ctl", "config:19\n");
	mkfile("ibs_op/format/l3missonly", "config:16\n");
	mkfile("arm_spe_3/type", "9\n");
	mkfile("arm_spe_1/type", "8\n");
	mkfile("arm_spe_1/format/ts_enable", "config:0\n");
	mkfile("arm_spe_1/format/jitter", "config:16\n");
	mkfile("arm_spe_1/format/load_filter", "config:33\n");
	mkfile("arm_spe_1/format/min_latency", "config2:0-11\n");
	mkfile("software/type", "1\n");
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_format_parse(void **state)
{
	struct perf_event_attr a = {0};
	struct pmu_format f;

	assert_int_equal(pmu_format_parse("config:0-7,32-35\n", &f), 0);
	assert_int_equal(f.field, 0);
	assert_int_equal(f.nranges, 2);
	assert_int_equal(pmu_format_set(&a, &f, 0xabc), 0);
	assert_int_equal(a.config, 0xbcULL | (0xaULL << 32));
	assert_int_equal(pmu_format_set(&a, &f, 0x1000), -ERANGE);   /* 13 bits > 12 */
	assert_int_equal(pmu_format_parse("config1:0-11", &f), 0);
	assert_int_equal(f.field, 1);
	memset(&a, 0, sizeof(a));
	assert_int_equal(pmu_format_set(&a, &f, 30), 0);
	assert_int_equal(a.config1, 30);
	assert_int_equal(pmu_format_parse("config2:0", &f), 0);
	assert_int_equal(pmu_format_parse("config:0-63", &f), 0);
	assert_int_equal(pmu_format_set(&a, &f, ~0ULL), 0);
	assert_int_equal(a.config, ~0ULL);
	static const char *const bad[] = { "config3:1", "config:", "config:5-3", "config:64",
					   "config:1x", "cfg:1", "config:1,", "config:1-2,3,4,5,6" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(pmu_format_parse(bad[i], &f), -EINVAL);
}

static void test_sysfs(void **state)
{
	uint32_t type = 0;
	char name[64];
	struct pmu_format f;

	assert_int_equal(pmu_sysfs_type(root, "ibs_op", &type), 0);
	assert_int_equal(type, 11);
	assert_int_equal(pmu_sysfs_type(root, "nope", &type), -ENOENT);
	assert_int_equal(pmu_find_spe(root, name, sizeof(name)), 0);
	assert_string_equal(name, "arm_spe_1");           /* lowest N */
	assert_int_equal(pmu_sysfs_format(root, "arm_spe_1", "load_filter", &f), 0);
	assert_int_equal(f.r[0].lo, 33);
	assert_int_equal(pmu_sysfs_format(root, "ibs_op", "swfilt", &f), -ENOENT);
	assert_int_equal(pmu_find_spe("/nonexistent", name, sizeof(name)), -ENOENT);
}

/* Our attr equals libpfm4's encoding of the same event, plus the sampling fields. */
static void test_pebs_attr(void **state)
{
	struct src_pmu_opts o = { .period = 5003, .ldlat = 3 };
	struct src_events ev;
	struct perf_event_attr ref;
	pfm_perf_encode_arg_t arg;
	char why[SRC_PMU_WHY_MAX];

	assert_int_equal(src_pmu_pebs(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.n, 2);
	memset(&ref, 0, sizeof(ref));
	memset(&arg, 0, sizeof(arg));
	arg.attr = &ref;
	arg.size = sizeof(arg);
	assert_int_equal(pfm_get_os_event_encoding("MEM_INST_RETIRED:ALL_LOADS", PFM_PLM3,
						   PFM_OS_PERF_EVENT_EXT, &arg), PFM_SUCCESS);
	assert_int_equal(ev.ev[0].attr.type, ref.type);
	assert_int_equal(ev.ev[0].attr.config, ref.config);
	assert_int_equal(ev.ev[0].attr.type, PERF_TYPE_RAW);
	assert_int_equal(ev.ev[0].attr.config, 0x81d0);        /* event 0xd0, umask 0x81 */
	assert_int_equal(ev.ev[0].attr.exclude_kernel, 1);
	assert_int_equal(ev.ev[0].attr.precise_ip, 2);
	assert_int_equal(ev.ev[0].attr.sample_period, 5003);
	assert_int_equal(ev.ev[0].est_per_sample, 5003);
	uint64_t need = PERF_SAMPLE_ADDR | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT;
	assert_int_equal(ev.ev[0].attr.sample_type & need, need);
	assert_string_equal(ev.ev[0].name, "skl::MEM_INST_RETIRED:ALL_LOADS");

	memset(&ref, 0, sizeof(ref));
	assert_int_equal(pfm_get_os_event_encoding("MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=3",
						   PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg), PFM_SUCCESS);
	assert_int_equal(ev.ev[1].attr.config, ref.config);
	assert_int_equal(ev.ev[1].attr.config1, ref.config1);
	assert_int_equal(ev.ev[1].attr.config, 0x1cd);
	assert_int_equal(ev.ev[1].attr.config1, 3);           /* ldlat in config1 */

	o.period = 0;
	o.ldlat = 0;
	assert_int_equal(src_pmu_pebs(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.ev[0].attr.sample_period, PEBS_DEFAULT_PERIOD);
}

static void test_ibs_spe_attr(void **state)
{
	struct src_pmu_opts o = { .sysfs_root = root, .period = 100001 };
	struct src_events ev;
	char why[SRC_PMU_WHY_MAX];

	assert_int_equal(src_pmu_ibs(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.ev[0].attr.type, 11);
	assert_int_equal(ev.ev[0].attr.config, 1ULL << 19);    /* cnt_ctl */
	assert_int_equal(ev.ev[0].attr.sample_period, 100000); /* low 4 bits dropped */
	assert_int_equal(ev.ev[0].est_per_sample, 100000);
	assert_int_equal(ev.ev[0].attr.exclude_kernel, 0);     /* no swfilt in this tree */
	o.ldlat = 128;
	assert_int_equal(src_pmu_ibs(&o, &ev, why, sizeof(why)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "load-latency"));
	mkfile("ibs_op/format/swfilt", "config2:0\n");
	mkfile("ibs_op/format/ldlat", "config1:0-11\n");
	assert_int_equal(src_pmu_ibs(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.ev[0].attr.config1, 128);
	assert_int_equal(ev.ev[0].attr.config2, 1);
	assert_int_equal(ev.ev[0].attr.exclude_kernel, 1);

	o.ldlat = 0;
	o.period = 0;
	assert_int_equal(src_pmu_spe(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.ev[0].attr.type, 8);
	assert_int_equal(ev.ev[0].attr.config, (1ULL << 33) | (1ULL << 0) | (1ULL << 16));
	assert_int_equal(ev.ev[0].attr.sample_period, SPE_DEFAULT_PERIOD);
	assert_string_equal(ev.ev[0].name, "arm_spe_1/load_filter=1/");
	/* Opened disabled (AUX area first); switch records say who ran for src_spe. */
	assert_int_equal(ev.ev[0].attr.disabled, 1);
	assert_int_equal(ev.ev[0].attr.sample_id_all, 1);
	assert_int_equal(ev.ev[0].attr.context_switch, 1);

	assert_int_equal(src_pmu_soft(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.ev[0].attr.type, PERF_TYPE_SOFTWARE);
	assert_int_equal(ev.ev[0].attr.config, PERF_COUNT_SW_CPU_CLOCK);
	assert_int_equal(ev.ev[0].attr.freq, 1);
	assert_int_equal(ev.ev[0].attr.sample_freq, SOFT_DEFAULT_FREQ);
	o.period = 250000;
	assert_int_equal(src_pmu_soft(&o, &ev, why, sizeof(why)), 0);
	assert_int_equal(ev.ev[0].attr.freq, 0);
	assert_int_equal(ev.ev[0].attr.sample_period, 250000);
}

/* Fake perf_event_open: fails every type in the mask (bit = attr.type, 4 = RAW). */
struct fake { uint64_t fail_types; int err; unsigned calls; uint32_t types[16]; int cpus[16]; };
static int fake_open(struct perf_event_attr *a, int cpu, void *arg)
{
	struct fake *f = arg;

	if (f->calls < 16) {
		f->types[f->calls] = a->type;
		f->cpus[f->calls] = cpu;
	}
	f->calls++;
	if (a->type < 64 && (f->fail_types & (1ULL << a->type)))
		return f->err;
	return dup(0);   /* a real fd: the prober closes it */
}

static void no_newlines(const struct access_choice *c)
{
	for (unsigned i = 0; i < c->nreasons; i++)
		assert_null(strchr(c->reasons[i], '\n'));
}

static void test_auto(void **state)
{
	struct src_pmu_opts o = { .sysfs_root = root };
	struct fake f = { .fail_types = 1ULL << PERF_TYPE_RAW, .err = -ENOENT };
	struct access_choice c;
	char err[256];

	/* pebs does not open -> ibs (present in the fake tree) is chosen */
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_IBS);
	assert_int_equal(c.nreasons, 1);
	assert_non_null(strstr(c.reasons[0], "pebs: perf_event_open(skl::MEM_INST_RETIRED:ALL_LOADS)"));
	assert_int_equal(f.types[0], PERF_TYPE_RAW);
	assert_int_equal(f.types[1], 11);
	no_newlines(&c);

	/* ibs fails too -> spe opens (src_spe.c reads its AUX records) and is chosen */
	f = (struct fake){ .fail_types = (1ULL << PERF_TYPE_RAW) | (1ULL << 11), .err = -EINVAL };
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_SPE);
	assert_int_equal(c.nreasons, 2);
	assert_true(!strncmp(c.reasons[0], "pebs: ", 6));
	assert_true(!strncmp(c.reasons[1], "ibs: ", 5));
	assert_non_null(strstr(c.reasons[1], "attr rejected"));
	assert_int_equal(c.events.ev[0].attr.type, 8);
	assert_int_equal(f.cpus[2], 0);          /* arm_spe_1 has no cpumask: every CPU */
	no_newlines(&c);

	/* spe present but refused (e.g. perf already holds it: it is exclusive) -> soft */
	f = (struct fake){ .fail_types = (1ULL << PERF_TYPE_RAW) | (1ULL << 11) | (1ULL << 8),
			   .err = -EBUSY };
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_SOFT);
	assert_int_equal(c.nreasons, 3);
	assert_string_equal(c.reasons[2], "spe: perf_event_open(arm_spe_1/load_filter=1/): Device or "
			    "resource busy: PMU busy (another user holds it)");
	assert_int_equal(c.events.ev[0].attr.type, PERF_TYPE_SOFTWARE);
	/* an SPE instance that covers only some CPUs is probed on one of them */
	mkfile("arm_spe_1/cpumask", "4-7\n");
	f = (struct fake){ .fail_types = (1ULL << PERF_TYPE_RAW) | (1ULL << 11), .err = -EINVAL };
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_SPE);
	assert_int_equal(f.cpus[2], 4);
	assert_int_equal(c.events.ev[0].probe_cpu, 4);
	mkfile("arm_spe_1/cpumask", "x\n");
	assert_int_equal(access_select(ACCESS_SPE, &o, fake_open, &f, &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "access source spe: arm_spe_1/cpumask unreadable: Invalid argument");
	mkfile("arm_spe_1/cpumask", "0-7\n");
	no_newlines(&c);

	/* an empty tree: reasons say which PMU is missing */
	o.sysfs_root = "/nonexistent";
	f = (struct fake){ .fail_types = 1ULL << PERF_TYPE_RAW, .err = -ENOENT };
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_SOFT);
	assert_non_null(strstr(c.reasons[1], "ibs: no ibs_op PMU"));
	assert_non_null(strstr(c.reasons[2], "spe: no arm_spe PMU"));

	/* nothing opens at all */
	f = (struct fake){ .fail_types = ~0ULL, .err = -EACCES };
	assert_int_equal(access_select(ACCESS_AUTO, &o, fake_open, &f, &c, err, sizeof(err)), -ENODEV);
	assert_int_equal(c.src, ACCESS_OFF);
	assert_non_null(strstr(err, "not permitted"));
	assert_null(strchr(err, '\n'));

	/* explicit absent source: one line, why */
	f = (struct fake){0};
	assert_int_equal(access_select(ACCESS_IBS, &o, fake_open, &f, &c, err, sizeof(err)), -ENODEV);
	assert_string_equal(err, "access source ibs: no ibs_op PMU (/nonexistent/bus/event_source/"
			    "devices/ibs_op/type: No such file or directory)");
	assert_int_equal(access_select(ACCESS_OFF, &o, fake_open, &f, &c, err, sizeof(err)), 0);
	assert_int_equal(c.src, ACCESS_OFF);
	assert_int_equal(f.calls, 0);

	enum access_src s;
	assert_int_equal(access_src_parse("soft", &s), 0);
	assert_int_equal(s, ACCESS_SOFT);
	assert_int_equal(access_src_parse("pebs2", &s), -EINVAL);
	assert_string_equal(access_src_name(ACCESS_SPE), "spe");
}

/* The real kernel: no hardware PMU here, so pebs fails with the kernel's reason, and
 * soft (cpu-clock) opens when we may open system-wide events. */
static void test_real_kernel(void **state)
{
	struct src_pmu_opts o = { .sysfs_root = "/sys" };
	struct access_choice c;
	char err[256];

	int r = access_select(ACCESS_PEBS, &o, NULL, NULL, &c, err, sizeof(err));
	if (access("/sys/bus/event_source/devices/cpu/type", F_OK) != 0) {
		assert_true(r < 0);
		assert_true(!strncmp(err, "access source pebs: ", 20));
		print_message("%s\n", err);
	}
	if (geteuid() != 0)
		skip();   /* system-wide cpu-clock needs root (or perf_event_paranoid <= 0) */
	r = access_select(ACCESS_AUTO, &o, NULL, NULL, &c, err, sizeof(err));
	assert_int_equal(r, 0);
	for (unsigned i = 0; i < c.nreasons; i++)
		print_message("%s\n", c.reasons[i]);
	print_message("using %s\n", access_src_name(c.src));
	/* Which source auto must pick follows from the PMUs this kernel lists: with none of
	 * them, soft, after one reason for each of pebs, ibs and spe, in that order. */
	bool any_pmu = !access("/sys/bus/event_source/devices/cpu/type", F_OK) ||
		       !access("/sys/bus/event_source/devices/ibs_op/type", F_OK);
	DIR *d = opendir("/sys/bus/event_source/devices");
	for (struct dirent *e; d && (e = readdir(d));)
		any_pmu |= !strncmp(e->d_name, "arm_spe", 7);
	if (d)
		closedir(d);
	if (!any_pmu) {
		assert_int_equal(c.src, ACCESS_SOFT);
		assert_int_equal(c.nreasons, 3);
		assert_true(!strncmp(c.reasons[0], "pebs: ", 6));
		assert_true(!strncmp(c.reasons[1], "ibs: ", 5));
		assert_true(!strncmp(c.reasons[2], "spe: ", 5));
	} else {
		assert_true(c.src != ACCESS_OFF);
	}
}

int main(void)
{
	/* This machine has no PMU; libpfm4 then encodes for a forced Skylake. */
	setenv("LIBPFM_FORCE_PMU", "skl", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_parse),
		cmocka_unit_test(test_sysfs),
		cmocka_unit_test(test_pebs_attr),
		cmocka_unit_test(test_ibs_spe_attr),
		cmocka_unit_test(test_auto),
		cmocka_unit_test(test_real_kernel),
	};
	return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
