/* The soft source's instruction rate: a cpu-clock sample stands for period x rate
 * instructions, rate = this CPU's clock (cycles per ns, measured once per run with a
 * chain of dependent adds, one cycle each on every x86-64 core, timed in thread CPU
 * time, best of SOFT_CALIB_REPEATS so that preemption only makes it slower) times
 * SOFT_EST_IPC. About 1 ms. The IPC is the one assumption left: code that stalls on
 * memory retires fewer instructions per cycle (its accesses are over-estimated), tight
 * loops of L1 hits more (under-estimated); bench/access_dhat.py measures both. */
#pragma once

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

#define SOFT_CALIB_REP_BYTES 32768  /* copied by one rep movsb measurement (L1/L2-resident) */
#define SOFT_CALIB_REP_COPIES 64    /* copies per measurement (~100 us: above the clock's cost) */
#define SOFT_CALIB_REP_MIN 0.5      /* bytes per ns accepted from a measurement */
#define SOFT_CALIB_REP_MAX 1024.0

/* This CPU's rep movsb rate, bytes per ns of thread CPU time (best of SOFT_CALIB_REPEATS
 * runs of SOFT_CALIB_REP_COPIES copies of SOFT_CALIB_REP_BYTES, cache-resident: a copy from memory is slower, so a
 * sample in a rep string instruction is over- rather than under-counted), or 0 when it
 * cannot be measured. */
double soft_calib_rep_bytes_per_ns(void);
