/* malloc_loop: the workload of the uprobe-cost benchmark (bench/overhead.py --uprobe-cost).
 * One malloc and one free per iteration, called DEPTH frames below main so that the
 * profiler's stack walk has a realistic length; the loop times itself, so start-up and
 * a profiler's attach time are not counted. It prints wall and thread CPU time per
 * iteration: a uprobe's trap and handlers run in the thread's context and are charged to
 * its CPU time, which, unlike wall time, does not grow when other processes load the
 * machine.
 * usage: malloc_loop [--iters N] [--size BYTES] [--depth D] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOOP_MAX_DEPTH 64

static volatile uintptr_t sink;

__attribute__((noinline)) static void loop(uint64_t iters, size_t size)
{
	for (uint64_t i = 0; i < iters; i++) {
		void *p = malloc(size);
		sink += (uintptr_t)p;
		free(p);
	}
}

/* Recursion that the compiler keeps (noinline, result used): depth frames, then the loop. */
__attribute__((noinline)) static int descend(int depth, uint64_t iters, size_t size)
{
	if (depth <= 0) {
		loop(iters, size);
		return 0;
	}
	return descend(depth - 1, iters, size) + (int)(sink & 1);
}

int main(int argc, char **argv)
{
	uint64_t iters = 200000;
	size_t size = 64;
	int depth = 6;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--iters"))
			iters = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--size"))
			size = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--depth"))
			depth = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "malloc_loop: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (depth < 0 || depth > LOOP_MAX_DEPTH || iters == 0) {
		fprintf(stderr, "malloc_loop: bad --depth or --iters\n");
		return 2;
	}
	struct timespec t0, t1, c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	descend(depth, iters, size);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	double cpu = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
	printf("malloc_loop: %llu iters in %.3f s: %.1f ns/iter, cpu %.1f ns/iter\n",
	       (unsigned long long)iters, ns / 1e9, ns / (double)iters, cpu / (double)iters);
	return 0;
}
