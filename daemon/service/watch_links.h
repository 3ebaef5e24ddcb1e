/* The daemon's in-process watches, per selected process: a pid-filtered memprofd:watch
 * multi-uprobe link on the sampler file of each process the rules select (and only
 * those), so that the kernel sets the probe's semaphore (which arms the sampler's
 * watches) in that process's memory alone. Links end with their process (pidfd), and
 * the governor caps how many processes hold one (wlinks_set_cap). Costs: making or
 * closing a link waits for the kernel (~15 ms on this machine, an RCU grace period,
 * little CPU), so a worker thread does both and the event loop never waits; a process
 * that ends before the worker reaches it costs a poll. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WLINKS_MAX 1024            /* processes holding (or waiting for) a link at once */
#define WLINKS_FILES_MAX 16        /* sampler files whose watch sites are kept resolved */

struct sampled;
struct wlink;
struct wlink_file;

struct wlinks_stats {
	size_t n;                  /* processes linked or waiting for their link */
	uint64_t queued;           /* processes given an entry (selected, under the cap) */
	uint64_t attached;         /* links made */
	uint64_t ended_first;      /* processes that ended before their link was made */
	uint64_t failed, capped;   /* refused by the kernel; over the governor's cap */
	uint64_t attach_ns;        /* the worker's wall time making links */
};

struct wlinks {
	struct sampled *smp;       /* NULL: off (exact mode, no watch, opted out, or the
	                            * kernel has no multi-uprobe links) */
	struct wlink *v;           /* WLINKS_MAX entries, by state (watch_links.c) */
	struct wlink_file *files;  /* WLINKS_FILES_MAX resolved sampler files */
	size_t nfiles;
	size_t cap;                /* the governor's limit on st.n (WLINKS_MAX at full scale) */
	struct wlinks_stats st;
	pthread_t worker;
	pthread_mutex_t mu;        /* guards v's states, st and stop */
	pthread_cond_t cv;         /* work for the worker */
	bool started, stop;
};

/* smp NULL leaves the module off (every call a no-op). 0 or -errno. */
int wlinks_init(struct wlinks *w, struct sampled *smp);
/* Stops the worker and closes every link (each waits for the kernel). */
void wlinks_free(struct wlinks *w);
/* A selected process whose sampler file is open at sampler_fd (the daemon's fd, held
 * while wlinks lives): its memprofd:watch link is queued unless it has one or the cap is
 * reached. 0, or -errno. */
int wlinks_add(struct wlinks *w, pid_t pid, int sampler_fd);
/* A process that forked (no exec yet) from a parent holding (or waiting for) a link: the
 * child gets its own on the parent's sampler file. Without it, the child arms watches
 * through its copy of the parent's semaphore, and the parent's link, filtered on the
 * parent, drops every report (51-54 armed, 0 reported in record_watch_targets). 0 or
 * -errno; 0 when the parent has no link. */
int wlinks_add_child(struct wlinks *w, pid_t child, pid_t parent);
/* The process ended (its exit record): its link goes. */
void wlinks_remove(struct wlinks *w, pid_t pid);
/* Drops the links of processes that ended unseen (pidfd readable); per tick. */
void wlinks_prune(struct wlinks *w);
/* At most cap processes keep links (those beyond it lose theirs). */
void wlinks_set_cap(struct wlinks *w, size_t cap);
void wlinks_get_stats(struct wlinks *w, struct wlinks_stats *out);
