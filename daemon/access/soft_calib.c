/* Clock-rate calibration of the soft source (soft_calib.h). Each iteration is eight
 * dependent adds (8 cycles: an add's latency is one cycle); the counter and branch run
 * beside them. So iterations x 8 / thread CPU ns is the clock in cycles per ns. */
#include <stdint.h>
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
