/* Hardware access sources and `--access` selection. Builds the perf_event_attr of each
 * source (pebs through libpfm4's encoding, ibs and spe from the PMU's sysfs type and
 * format bits) and picks the first that opens. Estimators (accesses one sample stands
 * for), all period-based so densities compare across sources:
 *   pebs: MEM_INST_RETIRED.ALL_LOADS counts retired loads; a sample every `period` loads
 *         stands for `period` loads. The ldlat event samples loads slower than ldlat
 *         cycles only: `period` such loads (an undercount of all accesses).
 *   ibs:  ibs_op tags one op every `period` dispatched ops (cnt_ctl=1); a tagged load or
 *         store therefore stands for `period` memory ops of its kind.
 *   spe:  one operation every `period` (the sampling interval); a load stands for
 *         `period` operations' worth of loads (records read by src_spe.h).
 *   soft: see daemon/access/src_soft.h (period in ns times an assumed instruction rate). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>

#define PEBS_DEFAULT_PERIOD 10007ULL   /* loads per sample; prime, to avoid loop aliasing */
#define IBS_DEFAULT_PERIOD 65536ULL    /* dispatched ops per sample (multiple of 16) */
#define SPE_DEFAULT_PERIOD 65536ULL    /* operations per sample: ~15k load records/s per
                                        * busy CPU (~0.8 MB/s of AUX data, read in user
                                        * space at ~1.4k instructions each: spe_bench) */
#define SOFT_DEFAULT_FREQ 100ULL       /* cpu-clock samples per second per CPU: ~20 us
                                        * of the sampled task's CPU each under this VM
                                        * (0.2% at 100 Hz; bench/access_overhead.py) */
#define SRC_PMU_WHY_MAX 200            /* bytes of one reason line */
#define SRC_PMU_SYSFS_DEFAULT "/sys"

enum access_src {
	ACCESS_OFF = 0,
	ACCESS_AUTO,
	ACCESS_PEBS,
	ACCESS_IBS,
	ACCESS_SPE,
	ACCESS_SOFT,
	ACCESS_SRC_MAX,
};

/* "auto", "pebs", ... -> enum; -EINVAL for anything else. */
int access_src_parse(const char *s, enum access_src *out);
const char *access_src_name(enum access_src s);

struct src_pmu_opts {
	uint64_t period;          /* 0: the source's default (for soft: use freq) */
	uint64_t freq;            /* soft only: samples/s per CPU; 0: SOFT_DEFAULT_FREQ */
	uint32_t ldlat;           /* pebs/ibs: add/set a load-latency filter (cycles), 0 = off */
	const char *sysfs_root;   /* NULL: SRC_PMU_SYSFS_DEFAULT; tests point it at a fake tree */
};

/* A sysfs format: which attr field and which of its bits, e.g. "config:0-7,32-35". */
#define PMU_FORMAT_MAX_RANGES 4
struct pmu_format {
	int field;                /* 0 config, 1 config1, 2 config2 */
	unsigned nranges;
	struct { uint8_t lo, hi; } r[PMU_FORMAT_MAX_RANGES];
};

int pmu_format_parse(const char *spec, struct pmu_format *f);
/* Scatters value's low bits into the format's bits of attr (value must fit: -ERANGE). */
int pmu_format_set(struct perf_event_attr *a, const struct pmu_format *f, uint64_t value);
/* <root>/bus/event_source/devices/<pmu>/type and .../format/<name>; -ENOENT if absent. */
int pmu_sysfs_type(const char *root, const char *pmu, uint32_t *type);
int pmu_sysfs_format(const char *root, const char *pmu, const char *name, struct pmu_format *f);
/* First arm_spe_N PMU under root (lowest N), its name in name. -ENOENT if none. */
int pmu_find_spe(const char *root, char *name, size_t namesz);
/* Lowest CPU in <pmu>/cpumask (0 when the PMU has none: it covers every CPU). */
int pmu_sysfs_first_cpu(const char *root, const char *pmu, int *cpu);

/* One event a source opens, with its estimator. */
struct src_event {
	struct perf_event_attr attr;
	char name[96];            /* e.g. "skl::MEM_INST_RETIRED:ALL_LOADS" */
	uint64_t est_per_sample;  /* accesses one sample stands for (fixed-period sources) */
	int probe_cpu;            /* CPU access_select opens it on (one the PMU covers) */
};

#define SRC_MAX_EVENTS 2
struct src_events {
	enum access_src src;
	unsigned n;
	struct src_event ev[SRC_MAX_EVENTS];
};

/* Attr construction. Each returns 0, or -errno with a one-line reason in why. */
int src_pmu_pebs(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz);
int src_pmu_ibs(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz);
int src_pmu_spe(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz);
/* cpu-clock sampling for the soft source (frequency mode unless o->period is set, ns). */
int src_pmu_soft(const struct src_pmu_opts *o, struct src_events *out, char *why, size_t whysz);

/* Opens attr on cpu for every process (pid -1) and returns the fd or -errno. The
 * default calls perf_event_open(2); tests substitute one. */
typedef int (*src_open_fn)(struct perf_event_attr *attr, int cpu, void *arg);
int src_perf_event_open(struct perf_event_attr *attr, int cpu, void *arg);

struct access_choice {
	enum access_src src;                  /* ACCESS_OFF if nothing opened */
	struct src_events events;             /* what to open per CPU */
	unsigned nreasons;
	char reasons[ACCESS_SRC_MAX][SRC_PMU_WHY_MAX];   /* "pebs: why it did not open" */
};

/* Resolves req (AUTO tries pebs, ibs, spe, soft in that order; each probe builds the
 * attrs and opens them once on CPU 0 through open_fn, NULL = src_perf_event_open). On
 * success out->src is the source to use and out->reasons holds one line per earlier
 * source that did not open. An explicit source that does not open, or AUTO with none,
 * returns -errno with the one-line reason in err. ACCESS_OFF returns 0 at once. */
int access_select(enum access_src req, const struct src_pmu_opts *o, src_open_fn open_fn,
		  void *open_arg, struct access_choice *out, char *err, size_t errsz);
