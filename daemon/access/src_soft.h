/* The soft access source: one sampling perf event per online CPU (cpu-clock by default,
 * or the events of a PMU source) with soft.bpf.c attached; each user-mode sample of a
 * target is decoded (symbolizer/insn.h, bytes read from the mapped file at its file
 * offset, cached per build-id + offset) into access samples for a callback.
 * Estimator (soft): a cpu-clock sample every P ns of CPU time stands for the ~P * R
 * instructions executed since the last one, R measured for the run (soft_calib.h;
 * SOFT_EST_INSNS_PER_NS where it cannot be, and in offline instances). The sample's
 * straight-line window of K instructions (symbolizer/insn_window.h) stands for them
 * alike: it stands for P * R * M / K accesses (M memory operands in the window),
 * spread evenly over the R' operands recovered (P * R * M / (K * R') each). Without a
 * window (no function symbol), the instruction at the IP, or if it accesses no memory
 * the one that retired just before it (skid), stands for P * R * m accesses, m the mean
 * of M / K over this run's window samples so far (SOFT_MEM_PER_INSN before any), spread
 * over its operands: the sample's instructions are not all memory accesses either.
 * For PMU events (SOFT_F_ADDR) the weight is the source's est_per_sample (src_pmu.h); a
 * PMU sample without a data address is counted (pmu_no_addr) and dropped, never weighted
 * as a timer sample. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/access/access_sample.h"
#include "daemon/access/soft_calib.h"
#include "daemon/access/src_pmu.h"
#include "symbolizer/insn.h"
#include "symbolizer/insn_window.h"
#include "bpf/soft.h"

#define SOFT_EST_INSNS_PER_NS 2          /* instructions per ns of CPU when none is measured */
#define SOFT_MEM_PER_INSN 0.4           /* memory operands per instruction before windows say */
#define SOFT_MEM_PER_INSN_WEIGHT 16      /* ... counted as this many window samples */
#define SOFT_REP_WORD 8                  /* a rep sample's weight counts 8-byte words */
#define SOFT_MAPS_RELOAD_NS 20000000ULL  /* an IP outside known maps rereads them at most this often */
#define SOFT_WATERMARK_SLACK_NS 2000000ULL  /* samples may trail the ring's order by this much */
#define SOFT_PROCS_MAX 4096              /* processes whose maps are cached */
#define SOFT_PREV_MAX_BYTES 65536        /* longest function prefix decoded to find a predecessor */

struct src_soft_opts {
	const struct src_events *events;  /* NULL: cpu-clock from src_pmu_soft(freq/period) */
	uint64_t freq, period;            /* for the default cpu-clock event */
	int targets_fd;                   /* >= 0: share this targets map (alloc's); else own */
	bool all_processes;               /* ignore targets (fleet mode) */
};

struct src_soft_stats {
	uint64_t bpf[SOFTCNT_MAX];           /* enum soft_counter (bpf/soft.h), summed over CPUs */
	uint64_t events;                  /* ring records read */
	uint64_t accesses;                /* access samples delivered */
	uint64_t from_window;             /* samples with accesses from their straight-line window */
	uint64_t from_ip;                 /* samples whose IP instruction accessed memory */
	uint64_t from_prev;               /* ... whose predecessor did instead (skid, insn.h) */
	uint64_t prev_unknown;            /* predecessor not decodable: no function symbol */
	uint64_t cfi_starts;              /* functions found by their FDE, not a symbol (decodes) */
	uint64_t no_access;               /* samples with no access from either */
	uint64_t fault_time;              /* a page fault's time, at its instruction and page
	                                   * (bpf/soft.h SOFT_F_FAULT): weighed as no access */
	uint64_t code_from_file, code_from_bpf, code_unavailable;
	uint64_t no_mapping;              /* IP in no mapping of the process */
	uint64_t pmu_no_addr;             /* PMU samples without a data address (dropped) */
	uint64_t nevents_open;            /* perf events opened (events x CPUs) */
};

typedef void (*src_soft_cb)(void *arg, const struct access_sample *s);
struct src_soft;

/* Opens, loads and attaches. On failure returns -errno and writes one line into err. */
int src_soft_open(struct src_soft **out, const struct src_soft_opts *o, src_soft_cb cb,
		  void *arg, char *err, size_t errsz);
int src_soft_add_target(struct src_soft *s, uint32_t pid);
/* A process exec'd or exited: the records in the ring are read first (its samples there
 * were taken under the maps being dropped), then its cached maps are dropped. */
void src_soft_forget(struct src_soft *s, uint32_t tgid);
/* Runs every event at scale (0 < scale <= 1) of its configured rate: frequency-mode
 * events (cpu-clock) at freq * scale, period-mode ones (PMUs) at period / scale; the
 * events are reopened (the old ones closed once the new ones sample). Estimates follow:
 * a soft sample's weight comes from its own period, a PMU sample's is scaled by its
 * period over the configured one. 0, -EINVAL, or -errno (then some CPUs may still run
 * at the previous rate). */
int src_soft_set_scale(struct src_soft *s, double scale);
/* The rate in force for the first event and its unit ("Hz per CPU", "events per sample",
 * "ns of CPU per sample"); -1 (unit NULL) when nothing is open. */
double src_soft_rate(const struct src_soft *s, const char **unit);
/* Reads what the ring holds (waiting up to timeout_ms); returns records read or -errno. */
int src_soft_poll(struct src_soft *s, int timeout_ms);
/* Every sample with time < this (CLOCK_MONOTONIC ns) has been delivered: for attrib_advance. */
uint64_t src_soft_watermark(const struct src_soft *s);
int src_soft_ring_fd(const struct src_soft *s);
void src_soft_stats(const struct src_soft *s, struct src_soft_stats *out);
const struct insn_stats *src_soft_insn_stats(const struct src_soft *s);
const struct insn_win_stats *src_soft_win_stats(const struct src_soft *s);
/* The instruction rate a timer sample's weight uses (calibrated at src_soft_open). */
double src_soft_insns_per_ns(const struct src_soft *s);
/* Whether soft.bpf.c was loaded against the cached minimized kernel BTF (core_btf.h). */
bool src_soft_core_btf_used(const struct src_soft *s);
/* Whether timer samples on a page fault's time are told apart (bpf/soft.h
 * SOFT_F_FAULT); if not, *why says why. The first touch measured at start and the
 * window it gave, ns. */
bool src_soft_faults_told(const struct src_soft *s, double *first_touch_ns,
			  uint64_t *window_ns, const char **why);
/* The rep movsb rates, by copy size, a sample inside a rep string instruction stands for
 * (n 0: unmeasured). */
const struct soft_rep_curve *src_soft_rep_curve(const struct src_soft *s);
/* Sets them (replays and tests of an offline instance; src_soft_open measures them). */
void src_soft_set_rep_curve(struct src_soft *s, const struct soft_rep_curve *c);
void src_soft_close(struct src_soft *s);

/* Decodes one ring record (struct soft_event) into access samples; no BPF needed, so it
 * is unit-testable. The process's maps come from /proc. Returns accesses delivered. */
int src_soft_handle(struct src_soft *s, const void *data, size_t len);
/* A decoder-only instance for src_soft_handle (tests, replays). */
int src_soft_open_offline(struct src_soft **out, src_soft_cb cb, void *arg);
/* The events whose samples it decodes (offline instances: as if opened with them). */
void src_soft_set_events(struct src_soft *s, const struct src_events *ev);
