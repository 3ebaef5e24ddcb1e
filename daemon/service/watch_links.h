/* The daemon's in-process watches, per selected process: a pid-filtered memprofd:watch
 * link on the sampler file of each process the rules select (and only those), so that
 * the kernel sets the probe's semaphore (which arms the sampler's watches) in that
 * process's memory alone. Links end with their process (pidfd), and the governor caps
 * how many processes hold one (wlinks_set_cap). Costs: one multi-uprobe link per
 * selected process (a link's creation and its detach, one RCU grace period). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WLINKS_MAX 1024            /* processes holding an in-process watch link at once */

struct sampled;
struct wlink;

struct wlinks {
	struct sampled *smp;       /* NULL: off (exact mode, no watch, or opted out) */
	struct wlink *v;
	size_t n, alloc;           /* links held; room in v */
	size_t cap;                /* the governor's limit on n (WLINKS_MAX at full scale) */
	uint64_t attached, failed, capped, ended;   /* counts since start */
	uint64_t attach_ns;        /* wall time spent creating links */
};

/* smp NULL leaves the module off (every call a no-op). 0 or -ENOMEM. */
int wlinks_init(struct wlinks *w, struct sampled *smp);
void wlinks_free(struct wlinks *w);
/* A selected process whose sampler file is open at sampler_fd (the daemon's fd): links
 * its memprofd:watch unless it has one or the cap is reached. 0, or -errno. */
int wlinks_add(struct wlinks *w, pid_t pid, int sampler_fd);
/* The process ended (its exit record): its link goes. */
void wlinks_remove(struct wlinks *w, pid_t pid);
/* Drops the links of processes that ended unseen (pidfd readable); cheap, per tick. */
void wlinks_prune(struct wlinks *w);
/* At most cap processes keep links (the newest beyond it lose theirs). */
void wlinks_set_cap(struct wlinks *w, size_t cap);
