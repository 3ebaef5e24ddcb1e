/* The spe access source: one arm_spe event per CPU (src_pmu_spe's attr, load filter on),
 * its AUX area read by perf_aux.c, decoded by spe_decode.c, and each user-space load or
 * store record turned into an access_sample for the same callback the other sources use.
 * Who: the thread id comes from the record's context packet (CONTEXTIDR, written by
 * kernels with CONFIG_PID_IN_CONTEXTIDR and emitted only for privileged events), else
 * from the CPU's context-switch records (attr.context_switch; PERF_RECORD_ITRACE_START
 * names the task running when the event first started); tid -> tgid from the pid/tid
 * of those records, then /proc. When: the record's generic-timer timestamp (the virtual
 * counter, pct_enable off: what arm64's sched_clock reads in a guest, and the physical
 * count on a host) through the mmap page's time_zero/time_mult/time_shift to perf's
 * clock, then perf_clock.h's measured offset to CLOCK_MONOTONIC (the allocation events'
 * clock); a record without a usable timestamp gets its AUX record's time.
 * Estimator (spe): the hardware picks one operation every `period` (attr.sample_period,
 * jittered around it) and the load filter keeps the picked ones that are loads, so one
 * load record stands for `period` operations' worth of loads: weight = period, the same
 * as src_pmu.h's est_per_sample. Stores (only with a store filter) count the same way.
 * Delivery: records reach the AUX area when the buffer fills or the event stops, so
 * every SPE_FLUSH_NS the poll stops and restarts each event (the driver then hands over
 * what the hardware wrote); the watermark is the time of the last such flush. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/access/access_sample.h"
#include "daemon/perf/perf_aux.h"
#include "daemon/access/spe_decode.h"
#include "daemon/access/src_pmu.h"

#define SPE_DATA_RING_BYTES (256u << 10)   /* per CPU: switch, AUX and LOST records */
#define SPE_AUX_BYTES (512u << 10)         /* per CPU: SPE records (~50-70 bytes each) */
#define SPE_FLUSH_NS 250000000ULL          /* stop/start each event this often */
#define SPE_WATERMARK_SLACK_NS 2000000ULL  /* clock-offset and timestamp slack */
#define SPE_SWITCH_MAX 65536               /* context switches kept per CPU between decodes */
#define SPE_TIDS_MAX 65536                 /* tid -> tgid entries (cleared when full) */
#define SPE_TARGETS_MAX 4096               /* tgid -> target answer cache (cleared when full) */
#define SPE_TARGET_RECHECK_NS 1000000000ULL   /* a "not a target" answer is asked again after */

/* Is tgid traced: 1 with its process start time (task start_time, ns) in *start_ns, 0 no. */
typedef int (*src_spe_target_fn)(void *arg, uint32_t tgid, uint64_t *start_ns);

struct src_spe_opts {
	const struct src_events *events;   /* src_pmu_spe's; ev[0] is opened on every CPU */
	size_t data_bytes, aux_bytes;      /* 0: SPE_DATA_RING_BYTES, SPE_AUX_BYTES */
	src_spe_target_fn target;          /* NULL: every process, start_ns 0 */
	void *target_arg;
	src_open_fn open_fn;               /* NULL: src_perf_event_open */
	void *open_arg;
};

struct src_spe_stats {
	struct perf_ring_stats ring;       /* summed over CPUs */
	struct spe_decode_stats dec;
	uint64_t accesses;                 /* access samples delivered */
	uint64_t not_memory;               /* records of other operations (branches, ...) */
	uint64_t no_va;                    /* loads/stores without a data address */
	uint64_t kernel;                   /* records of kernel code or kernel addresses */
	uint64_t no_task;                  /* records nothing placed in a task */
	uint64_t not_target;               /* records of processes not traced */
	uint64_t from_context;             /* tid taken from a context packet */
	uint64_t ts_from_aux;              /* timed by their AUX record: no usable timestamp */
	uint64_t switch_overflow;          /* switch history entries dropped (per-CPU cap) */
	uint64_t flushes;
	uint64_t ncpus;                    /* CPUs with an open event (or ring, offline) */
};

typedef void (*src_spe_cb)(void *arg, const struct access_sample *s);
struct src_spe;

/* Opens the event on every CPU that takes it, maps its rings, measures the clock offset
 * and enables. -errno with one line in err. */
int src_spe_open(struct src_spe **out, const struct src_spe_opts *o, src_spe_cb cb,
		 void *arg, char *err, size_t errsz);
/* Flushes when SPE_FLUSH_NS have passed, then reads every ring. Records read, or -errno. */
int src_spe_poll(struct src_spe *s);
/* The end: flushes and reads everything, AUX bytes without records included. */
int src_spe_finish(struct src_spe *s);
/* Every sample with time < this (CLOCK_MONOTONIC ns) has been delivered. */
uint64_t src_spe_watermark(const struct src_spe *s);
/* A process exec'd or exited: its target answer is asked again, for samples taken after
 * now; those taken before, still in the buffers, keep a yes until the watermark passes. */
void src_spe_forget(struct src_spe *s, uint32_t tgid);
void src_spe_stats(const struct src_spe *s, struct src_spe_stats *out);
/* One line of what was delivered and lost, for the end of a run. */
void src_spe_summary(const struct src_spe *s, char *buf, size_t n);
void src_spe_close(struct src_spe *s);

/* Without events (tests, replays): rings the caller built, read with src_spe_drain. */
int src_spe_open_offline(struct src_spe **out, const struct src_spe_opts *o, src_spe_cb cb,
			 void *arg);
/* Takes over ring (its struct is copied; perf_ring_free'd at close) as cpu's. */
int src_spe_add_ring(struct src_spe *s, int cpu, const struct perf_ring *ring);
void src_spe_set_clock_offset(struct src_spe *s, int64_t mono_minus_perf);
/* Reads every ring once, no flush; final also hands out undescribed AUX bytes. */
int src_spe_drain(struct src_spe *s, bool final);
