/* spin_lives: objects whose lives hold no allocator call (issue 17, lifetimes net of the
 * probes). Each of --count objects is allocated at spin_site from --depth frames down
 * (exact mode walks and copies that stack inside the malloc call), lives --spin-us of
 * the thread's own work with no call into the allocator, and is freed. A recorder that
 * timestamps inside the allocator calls sees each life last at least from malloc's
 * return to free's call, and none of its probes ran in between: only the thread's
 * waits for a CPU may come out (exact mode takes them). Prints one JSON line:
 * {"count": N, "life_lo_ns": S}, S the sum over the objects of that span less the
 * thread's run_delay from before the malloc call to after the free call
 * (/proc/thread-self/schedstat, read with pread: no allocation): a wait inside a call,
 * on a trap's way, may be taken out of the recorded life too. Single-threaded; built like every workload (frame pointers, noinline). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int sched_fd = -1;
static volatile uint64_t sink;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The thread's run_delay so far, ns (the second field of schedstat); -1 if unreadable. */
static int64_t waits_ns(void)
{
	char buf[96];
	ssize_t n = pread(sched_fd, buf, sizeof(buf) - 1, 0);
	char *p;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strchr(buf, ' ');
	return p ? strtoll(p + 1, NULL, 10) : -1;
}

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
	int64_t w0 = waits_ns();
	void *p = spin_site(64);
	int64_t ta = now_ns();
	if (!p || w0 < 0)
		return -1;
	while (now_ns() - ta < spin_ns)
		for (int i = 0; i < 64; i++)
			sink = sink * 6364136223846793005ULL + 1;
	int64_t fb = now_ns();
	free(p);
	int64_t w1 = waits_ns();
	if (w1 < 0)
		return -1;
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
	sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (sched_fd < 0)
		return perror("spin_lives: /proc/thread-self/schedstat"), 1;
	for (long i = 0; i < count; i++)
		if (cycle((int)depth, spin_us * 1000, &lo) < 0)
			return fprintf(stderr, "spin_lives: malloc or schedstat failed\n"), 1;
	printf("{\"count\": %ld, \"life_lo_ns\": %lld}\n", count, (long long)lo);
	return 0;
}
