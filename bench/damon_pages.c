/* A paced workload for bench/damon_pages.py: pages of its own, each accessed at a known
 * rate, whose physical frame numbers it prints so that DAMON's physical-address monitor
 * can watch them (issue 15: page-granular densities where breakpoints are blind).
 *
 *   damon_pages SECONDS MODE PAGES_PER_RATE RATE...
 *
 * MODE sleep: Poisson arrivals, nanosleep between them (the CPU goes idle);
 *      busy:  Poisson arrivals, a 64 MiB buffer streamed between them (TLB misses, as a
 *             program with a large working set has);
 *      spin:  Poisson arrivals, only the clock read between them (the page's translation
 *             stays in the TLB: the case in which a cleared accessed bit is not set again).
 * Prints "PFN RATE" per page (PFN 0: not present, or /proc/self/pagemap hid it: run as
 * root), a blank line, then runs; at the end "RATE ACHIEVED_PER_S" per rate on stderr.
 * Each access reads one cache line of the page, the next one each time. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RATES 16
#define MAX_PER_RATE 256
#define BIG (64u << 20)

static uint64_t pfn_of(int fd, const void *p)
{
	uint64_t e = 0;

	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)p / 4096 * sizeof(e))) != sizeof(e))
		return 0;
	return (e >> 63) ? (e & ((1ull << 55) - 1)) : 0;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double expo(double rate)   /* a Poisson process's next gap */
{
	double u = ((double)rand() + 1.0) / ((double)RAND_MAX + 2.0);

	return -log(u) / rate;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: damon_pages SECONDS sleep|busy|spin PAGES_PER_RATE RATE...\n");
		return 2;
	}
	double secs = atof(argv[1]);
	const char *mode = argv[2];
	int per = atoi(argv[3]), nr = argc - 4;
	if (nr > MAX_RATES || per < 1 || per > MAX_PER_RATE ||
	    (strcmp(mode, "sleep") && strcmp(mode, "busy") && strcmp(mode, "spin"))) {
		fprintf(stderr, "damon_pages: at most %d rates, 1-%d pages each, mode sleep|busy|spin\n",
			MAX_RATES, MAX_PER_RATE);
		return 2;
	}
	static volatile char *page[MAX_RATES][MAX_PER_RATE];
	static double rate[MAX_RATES], next[MAX_RATES][MAX_PER_RATE];
	static unsigned long count[MAX_RATES];
	volatile char *big = NULL;
	int busy = !strcmp(mode, "busy"), spin = !strcmp(mode, "spin");

	if (busy) {
		if (!(big = malloc(BIG)))
			return 1;
		memset((void *)big, 1, BIG);
	}
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "damon_pages: /proc/self/pagemap: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < nr; i++) {
		rate[i] = atof(argv[4 + i]);
		for (int j = 0; j < per; j++) {
			void *p = aligned_alloc(4096, 4096);
			if (!p)
				return 1;
			memset(p, 1, 4096);
			page[i][j] = p;
			printf("%llu %g\n", (unsigned long long)pfn_of(fd, p), rate[i]);
		}
	}
	close(fd);
	printf("\n");
	fflush(stdout);
	double t0 = now_s(), t;
	for (int i = 0; i < nr; i++)
		for (int j = 0; j < per; j++)
			next[i][j] = rate[i] > 0 ? t0 + expo(rate[i]) : INFINITY;
	unsigned long sum = 0;
	size_t off = 0;
	while ((t = now_s()) - t0 < secs) {
		double soonest = INFINITY;
		for (int i = 0; i < nr; i++)
			for (int j = 0; j < per; j++) {
				while (t >= next[i][j]) {
					sum += page[i][j][(count[i] * 64) & 4095];
					count[i]++;
					next[i][j] += expo(rate[i]);
				}
				if (next[i][j] < soonest)
					soonest = next[i][j];
			}
		if (busy) {
			for (int k = 0; k < 64; k++) {
				sum += big[off];
				off = (off + 4096 + 64) % BIG;
			}
		} else if (!spin && soonest - t > 50e-6) {
			double d = soonest - t;
			struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
			nanosleep(&ts, NULL);
		}
	}
	double el = now_s() - t0;
	for (int i = 0; i < nr; i++)
		fprintf(stderr, "%g %.1f\n", rate[i], (double)count[i] / per / el);
	return (int)(sum & 0);
}
