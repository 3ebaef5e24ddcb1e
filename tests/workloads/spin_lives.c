/* spin_lives: objects whose lives hold no allocator call (issue 17, lifetimes net of the
 * probes). Each of --count objects is allocated at spin_site from --depth frames down
 * (exact mode walks and copies that stack inside the malloc call), lives --spin-us of
 * the thread's own work with no call into the allocator, and is freed. A recorder that
 * timestamps inside the allocator calls sees each life last at least from malloc's
 * return to free's call, and none of its probes ran in between: only the thread's
 * waits for a CPU may come out (exact mode takes them). Prints one JSON line:
 * {"count": N, "life_lo_ns": S}, S the sum over the objects of that span less the
 * thread's run_delay from before the malloc call to after the free call (ledger.h's
 * ledger_waits: one pread, no allocation): a wait inside a call, on a trap's way, may
 * be taken out of the recorded life too. Single-threaded; built like every workload
 * (frame pointers, noinline). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ledger.h"

static volatile uint64_t sink;

__attribute__((noinline)) void *spin_site(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

/* One object's life at the bottom of `depth` frames; adds its lower bound to *lo. */
__attribute__((noinline)) static int cycle(int depth, int64_t spin_ns, int64_t *lo)
{
	if (depth > 0) {
		int r = cycle(depth - 1, spin_ns, lo);
		__asm__ volatile("" ::: "memory");   /* not a tail call */
		return r;
	}
	int64_t w0 = ledger_waits(NULL);
	void *p = spin_site(64);
	int64_t ta = ledger_now();
	if (!p)
		return -1;
	while (ledger_now() - ta < spin_ns)
		for (int i = 0; i < 64; i++)
			sink = sink * 6364136223846793005ULL + 1;
	int64_t fb = ledger_now();
	free(p);
	int64_t w1 = ledger_waits(NULL);
	*lo += fb - ta - (w1 - w0);
	return 0;
}

int main(int argc, char **argv)
{
	long count = 200, spin_us = 200, depth = 48;
	int64_t lo = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--count"))
			count = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--spin-us"))
			spin_us = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--depth"))
			depth = atol(argv[i + 1]);
		else
			return fprintf(stderr, "spin_lives: unknown option %s\n", argv[i]), 2;
	}
	if (access("/proc/thread-self/schedstat", R_OK))   /* else ledger_waits reads 0 */
		return perror("spin_lives: /proc/thread-self/schedstat"), 1;
	for (long i = 0; i < count; i++)
		if (cycle((int)depth, spin_us * 1000, &lo) < 0)
			return fprintf(stderr, "spin_lives: malloc failed\n"), 1;
	printf("{\"count\": %ld, \"life_lo_ns\": %lld}\n", count, (long long)lo);
	return 0;
}
