/* short_watch: sampled heap objects that live under a millisecond, for the sampler's
 * in-process watches. Each round allocates a hot object (alloc_brief_hot: every 8-byte
 * granule read in a loop for --life-us) and a cold one (alloc_brief_cold: written once,
 * then left alone for --life-us), frees both, and goes on for --seconds. Both are 4 KiB
 * and come from two contexts; with the sampler's mean at 16 KiB a fifth are sampled.
 * --passes N: the hot object's granules are read N times over instead of for --life-us
 * (a known count, about a microsecond of reads).
 * --stray-traps N sends the thread, spread over the run, N SIGTRAPs shaped as the kernel's
 * debug traps once the sampler's guard is installed (TRAP_HWBKPT, and TRAP_BRKPT as a #DB with no cause in DR6 gives), the
 * traps that killed targets of the in-process watches; --user-trap ends with a tgkill'd
 * SIGTRAP, which must still kill (the sampler's guard swallows only debug traps). It
 * prints its rounds, the strays sent, and the watches the preloaded sampler armed in it
 * (memprofd_sampler_get_stats, found with dlsym; -1 without the sampler). --fork-after-ms
 * N: the process waits N ms, forks, and the child (no exec) does all of the above while
 * the parent waits for it and exits with its status. --gate FIFO: first waits for a byte
 * on FIFO (so that a recorder can attach with --pid before anything else happens). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "../../sampler/sampler.h"

#define WORDS 512                      /* 4 KiB per object */

__attribute__((noinline)) uint64_t *alloc_brief_hot(void)
{
	uint64_t *p = malloc(WORDS * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) uint64_t *alloc_brief_cold(void)
{
	uint64_t *p = malloc(WORDS * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define STRAY_FIRST_ROUND 64            /* the sampler has armed a watch by then */

/* A SIGTRAP to this thread as the kernel's #DB handler would send it. */
/* Whether a SIGTRAP handler is installed (the sampler's guard, set before its first watch):
 * a kernel debug trap can only come once a watch was armed, so strays wait for it. */
static int trap_guarded(void)
{
	struct sigaction old;

	return sigaction(SIGTRAP, NULL, &old) == 0 &&
	       ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL
					      : old.sa_handler != SIG_DFL);
}

static void stray_trap(int code)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGTRAP;
	si.si_code = code;
	syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGTRAP, &si);
}

int main(int argc, char **argv)
{
	double seconds = 2.0;
	uint64_t life_ns = 800000, sum = 0, rounds = 0, strays = 0, sent = 0, passes = 0;
	int user_trap = 0;

	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--life-us"))
			life_ns = strtoull(argv[++i], NULL, 10) * 1000;
		else if (!strcmp(argv[i], "--passes"))
			passes = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--stray-traps"))
			strays = strtoull(argv[++i], NULL, 10);
	}
	for (int i = 1; i < argc; i++)
		user_trap |= !strcmp(argv[i], "--user-trap");
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--gate")) {     /* a FIFO: wait for its first byte */
			char b;
			FILE *g = fopen(argv[i + 1], "r");

			if (!g || fread(&b, 1, 1, g) != 1)
				return 1;
			fclose(g);
		}
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--fork-after-ms")) {
			usleep((useconds_t)strtoul(argv[i + 1], NULL, 10) * 1000);
			pid_t child = fork();
			int ws;

			if (child < 0)
				return 1;
			if (child > 0)
				return waitpid(child, &ws, 0) == child && WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
			break;
		}
	uint64_t t_start = now_ns();
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);

	while (now_ns() < end) {
		volatile uint64_t *h = alloc_brief_hot();
		uint64_t *c = alloc_brief_cold();

		if (!h || !c)
			return 1;
		memset((void *)h, 1, WORDS * sizeof(uint64_t));
		memset(c, 2, WORDS * sizeof(uint64_t));       /* the cold one's only touch */
		uint64_t t0 = now_ns();

		if (passes)   /* a known count: every granule read `passes` times, ~1 us */
			for (uint64_t k = 0; k < passes; k++)
				for (size_t i = 0; i < WORDS; i++)
					sum += h[i];
		else
			while (now_ns() - t0 < life_ns)
				for (size_t i = 0; i < WORDS; i++)
					sum += h[i];          /* every granule, over and over */
		free((void *)h);
		free(c);
		rounds++;
		/* Spread over the run's second half, the first after STRAY_FIRST_ROUND. */
		if (sent < strays && rounds >= STRAY_FIRST_ROUND && trap_guarded() &&
		    now_ns() - t_start >= (uint64_t)(seconds * 1e9 * (0.5 + 0.5 * sent / strays)))
			stray_trap(sent++ % 2 ? TRAP_BRKPT : TRAP_HWBKPT);
	}
	if (user_trap)
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGTRAP);
	void (*stats)(struct memprofd_sampler_stats *) =
		(void (*)(struct memprofd_sampler_stats *))dlsym(RTLD_DEFAULT, "memprofd_sampler_get_stats");
	struct memprofd_sampler_stats st = { 0 };

	if (stats)
		stats(&st);
	printf("{\"rounds\": %llu, \"stray_traps\": %llu, \"watches_armed\": %lld}\n",
	       (unsigned long long)rounds, (unsigned long long)sent,
	       stats ? (long long)st.watch_armed : -1LL);
	return sum == 42 ? 2 : 0;
}
