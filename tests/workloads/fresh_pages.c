/* issue 17: a hot buffer read in a loop beside blocks of fresh pages, each written once
 * (one store per 4 KiB page) and freed: the fresh blocks' accesses are a few thousand
 * stores, their time mostly page faults. Under a hypervisor that backs guest memory on
 * first touch, each fault is ~10-13 us of host time, and cpu-clock samples due then land
 * at the faulting store (bpf/soft.h SOFT_F_FAULT). And blocks of fresh pages filled word
 * by word with computed values (FILL_WORK multiply-adds a word, ~4 us a page here): the
 * samples due while a page is filled, after its fault, are the program's. --seconds S
 * (default 3), --rounds R: hot passes over the buffer between blocks (default 4000).
 * Prints "hot_reads N fresh_writes N fill_writes N" at exit. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOT_BYTES 65536
#define FRESH_BYTES (8u << 20)
#define FILL_WORK 8

__attribute__((noinline)) static uint64_t *alloc_hot(void) { return malloc(HOT_BYTES); }
__attribute__((noinline)) static char *alloc_fresh(void) { return malloc(FRESH_BYTES); }
__attribute__((noinline)) static uint64_t *alloc_fill(void) { return malloc(FRESH_BYTES); }

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = 3;
	long rounds = 4000;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			secs = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atol(argv[i + 1]);
	}
	/* Every block its own mapping, unmapped at free: fresh pages each time (glibc's
	 * dynamic threshold would otherwise keep the first freed block's pages). */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	uint64_t *hot = alloc_hot();
	if (!hot)
		return 1;
	memset(hot, 1, HOT_BYTES);
	uint64_t sum = 0, hot_reads = 0, fresh_writes = 0, fill_writes = 0, x = 1;
	double end = now_s() + secs;
	while (now_s() < end) {
		for (long r = 0; r < rounds; r++)
			for (size_t i = 0; i < HOT_BYTES / 8; i++)
				sum += ((volatile uint64_t *)hot)[i];
		hot_reads += (uint64_t)rounds * (HOT_BYTES / 8);
		char *f = alloc_fresh();
		if (!f)
			return 1;
		for (size_t i = 0; i < FRESH_BYTES; i += 4096)
			((volatile char *)f)[i] = 1;
		fresh_writes += FRESH_BYTES / 4096;
		free(f);
		uint64_t *w = alloc_fill();
		if (!w)
			return 1;
		for (size_t i = 0; i < FRESH_BYTES / 8; i++) {
			for (int k = 0; k < FILL_WORK; k++)
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			w[i] = x;
		}
		fill_writes += FRESH_BYTES / 8;
		sum += w[x % (FRESH_BYTES / 8)];
		free(w);
	}
	free(hot);
	printf("hot_reads %llu fresh_writes %llu fill_writes %llu (sum %llu)\n",
	       (unsigned long long)hot_reads, (unsigned long long)fresh_writes,
	       (unsigned long long)fill_writes, (unsigned long long)sum);
	return 0;
}
