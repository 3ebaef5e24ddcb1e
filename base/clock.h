/* Clocks in integer nanoseconds (or ms), the units the store and the BPF side use.
 * CLOCK_MONOTONIC is the BPF timestamps' clock (bpf_ktime_get_ns); CLOCK_REALTIME is
 * what the store records (runs, exports). clock_gettime on these ids cannot fail. */
#pragma once
#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * NSEC_PER_SEC + (uint64_t)t.tv_nsec;
}

static inline uint64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static inline int64_t mono_ms(void) { return (int64_t)(mono_ns() / NSEC_PER_MSEC); }
static inline int64_t real_ns(void) { return (int64_t)clock_ns(CLOCK_REALTIME); }
/* CPU time this process has used (all threads). */
static inline uint64_t cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
