/* The soft source's instruction rate: a cpu-clock sample stands for period x rate
 * instructions, rate = this CPU's clock (cycles per ns, measured once per run with a
 * chain of dependent adds, one cycle each on every x86-64 core, timed in thread CPU
 * time, best of SOFT_CALIB_REPEATS so that preemption only makes it slower) times
 * SOFT_EST_IPC. About 1 ms. The IPC is the one assumption left: code that stalls on
 * memory retires fewer instructions per cycle (its accesses are over-estimated), tight
 * loops of L1 hits more (under-estimated); bench/access_dhat.py measures both. */
#pragma once
#include <stddef.h>

#define SOFT_EST_IPC 1.0           /* instructions per cycle: the order of what warehouse-scale
                                    * fleets measure (Kanev et al., ISCA 2015: IPC about 1) */
#define SOFT_CALIB_ITERS 100000    /* loop iterations per measurement (8 cycles each) */
#define SOFT_CALIB_REPEATS 5
#define SOFT_CALIB_MIN 0.25        /* cycles per ns accepted from a measurement */
#define SOFT_CALIB_MAX 8.0

/* This CPU's cycles per ns of thread CPU time, or 0 when it cannot be measured (not
 * x86-64, no thread CPU clock, or outside [MIN, MAX]). */
double soft_calib_cycles_per_ns(void);
/* The instruction rate for the soft estimator: cycles per ns x SOFT_EST_IPC, or
 * fallback when the clock cannot be measured. */
double soft_calib_insns_per_ns(double fallback);

#define SOFT_CALIB_REP_MOVED (2u << 20) /* bytes moved per rep movsb measurement (~20 us at
                                        * L2 rates: above the clock's cost) */
#define SOFT_CALIB_REP_MIN 0.5      /* bytes per ns accepted from a measurement */
#define SOFT_CALIB_REP_MAX 1024.0
#define SOFT_CALIB_REP_SKEW 2048    /* (dst - src) mod 4096 of the calibration's copies */
#define SOFT_REP_SIZES 7            /* copy sizes the rep rate is measured at: */
#define SOFT_REP_SIZE0 (1u << 10)   /* 1 KiB x 4^i: 1 KiB .. 4 MiB */

/* This CPU's rep movsb rate for copies of one size, bytes per ns of thread CPU time:
 * the best of SOFT_CALIB_REPEATS runs (after one that warms the caches) of copies
 * moving SOFT_CALIB_REP_MOVED bytes in all, back and forth between the same two buffers,
 * the destination skew bytes past the source modulo 4096 (0 < skew < 4096). 0 when it
 * cannot be measured. Where the destination lies less than 64 bytes past the source
 * modulo 4 KiB, the stores alias the next loads (4K aliasing) and rep movsb runs ~1.6x
 * slower (76 against 123 bytes/ns on the AMD EPYC of this project's CI): two
 * back-to-back mallocs always do (16 bytes apart: the chunk header), and where the
 * calibration used them its rate was 76-85 or 115-125 bytes/ns from one process to the
 * next as the heap's state fell; SOFT_CALIB_REP_SKEW does not. */
double soft_calib_rep_bytes_per_ns_at(size_t bytes, unsigned skew);

/* The rep rate by copy size: a copy whose buffers fit a cache runs at its rate, a larger
 * one at the next level's, and a short one pays rep's start-up (the AMD EPYC of CI:
 * 72-74 bytes/ns at 1 KiB, 111-115 at 4 KiB, 122-130 at 16 KiB, 97-104 at 64 and 256
 * KiB, 46-56 at 1 MiB, 44-54 at 4 MiB, 22-37 at 16 MiB, not measured: its 32 MiB of page
 * faults cost ~100 ms here). */
struct soft_rep_curve {
	unsigned n;                      /* points measured, sizes ascending (0: none) */
	double size[SOFT_REP_SIZES];     /* bytes copied */
	double bpns[SOFT_REP_SIZES];     /* bytes per ns at that size */
};
/* Measures the curve in one 8 MiB mapping, unmapped after: ~6 ms, plus its page faults
 * (8.6-22 ms in all under this project's hypervisor, where a first touch costs ~12 us a
 * page without huge pages). Sizes that cannot be measured are left out; c->n says how
 * many were. */
void soft_calib_rep_curve(struct soft_rep_curve *c);
/* The rate for a copy of bytes: between two measured sizes, interpolated in log size;
 * below the first and above the last, theirs. 0 when nothing was measured. */
double soft_rep_rate(const struct soft_rep_curve *c, double bytes);
/* The curve as `record` prints it ("rep movs 74 bytes per ns at 1 KiB, 113 at 4 KiB, ...",
 * or "rep movs not measured"), cut to n bytes. */
void soft_rep_curve_describe(const struct soft_rep_curve *c, char *buf, size_t n);

/* The wall time of a first touch of a 4 KiB page (fault, zeroing, and whatever a host
 * adds: ~10-13 us under this project's hypervisor, ~1 us on bare metal), ns: the median
 * of SOFT_CALIB_FAULT_ROUNDS runs touching SOFT_CALIB_FAULT_PAGES fresh pages each,
 * without huge pages (~2.5 ms in all here); 0 when it cannot be measured. Wall time: a
 * host's share is in no clock of the guest thread's own. */
#define SOFT_CALIB_FAULT_PAGES 64
#define SOFT_CALIB_FAULT_ROUNDS 3
double soft_calib_first_touch_ns(void);
