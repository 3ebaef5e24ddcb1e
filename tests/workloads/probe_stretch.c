/* probe_stretch: lifetimes that exact mode's probes stretch (issue 17). A long-lived
 * object (long_site) is held while its thread makes --allocs short allocations
 * (short_site), each after --work iterations of a dependent multiply chain, then freed;
 * then another (wait_site) is held while the thread waits for a second thread that does
 * the same work (db_bench's main thread holds the database while its benchmark thread
 * runs); a third (exit_site) lives until the process exits. Untraced, a hold is the
 * chains plus a cheap malloc/free pair each; under exact mode every pair adds three
 * traps and a stack copy, several microseconds. Prints one JSON line: the holds and the
 * exit object's life up to main's return as the program saw them, ns. --fresh 1: the
 * short allocations are 64 KiB, each its own mapping (mmap'd by malloc, unmapped by
 * free), so every malloc takes a page fault between its probes (~10-16 us under this
 * project's hypervisor): the program's time, which the probes' estimate must leave.
 * --pin CPU: the process runs on that CPU only (the check puts a busy process there: the
 * program's threads then wait for it half the time, waits its lifetimes must not hold). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static void *long_site(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *exit_site(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *short_site(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *wait_site(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }

__attribute__((noinline)) static uint64_t work(uint64_t x, long iters)
{
	for (long i = 0; i < iters; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

static long allocs = 100000, iters = 1000;
static size_t short_size = 32;

static uint64_t churn(uint64_t x)
{
	for (long i = 0; i < allocs; i++) {
		x = work(x, iters);
		char *s = short_site(short_size);
		s[0] = (char)x;
		x += (uint64_t)s[0];
		free(s);
	}
	return x;
}

static void *worker(void *arg)
{
	*(uint64_t *)arg = churn(*(uint64_t *)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--allocs"))
			allocs = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--work"))
			iters = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--fresh") && atoi(argv[i + 1])) {
			short_size = 65536;
			mallopt(M_MMAP_THRESHOLD, 32768);   /* fixed: no dynamic threshold */
		} else if (!strcmp(argv[i], "--pin")) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(atoi(argv[i + 1]), &set);
			if (sched_setaffinity(0, sizeof(set), &set))
				return 3;
		}
	}
	int64_t t_exit = now_ns();
	char *ex = exit_site(4096);
	int64_t t0 = now_ns();
	char *hold = long_site(65536);
	uint64_t x = 1;

	memset(ex, 1, 4096);
	memset(hold, 1, 65536);
	x = churn(x);
	free(hold);
	int64_t t1 = now_ns();
	char *w = wait_site(65536);
	pthread_t th;
	memset(w, 1, 65536);
	if (pthread_create(&th, NULL, worker, &x) || pthread_join(th, NULL))
		return 2;
	free(w);
	int64_t t2 = now_ns();
	sink = x + (uint64_t)ex[0];
	printf("{\"hold_ns\": %lld, \"wait_ns\": %lld, \"exit_ns\": %lld}\n",
	       (long long)(t1 - t0), (long long)(t2 - t1), (long long)(now_ns() - t_exit));
	fflush(stdout);
	return 0;
}
