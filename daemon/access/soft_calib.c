/* Clock-rate calibration of the soft source (soft_calib.h). Each iteration is eight
 * dependent adds (8 cycles: an add's latency is one cycle); the counter and branch run
 * beside them. So iterations x 8 / thread CPU ns is the clock in cycles per ns. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "daemon/access/soft_calib.h"

#define CALIB_CYCLES_PER_ITER 8

static uint64_t thread_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
static uint64_t calib_loop(uint64_t iters)
{
	uint64_t a = 0, n = iters, one = 1;

	/* Register operands: a chain of add-immediates is folded by some cores (measured
	 * 7.3 "GHz" on a 2.3 GHz Xeon), a register's value is not known at rename. */
	__asm__ volatile(
		"1:\n\t"
		"add %[b], %[a]\n\tadd %[b], %[a]\n\tadd %[b], %[a]\n\tadd %[b], %[a]\n\t"
		"add %[b], %[a]\n\tadd %[b], %[a]\n\tadd %[b], %[a]\n\tadd %[b], %[a]\n\t"
		"sub $1, %[n]\n\t"
		"jne 1b\n\t"
		: [a] "+r"(a), [n] "+r"(n) : [b] "r"(one) : "cc");
	return a;
}
#endif

double soft_calib_cycles_per_ns(void)
{
#if defined(__x86_64__)
	uint64_t best = 0;
	volatile uint64_t sink = 0;

	for (int r = 0; r < SOFT_CALIB_REPEATS; r++) {
		uint64_t t0 = thread_ns();
		sink += calib_loop(SOFT_CALIB_ITERS);
		uint64_t t1 = thread_ns();
		if (t0 && t1 > t0 && (!best || t1 - t0 < best))
			best = t1 - t0;
	}
	(void)sink;
	if (!best)
		return 0;
	double ghz = (double)SOFT_CALIB_ITERS * CALIB_CYCLES_PER_ITER / (double)best;
	return ghz >= SOFT_CALIB_MIN && ghz <= SOFT_CALIB_MAX ? ghz : 0;
#else
	return 0;
#endif
}

double soft_calib_insns_per_ns(double fallback)
{
	double ghz = soft_calib_cycles_per_ns();

	return ghz > 0 ? ghz * SOFT_EST_IPC : fallback;
}

double soft_calib_rep_bytes_per_ns(void)
{
#if defined(__x86_64__)
	char *src = malloc(SOFT_CALIB_REP_BYTES), *dst = malloc(SOFT_CALIB_REP_BYTES);
	uint64_t best = 0;

	if (!src || !dst) {
		free(src);
		free(dst);
		return 0;
	}
	memset(src, 1, SOFT_CALIB_REP_BYTES);
	memset(dst, 2, SOFT_CALIB_REP_BYTES);
	for (int r = 0; r < SOFT_CALIB_REPEATS + 1; r++) {   /* the first warms the caches */
		uint64_t t0 = thread_ns();
		for (int c = 0; c < SOFT_CALIB_REP_COPIES; c++) {
			void *d = dst;
			const void *sp = src;
			size_t n = SOFT_CALIB_REP_BYTES;
			__asm__ volatile("rep movsb" : "+D"(d), "+S"(sp), "+c"(n) : : "memory");
		}
		uint64_t t1 = thread_ns();
		if (r && t0 && t1 > t0 && (!best || t1 - t0 < best))
			best = t1 - t0;
	}
	free(src);
	free(dst);
	if (!best)
		return 0;
	double bpns = (double)SOFT_CALIB_REP_BYTES * SOFT_CALIB_REP_COPIES / (double)best;
	return bpns >= SOFT_CALIB_REP_MIN && bpns <= SOFT_CALIB_REP_MAX ? bpns : 0;
#else
	return 0;
#endif
}
