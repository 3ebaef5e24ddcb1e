/* Exact mode's preparation of a command, on a thread beside the BPF load (issue 18): the
 * private copies of the allocator libraries (private_libs.h) and their probe sites
 * (exact_sites_of: ELF symbols and one instruction decode per function, ~30 opens of
 * the copies, 10-30 ms), so that after the load only the links are made, back to back.
 * Invariant: the private_libs and the sites belong to the thread until exact_prep_join,
 * which the caller calls before using either (and before removing the copies). */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include "daemon/alloc/alloc_exact.h"
#include "daemon/record/private_libs.h"

struct exact_prep {
	struct private_libs *pl;
	int (*find)(const char *name, char *out, size_t n);
	pthread_t thread;
	bool running;                  /* started, not joined */
	bool done;                     /* results below are valid */
	int err;                       /* private_libs_make's */
	int nsites[PRIVATE_LIBS_MAX];  /* exact_sites_of's result per copy */
	struct exact_sites sites[PRIVATE_LIBS_MAX];
};

/* Starts making pl's copies and finding their sites (on the caller's thread if no thread
 * can start). */
void exact_prep_start(struct exact_prep *p, struct private_libs *pl,
		      int (*find)(const char *name, char *out, size_t n));
/* Waits for it: private_libs_make's 0 or -errno (-ENOENT: never started). */
int exact_prep_join(struct exact_prep *p);
