/* Access-source attrs and selection. PEBS events come from libpfm4 (the one source of
 * truth for Intel event codes per model); IBS and SPE attrs are assembled from the
 * PMU's own sysfs description, so a kernel that moves a bit is followed, not fought.
 * Nothing here reads samples: see src_soft.c (BPF consumer of pebs/ibs/soft),
 * src_spe.c (SPE's AUX-area records) and perf_sample.c. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "daemon/access/src_pmu.h"   /* linux/perf_event.h before libpfm4's own copy */
#include <perfmon/pfmlib_perf_event.h>

#define SYSFS_PMU_DIR "bus/event_source/devices"
/* Fields the access sources ask for: PERF_SAMPLE_ADDR is what the BPF consumer reads as
 * bpf_perf_event_data.addr; the rest serve a direct perf-ring reader (perf_sample.c). */
#define SRC_HW_SAMPLE_TYPE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
			    PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT | \
			    PERF_SAMPLE_PERIOD | PERF_SAMPLE_CPU)

static const char *const src_names[ACCESS_SRC_MAX] = {
	[ACCESS_OFF] = "off", [ACCESS_AUTO] = "auto", [ACCESS_PEBS] = "pebs",
	[ACCESS_IBS] = "ibs", [ACCESS_SPE] = "spe", [ACCESS_SOFT] = "soft",
};

int access_src_parse(const char *s, enum access_src *out)
{
	for (int i = 0; i < ACCESS_SRC_MAX; i++)
		if (s && !strcmp(s, src_names[i])) {
			*out = (enum access_src)i;
			return 0;
		}
	return -EINVAL;
}

const char *access_src_name(enum access_src s)
{
	return (unsigned)s < ACCESS_SRC_MAX ? src_names[s] : "?";
}

static const char *root_of(const struct src_pmu_opts *o)
{
	return o && o->sysfs_root ? o->sysfs_root : SRC_PMU_SYSFS_DEFAULT;
}

int pmu_format_parse(const char *spec, struct pmu_format *f)
{
	const char *p = spec;
	char *end;

	memset(f, 0, sizeof(*f));
	if (!strncmp(p, "config2:", 8)) {
		f->field = 2;
		p += 8;
	} else if (!strncmp(p, "config1:", 8)) {
		f->field = 1;
		p += 8;
	} else if (!strncmp(p, "config:", 7)) {
		f->field = 0;
		p += 7;
	} else {
		return -EINVAL;
	}
	for (;;) {
		unsigned long lo, hi;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		lo = strtoul(p, &end, 10);
		hi = lo;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				return -EINVAL;
			hi = strtoul(p, &end, 10);
			p = end;
		}
		if (lo > hi || hi > 63 || f->nranges >= PMU_FORMAT_MAX_RANGES)
			return -EINVAL;
		f->r[f->nranges].lo = (uint8_t)lo;
		f->r[f->nranges].hi = (uint8_t)hi;
		f->nranges++;
		if (*p == ',') {
			p++;
			continue;
		}
		while (*p == '\n' || *p == ' ')
			p++;
		return *p ? -EINVAL : 0;
	}
}

int pmu_format_set(struct perf_event_attr *a, const struct pmu_format *f, uint64_t value)
{
	__u64 *dst = f->field == 0 ? &a->config : f->field == 1 ? &a->config1 : &a->config2;

	for (unsigned i = 0; i < f->nranges; i++) {
		unsigned w = f->r[i].hi - f->r[i].lo + 1;
		uint64_t mask = w == 64 ? ~0ULL : ((1ULL << w) - 1);
		*dst = (*dst & ~(mask << f->r[i].lo)) | ((value & mask) << f->r[i].lo);
		value = w == 64 ? 0 : value >> w;
	}
	return value ? -ERANGE : 0;
}

static int read_small(const char *path, char *buf, size_t n)
{
	FILE *fp = fopen(path, "re");
	size_t got;

	if (!fp)
		return -errno;
	got = fread(buf, 1, n - 1, fp);
	fclose(fp);
	buf[got] = '\0';
	return 0;
}

int pmu_sysfs_type(const char *root, const char *pmu, uint32_t *type)
{
	char path[512], buf[32], *end;
	unsigned long v;
	int r;

	snprintf(path, sizeof(path), "%s/" SYSFS_PMU_DIR "/%s/type", root, pmu);
	if ((r = read_small(path, buf, sizeof(buf))) < 0)
		return r;
	v = strtoul(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || v > UINT32_MAX)
		return -EINVAL;
	*type = (uint32_t)v;
	return 0;
}

int pmu_sysfs_format(const char *root, const char *pmu, const char *name, struct pmu_format *f)
{
	char path[512], buf[128];
	int r;

	snprintf(path, sizeof(path), "%s/" SYSFS_PMU_DIR "/%s/format/%s", root, pmu, name);
	if ((r = read_small(path, buf, sizeof(buf))) < 0)
		return r;
	return pmu_format_parse(buf, f);
}

int pmu_find_spe(const char *root, char *name, size_t namesz)
{
	char path[512];
	struct dirent *de;
	long best = -1;
	DIR *d;

	snprintf(path, sizeof(path), "%s/" SYSFS_PMU_DIR, root);
	if (!(d = opendir(path)))
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long n;
		if (strncmp(de->d_name, "arm_spe_", 8) || !de->d_name[8])
			continue;
		n = strtol(de->d_name + 8, &end, 10);
		if (*end || n < 0)
			continue;
		if (best < 0 || n < best)
			best = n;
	}
	closedir(d);
	if (best < 0)
		return -ENOENT;
	snprintf(name, namesz, "arm_spe_%ld", best);
	return 0;
}

int pmu_sysfs_first_cpu(const char *root, const char *pmu, int *cpu)
{
	char path[512], buf[4096], *end;
	unsigned long v;
	int r;

	*cpu = 0;
	snprintf(path, sizeof(path), "%s/" SYSFS_PMU_DIR "/%s/cpumask", root, pmu);
	if ((r = read_small(path, buf, sizeof(buf))) < 0)
		return r;
	/* A cpulist ("0-3,8-11"); its first number is the lowest CPU. */
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	v = strtoul(buf, &end, 10);
	if (v > INT32_MAX || (*end && !strchr("-,\n", *end)))
		return -EINVAL;
	*cpu = (int)v;
	return 0;
}

/* Optional format bit: set it if the PMU has it; -ENOENT quietly means "not supported". */
static int set_fmt(const char *root, const char *pmu, const char *fmt,
		   struct perf_event_attr *a, uint64_t v)
{
	struct pmu_format f;
	int r = pmu_sysfs_format(root, pmu, fmt, &f);

	return r < 0 ? r : pmu_format_set(a, &f, v);
}

static void base_attr(struct perf_event_attr *a, uint64_t period)
{
	a->size = sizeof(*a);
	a->sample_period = period;
	a->sample_type = SRC_HW_SAMPLE_TYPE;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->exclude_guest = 1;
}

static int pfm_encode(const char *ev, struct src_event *out, int *pfm_err)
{
	pfm_perf_encode_arg_t arg;
	char *fstr = NULL;
	int r;

	memset(&arg, 0, sizeof(arg));
	memset(&out->attr, 0, sizeof(out->attr));
	arg.attr = &out->attr;
	arg.fstr = &fstr;
	arg.size = sizeof(arg);
	r = pfm_get_os_event_encoding(ev, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
	*pfm_err = r;
	if (r != PFM_SUCCESS)
		return -ENOENT;
	snprintf(out->name, sizeof(out->name), "%s", fstr ? fstr : ev);
	/* The full fstr lists every modifier; keep "pmu::EVENT:UMASK" readable. */
	char *mod = strstr(out->name, ":e=");
	if (mod)
		*mod = '\0';
	free(fstr);
	return 0;
}

int src_pmu_pebs(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz)
{
	static const char *const loads[] = { "MEM_INST_RETIRED:ALL_LOADS", "MEM_UOPS_RETIRED:ALL_LOADS" };
	uint64_t period = o && o->period ? o->period : PEBS_DEFAULT_PERIOD;
	int r, perr = PFM_SUCCESS;

	memset(out, 0, sizeof(*out));
	out->src = ACCESS_PEBS;
	if ((r = pfm_initialize()) != PFM_SUCCESS) {
		snprintf(why, whysz, "libpfm4 did not initialize: %s", pfm_strerror(r));
		return -ENODEV;
	}
	r = -ENOENT;
	for (size_t i = 0; i < sizeof(loads) / sizeof(loads[0]) && r; i++)
		r = pfm_encode(loads[i], &out->ev[0], &perr);
	if (r) {
		snprintf(why, whysz, "no Intel PMU with a precise all-loads event "
			 "(libpfm4: MEM_INST_RETIRED:ALL_LOADS: %s)", pfm_strerror(perr));
		return -ENODEV;
	}
	out->n = 1;
	if (o && o->ldlat) {
		char ev[64];
		snprintf(ev, sizeof(ev), "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=%u", o->ldlat);
		if (pfm_encode(ev, &out->ev[1], &perr)) {
			snprintf(why, whysz, "no load-latency event (libpfm4: %s: %s)", ev,
				 pfm_strerror(perr));
			return -ENODEV;
		}
		out->n = 2;
	}
	for (unsigned i = 0; i < out->n; i++) {
		struct perf_event_attr *a = &out->ev[i].attr;
		base_attr(a, period);
		a->precise_ip = 2;   /* PEBS: the sampled IP and address are the load's own */
		out->ev[i].est_per_sample = period;
	}
	return 0;
}

int src_pmu_ibs(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz)
{
	const char *root = root_of(o);
	uint64_t period = o && o->period ? o->period : IBS_DEFAULT_PERIOD;
	struct perf_event_attr *a = &out->ev[0].attr;
	uint32_t type;
	int r;

	memset(out, 0, sizeof(*out));
	out->src = ACCESS_IBS;
	if ((r = pmu_sysfs_type(root, "ibs_op", &type)) < 0) {
		snprintf(why, whysz, "no ibs_op PMU (%s/" SYSFS_PMU_DIR "/ibs_op/type: %s)", root,
			 strerror(-r));
		return -ENODEV;
	}
	period &= ~15ULL;    /* IbsOpMaxCnt drops the low 4 bits */
	if (period < 16)
		period = 16;
	base_attr(a, period);
	a->type = type;
	/* cnt_ctl=1: the period counts dispatched ops, so one sample stands for `period` ops. */
	if ((r = set_fmt(root, "ibs_op", "cnt_ctl", a, 1)) < 0 && r != -ENOENT)
		goto bad_format;
	/* ibs_op filters privilege only where the kernel exposes swfilt; elsewhere kernel
	 * samples arrive and the consumer drops them (exclude_kernel would be EINVAL). */
	r = set_fmt(root, "ibs_op", "swfilt", a, 1);
	if (r == -ENOENT)
		a->exclude_kernel = 0;
	else if (r < 0)
		goto bad_format;
	if (o && o->ldlat) {
		/* The load filter: Zen 5's load-latency threshold (loads only). */
		if ((r = set_fmt(root, "ibs_op", "ldlat", a, o->ldlat)) < 0) {
			snprintf(why, whysz, "ibs_op has no load-latency filter (format/ldlat: %s)",
				 strerror(-r));
			return -EOPNOTSUPP;
		}
	}
	snprintf(out->ev[0].name, sizeof(out->ev[0].name), "ibs_op/cnt_ctl=1/");
	out->ev[0].est_per_sample = period;
	out->n = 1;
	return 0;
bad_format:
	snprintf(why, whysz, "ibs_op format unreadable: %s", strerror(-r));
	return r;
}

int src_pmu_spe(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz)
{
	const char *root = root_of(o);
	uint64_t period = o && o->period ? o->period : SPE_DEFAULT_PERIOD;
	struct perf_event_attr *a = &out->ev[0].attr;
	char pmu[64];
	uint32_t type;
	int r;

	memset(out, 0, sizeof(*out));
	out->src = ACCESS_SPE;
	if ((r = pmu_find_spe(root, pmu, sizeof(pmu))) < 0 ||
	    (r = pmu_sysfs_type(root, pmu, &type)) < 0) {
		snprintf(why, whysz, "no arm_spe PMU under %s/" SYSFS_PMU_DIR " (%s)", root,
			 strerror(-r));
		return -ENODEV;
	}
	base_attr(a, period);
	a->type = type;
	/* Opened disabled: arm_spe starts only once its AUX buffer is mapped (src_spe.c
	 * enables it then). sample_id_all + context_switch: the data ring says who ran
	 * when, for records without a context packet. */
	a->disabled = 1;
	a->sample_id_all = 1;
	a->context_switch = 1;
	/* An SPE instance may cover only some CPUs (big.LITTLE): probe on one it covers. */
	if ((r = pmu_sysfs_first_cpu(root, pmu, &out->ev[0].probe_cpu)) < 0 && r != -ENOENT) {
		snprintf(why, whysz, "%s/cpumask unreadable: %s", pmu, strerror(-r));
		return r;
	}
	/* load_filter is the point of SPE here: without it most records are not loads. */
	if ((r = set_fmt(root, pmu, "load_filter", a, 1)) < 0) {
		snprintf(why, whysz, "%s has no load filter (format/load_filter: %s)", pmu,
			 strerror(-r));
		return -EOPNOTSUPP;
	}
	/* Timestamps for ordering against allocation events; jitter against aliasing. */
	if ((r = set_fmt(root, pmu, "ts_enable", a, 1)) < 0 && r != -ENOENT)
		return r;
	if ((r = set_fmt(root, pmu, "jitter", a, 1)) < 0 && r != -ENOENT)
		return r;
	if (o && o->ldlat && (r = set_fmt(root, pmu, "min_latency", a, o->ldlat)) < 0 &&
	    r != -ENOENT)
		return r;
	snprintf(out->ev[0].name, sizeof(out->ev[0].name), "%s/load_filter=1/", pmu);
	out->ev[0].est_per_sample = period;
	out->n = 1;
	return 0;
}

int src_pmu_soft(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz)
{
	struct perf_event_attr *a = &out->ev[0].attr;

	memset(out, 0, sizeof(*out));
	out->src = ACCESS_SOFT;
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD;
	if (o && o->period) {
		a->sample_period = o->period;            /* ns of CPU time */
	} else {
		a->freq = 1;
		a->sample_freq = o && o->freq ? o->freq : SOFT_DEFAULT_FREQ;
	}
	/* Kernel-mode samples are kept so the BPF program can count them (it drops them). */
	snprintf(out->ev[0].name, sizeof(out->ev[0].name), "cpu-clock");
	out->ev[0].est_per_sample = 0;   /* per sample, from its period: src_soft.h */
	out->n = 1;
	(void)why; (void)whysz;
	return 0;
}

int src_perf_event_open(struct perf_event_attr *attr, int cpu, void *arg)
{
	long fd = syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	(void)arg;
	return fd < 0 ? -errno : (int)fd;
}

static const char *open_hint(int err)
{
	switch (err) {
	case -ENOENT: case -ENODEV: return "the PMU does not support this event here";
	case -EACCES: case -EPERM: return "not permitted (root or CAP_PERFMON, perf_event_paranoid)";
	case -EOPNOTSUPP: return "the PMU does not support sampling this event";
	case -EINVAL: return "attr rejected by the kernel";
	case -EBUSY: return "PMU busy (another user holds it)";
	}
	return "";
}

/* Builds the source's attrs and opens each once on CPU 0. */
static int probe(enum access_src s, const struct src_pmu_opts *o, src_open_fn open_fn,
		 void *arg, struct src_events *ev, char *why, size_t whysz)
{
	int r;

	switch (s) {
	case ACCESS_PEBS: r = src_pmu_pebs(o, ev, why, whysz); break;
	case ACCESS_IBS: r = src_pmu_ibs(o, ev, why, whysz); break;
	case ACCESS_SPE: r = src_pmu_spe(o, ev, why, whysz); break;
	case ACCESS_SOFT: r = src_pmu_soft(o, ev, why, whysz); break;
	default: snprintf(why, whysz, "not a source"); return -EINVAL;
	}
	if (r < 0)
		return r;
	for (unsigned i = 0; i < ev->n; i++) {
		struct perf_event_attr a = ev->ev[i].attr;
		int fd = open_fn(&a, ev->ev[i].probe_cpu, arg);
		if (fd < 0) {
			snprintf(why, whysz, "perf_event_open(%s): %s%s%s", ev->ev[i].name,
				 strerror(-fd), *open_hint(fd) ? ": " : "", open_hint(fd));
			return fd;
		}
		close(fd);
	}
	return 0;
}

int access_select(enum access_src req, const struct src_pmu_opts *o, src_open_fn open_fn,
		  void *open_arg, struct access_choice *out, char *err, size_t errsz)
{
	static const enum access_src order[] = { ACCESS_PEBS, ACCESS_IBS, ACCESS_SPE, ACCESS_SOFT };
	char why[SRC_PMU_WHY_MAX - 16];
	int r;

	memset(out, 0, sizeof(*out));
	if (!open_fn)
		open_fn = src_perf_event_open;
	if (req == ACCESS_OFF)
		return 0;
	if (req != ACCESS_AUTO) {
		if ((unsigned)req >= ACCESS_SRC_MAX) {
			snprintf(err, errsz, "access source %d: unknown", (int)req);
			return -EINVAL;
		}
		why[0] = '\0';
		r = probe(req, o, open_fn, open_arg, &out->events, why, sizeof(why));
		if (r < 0) {
			snprintf(err, errsz, "access source %s: %s", access_src_name(req), why);
			return r;
		}
		out->src = req;
		return 0;
	}
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		why[0] = '\0';
		r = probe(order[i], o, open_fn, open_arg, &out->events, why, sizeof(why));
		if (r == 0) {
			out->src = order[i];
			return 0;
		}
		snprintf(out->reasons[out->nreasons++], SRC_PMU_WHY_MAX, "%s: %s",
			 access_src_name(order[i]), why);
	}
	memset(&out->events, 0, sizeof(out->events));
	snprintf(err, errsz, "access source auto: none of pebs, ibs, spe, soft opened "
		 "(soft: %s)", why);
	return -ENODEV;
}
