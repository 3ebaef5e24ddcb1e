/* Clock-rate calibration of the soft source (soft_calib.h). Each iteration is eight
 * dependent adds (8 cycles: an add's latency is one cycle); the counter and branch run
 * beside them. So iterations x 8 / thread CPU ns is the clock in cycles per ns. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "base/clock.h"
#include "base/stats.h"
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

/* bytes rounded up to whole 4 KiB pages. */
static size_t page_span(size_t bytes)
{
	return (bytes + 4095) / 4096 * 4096;
}

/* Times copies of bytes from blk to blk + the bytes' page span + skew (blk holds both). */
static double rep_rate_in(char *blk, size_t bytes, unsigned skew)
{
#if defined(__x86_64__)
	size_t copies = SOFT_CALIB_REP_MOVED / bytes ? SOFT_CALIB_REP_MOVED / bytes : 1;
	char *src = blk, *dst = blk + page_span(bytes) + skew;
	uint64_t best = 0;

	for (int r = 0; r < SOFT_CALIB_REPEATS + 1; r++) {   /* the first warms the caches */
		uint64_t t0 = thread_ns();
		for (size_t c = 0; c < copies; c++) {
			void *d = dst;
			const void *sp = src;
			size_t n = bytes;
			__asm__ volatile("rep movsb" : "+D"(d), "+S"(sp), "+c"(n) : : "memory");
		}
		uint64_t t1 = thread_ns();
		if (r && t0 && t1 > t0 && (!best || t1 - t0 < best))
			best = t1 - t0;
	}
	if (!best)
		return 0;
	double bpns = (double)bytes * (double)copies / (double)best;
	return bpns >= SOFT_CALIB_REP_MIN && bpns <= SOFT_CALIB_REP_MAX ? bpns : 0;
#else
	(void)blk;
	(void)bytes;
	(void)skew;
	return 0;
#endif
}

/* A block for copies of up to bytes at any skew, written once (faulted in: a first
 * touch costs ~12 us a page under this project's hypervisor; huge pages where the
 * kernel gives them), or NULL. */
static char *rep_block(size_t bytes, size_t *len)
{
	*len = 2 * page_span(bytes) + 4096;
	char *blk = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (blk == MAP_FAILED)
		return NULL;
	(void)madvise(blk, *len, MADV_HUGEPAGE);   /* a hint: EINVAL without THP */
	memset(blk, 1, *len);
	return blk;
}

double soft_calib_rep_bytes_per_ns_at(size_t bytes, unsigned skew)
{
	size_t len;
	char *blk;

	if (!bytes || !skew || skew >= 4096 || !(blk = rep_block(bytes, &len)))
		return 0;
	double r = rep_rate_in(blk, bytes, skew);
	munmap(blk, len);
	return r;
}

void soft_calib_rep_curve(struct soft_rep_curve *c)
{
	size_t size = SOFT_REP_SIZE0, len;
	char *blk = rep_block((size_t)SOFT_REP_SIZE0 << (2 * (SOFT_REP_SIZES - 1)), &len);

	c->n = 0;
	if (!blk)
		return;
	for (unsigned i = 0; i < SOFT_REP_SIZES; i++, size *= 4) {
		double r = rep_rate_in(blk, size, SOFT_CALIB_REP_SKEW);
		if (r > 0) {
			c->size[c->n] = (double)size;
			c->bpns[c->n++] = r;
		}
	}
	munmap(blk, len);
}

double soft_rep_rate(const struct soft_rep_curve *c, double bytes)
{
	unsigned i;

	if (!c->n)
		return 0;
	if (bytes <= c->size[0])
		return c->bpns[0];
	for (i = 1; i < c->n && bytes > c->size[i]; i++)
		;
	if (i == c->n)
		return c->bpns[c->n - 1];
	double f = log(bytes / c->size[i - 1]) / log(c->size[i] / c->size[i - 1]);
	return c->bpns[i - 1] + f * (c->bpns[i] - c->bpns[i - 1]);
}

void soft_rep_curve_describe(const struct soft_rep_curve *c, char *buf, size_t n)
{
	size_t at = 0;

	snprintf(buf, n, "rep movs not measured");
	for (unsigned i = 0; i < c->n && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%.0f%s at %.0f KiB", i ? ", " : "rep movs ",
				       c->bpns[i], i ? "" : " bytes per ns", c->size[i] / 1024);
}

/* One round: ns per first touch of SOFT_CALIB_FAULT_PAGES fresh pages, or 0. */
static double first_touch_round(void)
{
	size_t len = (size_t)SOFT_CALIB_FAULT_PAGES * 4096;
	char *blk = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (blk == MAP_FAILED)
		return 0;
	(void)madvise(blk, len, MADV_NOHUGEPAGE);   /* one fault per 4 KiB page */
	uint64_t t0 = mono_ns();
	for (size_t off = 0; off < len; off += 4096)
		*(volatile char *)(blk + off) = 1;
	uint64_t t1 = mono_ns();
	munmap(blk, len);
	return t1 > t0 ? (double)(t1 - t0) / SOFT_CALIB_FAULT_PAGES : 0;
}

double soft_calib_first_touch_ns(void)
{
	double v[SOFT_CALIB_FAULT_ROUNDS];
	size_t n = 0;

	for (unsigned i = 0; i < SOFT_CALIB_FAULT_ROUNDS; i++) {
		double r = first_touch_round();
		if (r > 0)
			v[n++] = r;
	}
	return n ? stats_median(v, n) : 0;
}
