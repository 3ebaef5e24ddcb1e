/* src_spe end to end without Arm hardware: the event's attr from src_pmu_spe (a fake
 * arm_spe sysfs tree), rings built in memory the way the kernel fills them (ITRACE_START,
 * CPU-wide switch records, PERF_RECORD_AUX with sample_id, SPE records in the AUX area),
 * drained into access_sample structs: who (switch timeline, context packet + /proc),
 * when (time_zero conversion + clock offset, or the AUX record's time), what is dropped
 * (kernel, branches, other processes, no task) and the weight (the SPE period). Then
 * src_spe_open's failures on this machine, which has no arm_spe. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/access/src_spe.h"

#define AUXSZ 1024
#define DSZ 4096
#define CLOCK_OFF 1000000                 /* CLOCK_MONOTONIC - perf clock, for the test */
#define MAXS 16

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

static int setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/test_src_spe.XXXXXX");
	assert_non_null(mkdtemp(root));
	mkfile("arm_spe_0/type", "10\n");
	mkfile("arm_spe_0/cpumask", "2-3\n");
	mkfile("arm_spe_0/format/ts_enable", "config:0\n");
	mkfile("arm_spe_0/format/jitter", "config:16\n");
	mkfile("arm_spe_0/format/load_filter", "config:33\n");
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- a CPU's rings, written as the kernel does ------------------------------------ */

struct fake {
	uint8_t *mem, *data;
	struct perf_event_mmap_page *pg;
	uint64_t head;
	uint8_t aux[AUXSZ];
	uint64_t aux_head;
	uint32_t cpu;
	uint8_t rec[512];                     /* the record being built */
	size_t n;
};

static void fake_init(struct fake *f, uint32_t cpu)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);

	memset(f, 0, sizeof(*f));
	size_t len = (psz + DSZ + psz - 1) / psz * psz;   /* a multiple of the alignment */

	f->mem = aligned_alloc(psz, len);
	assert_non_null(f->mem);
	memset(f->mem, 0, len);
	f->pg = (struct perf_event_mmap_page *)f->mem;
	f->pg->data_offset = psz;
	f->pg->data_size = DSZ;
	f->data = f->mem + psz;
	f->cpu = cpu;
	/* The generic timer counts perf-clock ns here: time_zero 0, mult 1, shift 0. */
	f->pg->cap_user_time_zero = 1;
	f->pg->time_mult = 1;
}

static void put(struct fake *f, const void *p, size_t n)
{
	assert_true(f->n + n <= sizeof(f->rec));
	memcpy(f->rec + f->n, p, n);
	f->n += n;
}
static void put32(struct fake *f, uint32_t v) { put(f, &v, 4); }
static void put64(struct fake *f, uint64_t v) { put(f, &v, 8); }

static void begin(struct fake *f, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { .type = type, .misc = misc };

	f->n = 0;
	put(f, &h, sizeof(h));
}

/* sample_id for src_pmu's sample_type: TID, TIME, CPU; then the record goes in. */
static void finish(struct fake *f, uint32_t pid, uint32_t tid, uint64_t t)
{
	uint16_t size;

	put32(f, pid); put32(f, tid);
	put64(f, t);
	put32(f, f->cpu); put32(f, 0);
	size = (uint16_t)f->n;
	memcpy(f->rec + 6, &size, 2);
	for (size_t i = 0; i < f->n; i++)
		f->data[(f->head + i) & (DSZ - 1)] = f->rec[i];
	f->head += f->n;
	f->pg->data_head = f->head;
}

static void itrace_start(struct fake *f, uint32_t pid, uint32_t tid, uint64_t t)
{
	begin(f, PERF_RECORD_ITRACE_START, 0);
	put32(f, pid); put32(f, tid);
	finish(f, pid, tid, t);
}

/* A context switch on this CPU at t from `from` to `to`: the kernel writes both the
 * switch-out record (sample_id = outgoing) and the switch-in one (sample_id = incoming). */
static void switch_to(struct fake *f, uint32_t fp, uint32_t ft, uint32_t tp, uint32_t tt,
		      uint64_t t)
{
	begin(f, PERF_RECORD_SWITCH_CPU_WIDE, PERF_RECORD_MISC_SWITCH_OUT);
	put32(f, tp); put32(f, tt);
	finish(f, fp, ft, t);
	begin(f, PERF_RECORD_SWITCH_CPU_WIDE, 0);
	put32(f, fp); put32(f, ft);
	finish(f, tp, tt, t);
}

/* SPE bytes into the AUX area at aux_head, then the PERF_RECORD_AUX that hands them over. */
static void aux_chunk(struct fake *f, const uint8_t *b, size_t n, uint64_t flags, uint64_t t)
{
	for (size_t i = 0; i < n; i++)
		f->aux[(f->aux_head + i) & (AUXSZ - 1)] = b[i];
	begin(f, PERF_RECORD_AUX, 0);
	put64(f, f->aux_head); put64(f, n); put64(f, flags);
	finish(f, 0, 0, t);
	f->aux_head += n;
	f->pg->aux_head = f->aux_head;
}

/* ---- SPE records ------------------------------------------------------------------- */

struct spe { uint8_t b[AUXSZ]; size_t n; };

static void sb(struct spe *s, uint8_t v) { assert_true(s->n < sizeof(s->b)); s->b[s->n++] = v; }
static void sle(struct spe *s, uint64_t v, unsigned n) { for (unsigned i = 0; i < n; i++) sb(s, (uint8_t)(v >> (8 * i))); }

/* One record: operation (class, payload), PC at EL0, VA, optional context, then a
 * timestamp (ts != 0) or an end packet. */
static void spe_rec(struct spe *s, unsigned cls, uint8_t op, uint64_t va, uint32_t context,
		    uint64_t ts)
{
	if (context) {
		sb(s, 0x65);
		sle(s, context, 4);
	}
	sb(s, (uint8_t)(0x48 | cls)); sb(s, op);
	sb(s, 0xb0); sle(s, (1ULL << 63) | 0x400000, 8);         /* PC, EL0, NS */
	sb(s, 0xb2); sle(s, va, 8);
	sb(s, 0x98); sle(s, 50, 2);                              /* total latency */
	sb(s, 0x42); sb(s, 0x06);                                /* retired, L1D access */
	if (ts) {
		sb(s, 0x71);
		sle(s, ts, 8);
	} else {
		sb(s, 0x01);
	}
}

/* ---- the source -------------------------------------------------------------------- */

struct got {
	unsigned n;
	struct access_sample s[MAXS];
	unsigned target_calls;
};

static void on_sample(void *arg, const struct access_sample *a)
{
	struct got *g = arg;

	assert_true(g->n < MAXS);
	g->s[g->n++] = *a;
}

static struct got *cur_got;

static int target(void *arg, uint32_t tgid, uint64_t *start_ns)
{
	(void)arg;
	cur_got->target_calls++;
	if (tgid == 100 || tgid == 200 || tgid == (uint32_t)getpid()) {
		*start_ns = tgid * 10ULL;
		return 1;
	}
	return 0;
}

static void spe_events(struct src_events *ev)
{
	struct src_pmu_opts po = { .sysfs_root = root, .period = 8192 };
	char why[SRC_PMU_WHY_MAX];

	assert_int_equal(src_pmu_spe(&po, ev, why, sizeof(why)), 0);
}

static void add_fake(struct src_spe *s, struct fake *f)
{
	struct perf_ring r;

	assert_int_equal(perf_ring_init(&r, f->mem, DSZ, f->aux, AUXSZ), 0);
	assert_int_equal(src_spe_add_ring(s, (int)f->cpu, &r), 0);
}

static void check(const struct access_sample *a, uint32_t tgid, uint32_t tid, uint64_t t,
		  uint64_t addr, uint8_t rw)
{
	assert_int_equal(a->tgid, tgid);
	assert_int_equal(a->tid, tid);
	assert_int_equal(a->start_ns, tgid * 10ULL);
	assert_true(a->time_ns == t + CLOCK_OFF);
	assert_true(a->addr == addr);
	assert_int_equal(a->rw, rw);
	assert_int_equal(a->weight, 8192);    /* the SPE period: one sample per 8192 ops */
	assert_int_equal(a->size, 0);
}

static void test_glue(void **state)
{
	struct src_events ev;
	struct src_spe_opts o = { .events = &ev, .target = target };
	struct src_spe_stats st;
	struct src_spe *s;
	struct fake f, g;
	struct spe c1 = { .n = 0 }, c2 = { .n = 0 }, c3 = { .n = 0 };
	struct got got;
	uint32_t me = (uint32_t)getpid(), my_tid = (uint32_t)syscall(SYS_gettid);

	memset(&got, 0, sizeof(got));
	cur_got = &got;
	spe_events(&ev);
	assert_int_equal(src_spe_open_offline(&s, &o, on_sample, &got), 0);
	src_spe_set_clock_offset(s, CLOCK_OFF);
	fake_init(&f, 2);
	add_fake(s, &f);

	/* CPU 2: task 100/101 runs from the start, 200/202 from 5000, 300/301 from 7000. */
	itrace_start(&f, 100, 101, 1000);
	switch_to(&f, 100, 101, 200, 202, 5000);
	switch_to(&f, 200, 202, 300, 301, 7000);
	spe_rec(&c1, 1, 0x00, 0x1000, 0, 3000);                 /* load by 100 */
	spe_rec(&c1, 1, 0x01, 0x2000, 0, 6000);                 /* store by 200 */
	spe_rec(&c1, 1, 0x00, 0x3000, my_tid, 6500);            /* context packet: this test */
	spe_rec(&c1, 1, 0x00, 0xffff000012345678ULL, 0, 6600);  /* a kernel address */
	spe_rec(&c1, 2, 0x01, 0x4000, 0, 6700);                 /* a branch */
	spe_rec(&c1, 1, 0x06, 0x5000, 0, 6800);                 /* atomic by 200 */
	spe_rec(&c1, 1, 0x00, 0x6000, 0, 0);                    /* no timestamp: AUX's 9000 */
	aux_chunk(&f, c1.b, c1.n, 0, 9000);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 4);
	check(&got.s[0], 100, 101, 3000, 0x1000, 1);
	check(&got.s[1], 200, 202, 6000, 0x2000, 2);
	check(&got.s[2], me, my_tid, 6500, 0x3000, 1);
	check(&got.s[3], 200, 202, 6800, 0x5000, 3);
	assert_int_equal(got.s[0].cpu, 2);

	/* Later: 300 -> 100 at 10000. A record at 9500 still finds 300 (the switches the
	 * first chunk needed were pruned, not the one in force). */
	switch_to(&f, 300, 301, 100, 101, 10000);
	spe_rec(&c2, 1, 0x00, 0x7000, 0, 9500);
	spe_rec(&c2, 1, 0x00, 0x8000, 0, 11000);
	aux_chunk(&f, c2.b, c2.n, PERF_AUX_FLAG_COLLISION, 12000);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 5);
	check(&got.s[4], 100, 101, 11000, 0x8000, 1);
	assert_int_equal(got.target_calls, 4);   /* 100, 200, this process, 300: once each */
	src_spe_forget(s, 100);

	/* CPU 3: no switch record, no context packet: nobody to charge. Garbage counted. */
	fake_init(&g, 3);
	add_fake(s, &g);
	spe_rec(&c3, 1, 0x00, 0x9000, 0, 500);
	sb(&c3, 0xff);
	spe_rec(&c3, 1, 0x00, 0xa000, 0, 600);                  /* dropped: after garbage */
	aux_chunk(&g, c3.b, c3.n, PERF_AUX_FLAG_TRUNCATED, 700);
	assert_true(src_spe_drain(s, true) > 0);
	assert_int_equal(got.n, 5);

	/* CPU 4: its first record is 100/105 switching out at 2000: before it, 100/105 ran. */
	struct fake h4;
	struct spe c4 = { .n = 0 };
	fake_init(&h4, 4);
	add_fake(s, &h4);
	switch_to(&h4, 100, 105, 0, 0, 2000);
	spe_rec(&c4, 1, 0x00, 0xb000, 0, 1500);
	aux_chunk(&h4, c4.b, c4.n, 0, 2500);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 6);
	check(&got.s[5], 100, 105, 1500, 0xb000, 1);
	/* 100 forgotten (its exit handled), but this record was taken before: the answer
	 * it had stands, not asked again (a process gone would be answered no). */
	assert_int_equal(got.target_calls, 4);
	assert_int_equal(got.s[5].cpu, 4);

	src_spe_stats(s, &st);
	assert_int_equal(st.ncpus, 3);
	assert_int_equal(st.accesses, 6);
	assert_int_equal(st.kernel, 1);
	assert_int_equal(st.not_memory, 1);
	assert_int_equal(st.not_target, 2);      /* 0x6000 at 9000 and 0x7000 at 9500: 300's */
	assert_int_equal(st.from_context, 1);
	assert_int_equal(st.ts_from_aux, 1);
	assert_int_equal(st.no_task, 1);
	assert_int_equal(st.dec.records, 11);
	assert_int_equal(st.dec.bad_packets, 1);
	assert_int_equal(st.dec.dropped_records, 1);
	assert_int_equal(st.ring.aux_records, 4);
	assert_int_equal(st.ring.aux_collision, 1);
	assert_int_equal(st.ring.aux_truncated, 1);
	assert_int_equal(st.ring.aux_bytes, c1.n + c2.n + c3.n + c4.n);
	char line[512];
	src_spe_summary(s, line, sizeof(line));
	assert_non_null(strstr(line, "spe: 6 access samples from 11 records on 3 CPUs"));
	assert_non_null(strstr(line, "1 truncated AUX chunks, 1 collisions"));
	assert_null(strchr(line, '\n'));
	src_spe_close(s);
	free(f.mem);
	free(g.mem);
	free(h4.mem);
}

static int gone_100;

/* 100 is a target until it is gone; then, as the daemon's answer for an exited process,
 * not. */
static int target_until_gone(void *arg, uint32_t tgid, uint64_t *start_ns)
{
	(void)arg;
	cur_got->target_calls++;
	*start_ns = tgid * 10ULL;
	return tgid == 100 && !gone_100;
}

/* A process exits with samples still in the AUX buffers: src_spe_forget keeps its yes for
 * them (without that they were asked again, answered no and dropped), and asks again for
 * samples after the watermark has passed the forget. */
static void test_forget_defers(void **state)
{
	struct src_events ev;
	struct src_spe_opts o = { .events = &ev, .target = target_until_gone };
	struct src_spe_stats st;
	struct src_spe *s;
	struct fake f;
	struct spe c1 = { .n = 0 }, c2 = { .n = 0 }, c3 = { .n = 0 };
	struct got got;

	(void)state;
	memset(&got, 0, sizeof(got));
	cur_got = &got;
	gone_100 = 0;
	spe_events(&ev);
	assert_int_equal(src_spe_open_offline(&s, &o, on_sample, &got), 0);
	src_spe_set_clock_offset(s, CLOCK_OFF);
	fake_init(&f, 2);
	add_fake(s, &f);
	itrace_start(&f, 100, 101, 1000);
	spe_rec(&c1, 1, 0x00, 0x1000, 0, 2000);
	aux_chunk(&f, c1.b, c1.n, 0, 2500);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 1);
	assert_int_equal(got.target_calls, 1);

	/* Its last record is still in the buffer when its exit is handled. */
	spe_rec(&c2, 1, 0x00, 0x2000, 0, 3000);
	aux_chunk(&f, c2.b, c2.n, 0, 3500);
	gone_100 = 1;
	src_spe_forget(s, 100);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 2);
	check(&got.s[1], 100, 101, 3000, 0x2000, 1);
	assert_int_equal(got.target_calls, 1);

	/* Once the watermark passes the forget (a poll past the slack), the entry is gone: a
	 * record of pid 100 is asked about again, and answered no. */
	usleep((useconds_t)(2 * SPE_WATERMARK_SLACK_NS / 1000));
	assert_true(src_spe_poll(s) >= 0);
	assert_true(src_spe_watermark(s) > 0);
	spe_rec(&c3, 1, 0x00, 0x3000, 0, 4000);
	aux_chunk(&f, c3.b, c3.n, 0, 4500);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.target_calls, 2);
	src_spe_stats(s, &st);
	assert_int_equal(st.not_target, 1);
	src_spe_close(s);
	free(f.mem);
}

/* Without the time_zero capability, or without a target filter. */
static void test_no_time_conv(void **state)
{
	struct src_events ev;
	struct src_spe_opts o = { .events = &ev };
	struct src_spe *s;
	struct fake f;
	struct spe c = { .n = 0 };
	struct got got;

	memset(&got, 0, sizeof(got));
	spe_events(&ev);
	assert_int_equal(src_spe_open_offline(&s, &o, on_sample, &got), 0);
	fake_init(&f, 0);
	f.pg->cap_user_time_zero = 0;
	add_fake(s, &f);
	itrace_start(&f, 55, 56, 100);
	spe_rec(&c, 1, 0x00, 0x1000, 0, 5000);   /* a timestamp nobody can convert */
	aux_chunk(&f, c.b, c.n, 0, 8000);
	assert_true(src_spe_drain(s, false) > 0);
	assert_int_equal(got.n, 1);
	assert_int_equal(got.s[0].tgid, 55);
	assert_int_equal(got.s[0].start_ns, 0);
	assert_true(got.s[0].time_ns == 8000);   /* the AUX record's time, offset 0 */
	src_spe_close(s);
	free(f.mem);

	assert_int_equal(src_spe_open_offline(&s, NULL, on_sample, &got), -EINVAL);
}

static void test_attr(void **state)
{
	struct src_events ev;

	spe_events(&ev);
	const struct perf_event_attr *a = &ev.ev[0].attr;
	assert_int_equal(a->type, 10);
	assert_int_equal(a->disabled, 1);        /* enabled once the AUX area is mapped */
	assert_int_equal(a->sample_id_all, 1);
	assert_int_equal(a->context_switch, 1);
	assert_int_equal(a->exclude_kernel, 1);
	assert_int_equal(a->freq, 0);            /* arm_spe refuses frequency mode */
	assert_int_equal(ev.ev[0].probe_cpu, 2); /* first CPU of its cpumask */
	assert_true(a->sample_type & PERF_SAMPLE_TIME);
	assert_true(a->sample_type & PERF_SAMPLE_TID);
}

/* ---- src_spe_open on this machine -------------------------------------------------- */

struct fake_open { int err; unsigned calls; };

static int fail_open(struct perf_event_attr *a, int cpu, void *arg)
{
	struct fake_open *fo = arg;

	(void)a; (void)cpu;
	fo->calls++;
	return fo->err;
}

/* A real perf event without an AUX area: mapping one must fail with a clear line. */
static int dummy_open(struct perf_event_attr *a, int cpu, void *arg)
{
	struct perf_event_attr d;

	(void)a; (void)arg;
	memset(&d, 0, sizeof(d));
	d.size = sizeof(d);
	d.type = PERF_TYPE_SOFTWARE;
	d.config = PERF_COUNT_SW_DUMMY;
	d.disabled = 1;
	long fd = syscall(SYS_perf_event_open, &d, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

static void test_open_errors(void **state)
{
	struct src_events ev;
	struct fake_open fo = { .err = -ENOENT };
	struct src_spe_opts o = { .events = &ev, .open_fn = fail_open, .open_arg = &fo };
	struct src_spe *s = NULL;
	struct got got;
	char err[512];

	if (geteuid() != 0)
		skip();
	spe_events(&ev);
	/* No CPU takes the event (ENOENT: not covered by this SPE instance). */
	assert_int_equal(src_spe_open(&s, &o, on_sample, &got, err, sizeof(err)), -ENODEV);
	assert_string_equal(err, "spe source: no CPU accepted arm_spe_0/load_filter=1/");
	assert_true(fo.calls >= 1);
	/* A CPU refuses for another reason: that reason, one line. */
	fo.err = -EACCES;
	assert_int_equal(src_spe_open(&s, &o, on_sample, &got, err, sizeof(err)), -EACCES);
	assert_string_equal(err, "spe source: perf_event_open(arm_spe_0/load_filter=1/, cpu 0): "
			    "Permission denied");
	/* The kernel refuses an AUX area for an event whose PMU has none. */
	o.open_fn = dummy_open;
	int r = src_spe_open(&s, &o, on_sample, &got, err, sizeof(err));
	assert_true(r < 0);
	print_message("%s\n", err);
	assert_non_null(strstr(err, "spe source: mapping the AUX area of arm_spe_0/load_filter=1/ on cpu 0"));
	assert_null(strchr(err, '\n'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attr),
		cmocka_unit_test(test_glue),
		cmocka_unit_test(test_forget_defers),
		cmocka_unit_test(test_no_time_conv),
		cmocka_unit_test(test_open_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
