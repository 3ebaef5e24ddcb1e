/* sampled_sites: a few allocation sites with known counts and sizes, ~200 MB in all, for
 * checking sampled estimates against exact mode (tests/integration/check_sampled.py).
 * Sizes span far below to far above the sampling mean; each site frees what it made
 * (some at once, some after a batch) so objects die in the free path, not at exit.
 * usage: sampled_sites [--scale N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64

static unsigned long long rng = 88172645463325252ULL;

static unsigned long long rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void *keep[BATCH];

static void hold(unsigned i, void *p)
{
	free(keep[i % BATCH]);
	keep[i % BATCH] = p;
}

static void release(void)
{
	for (int i = 0; i < BATCH; i++) {
		free(keep[i]);
		keep[i] = NULL;
	}
}

/* 64 B objects: far below the mean, so each sample stands for many. */
__attribute__((noinline)) void site_small(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char *p = malloc(48 + rnd() % 33);
		p[0] = 1;
		hold(i, p);
	}
	release();
}

/* ~500 B from calloc. */
__attribute__((noinline)) void site_calloc(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char *p = calloc(1, 256 + rnd() % 513);
		p[1] = 2;
		hold(i, p);
	}
	release();
}

/* 8..32 KiB, near the mean: grown once through realloc. */
__attribute__((noinline)) void site_realloc(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		size_t sz = 8192 + rnd() % 24577;
		char *p = malloc(sz / 2);
		p[0] = 3;
		p = realloc(p, sz);
		p[sz - 1] = 3;
		hold(i, p);
	}
	release();
}

/* 1 MiB, aligned: above the mean, nearly always sampled. */
__attribute__((noinline)) void site_huge(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		void *p = NULL;
		if (posix_memalign(&p, 64, 1 << 20))
			abort();
		memset(p, 4, 4096);
		hold(i, p);
	}
	release();
}

/* A handful of tiny objects: too few samples to estimate (the check skips it). */
__attribute__((noinline)) void site_rare(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(malloc(16));
}

int main(int argc, char **argv)
{
	unsigned scale = argc > 2 && !strcmp(argv[1], "--scale") ? (unsigned)atoi(argv[2]) : 1;

	site_small(500000 * scale);      /* ~32 MB */
	site_calloc(100000 * scale);     /* ~51 MB */
	site_realloc(4000 * scale);      /* ~82 MB (+ the halves) */
	site_huge(40 * scale);           /* 42 MB */
	site_rare(100);
	printf("sampled_sites: done\n");
	return 0;
}
