/* The first look into libc's DWARF, done on a thread at record's start (issue 18): libc
 * frames are in nearly every stack, and opening libc6-dbg's debug file inflates its
 * compressed sections (~260M instructions, 0.08-0.2 s), which the final flush paid
 * after the command had ended; record starts it once the command runs. The thread runs at nice SYMWARM_NICE (spare CPU first)
 * and is raised back to the caller's priority when it must be waited for. Invariant:
 * nothing else uses the symcache between sym_warm_start and sym_warm_join; a warm-up
 * never joined is left to end with the process (its symcache is not freed). */
#pragma once
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#define SYMWARM_NICE 19

struct symcache;

struct sym_warm {
	struct symcache *sc;
	char path[PATH_MAX];
	pthread_t thread;
	pid_t tid;                    /* the thread's id, for its priority; 0 until known */
	bool joining;                 /* sym_warm_join has begun: run at base_nice */
	int base_nice;                /* the starting thread's nice value */
	bool running;                 /* started and not joined */
};

/* Opens path's DWARF in sc on a thread (nothing when no thread starts). */
void sym_warm_start(struct sym_warm *w, struct symcache *sc, const char *path);
/* Waits for it (at once when it is done or never started); may be called again. */
void sym_warm_join(struct sym_warm *w);
