/* The first look into libc's DWARF, done on a thread while `record --alloc exact` runs
 * its command (issue 18): libc frames are in nearly every stack, and opening libc6-dbg's
 * debug file inflates its compressed sections (~260M instructions, 0.08-0.2 s), which
 * the final flush paid after the command had ended. The thread runs at nice
 * SYMWARM_NICE and is raised back to the caller's priority when it must be waited for.
 * Invariant: nothing else uses the symcache until sym_warm_join; after sym_warm_abandon
 * nothing frees it (the thread and its job end with the process). */
#pragma once
#include <pthread.h>
#include <stdbool.h>

#define SYMWARM_NICE 19

struct symcache;
struct warm_job;

struct sym_warm {
	pthread_t thread;
	struct warm_job *job;         /* the thread's own state, on the heap */
	bool running;                 /* started, neither joined nor abandoned */
};

/* Opens path's DWARF in sc on a thread (nothing when no thread starts). */
void sym_warm_start(struct sym_warm *w, struct symcache *sc, const char *path);
/* Waits for it (at once when it is done or never started); may be called again. */
void sym_warm_join(struct sym_warm *w);
/* Leaves a running warm-up to the process's exit, for a caller about to exit that
 * needed no name: its symcache must then never be freed. */
void sym_warm_abandon(struct sym_warm *w);
