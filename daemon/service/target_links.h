/* Exact mode's per-process probes (target_links.c): each target gets multi-uprobe links
 * filtered to its own pid on every allocator binary the daemon knows, so no other process
 * on the host traps. Closing a link waits for RCU grace periods (~0.1 s): closes are
 * handed to closer threads, never done on the ring reader's path. Used by the main
 * thread and the hold thread (exec_hold.c): every call takes mu_set; links are made
 * outside it. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/alloc/intern.h"

#define TARGET_LINKS_MAX 24        /* link fds per process: 8 binaries x entry/return/free */
#define TARGET_LINKS_QUEUE 4096    /* fds waiting for the closer thread */
#define TARGET_LINKS_CLOSERS 16    /* closer threads: each close waits for grace periods,
	                            * which concurrent closes share */
#define TARGET_LINKS_QUEUE_HIGH 256   /* closes waiting: no new process is linked */
#define TARGET_LINKS_RATE 50       /* processes linked a second at most (a burst of as many) */
#define TARGET_LINKS_DROPPED 64    /* processes dropped lately: a late add for one is undone */

struct recorder;
struct exact_sites;

struct target_links {
	struct recorder *r;
	pthread_mutex_t mu_set;        /* by_pid, dropped, the counters */
	struct hmap by_pid;            /* hash(pid) -> struct tlink_set */
	struct { uint32_t pid; uint64_t start_ns; } dropped[TARGET_LINKS_DROPPED];
	size_t ndropped;               /* ring position in dropped */
	struct { uint32_t pid; uint64_t start_ns; } denied[TARGET_LINKS_DROPPED];
	size_t ndenied;                /* ring position in denied */
	uint64_t over_budget;          /* processes not linked: the kernel is behind */
	double tokens;                 /* processes that may be linked now (admit) */
	uint64_t tokens_at;            /* CLOCK_MONOTONIC ns of their last refill */
	uint64_t over_budget_taken;    /* of which target_links_take_denied told already */
	pthread_t closer[TARGET_LINKS_CLOSERS];
	size_t ncloser;
	bool closer_up;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int queue[TARGET_LINKS_QUEUE];
	size_t nqueue;
	bool stop;
	uint64_t attached;             /* processes given links */
	uint64_t failed;               /* attaches that failed (process gone, or an error) */
	uint64_t closed, close_ns_sum, close_ns_max;   /* the closer's work (under mu) */
	size_t queue_max;              /* most fds queued at once */
};

int target_links_init(struct target_links *tl, struct recorder *r);
/* Adds links for pid on binary path (sites found once by the caller) unless the file
 * (file_key: its identity) is linked for pid already. 0, -EBUSY (not linked: too many
 * closes waiting; counted), -ESRCH (rejected or exited), or -errno. Slow: call it on
 * the link thread (exec_hold.c), never on the ring reader's. */
int target_links_add(struct target_links *tl, uint32_t pid, uint64_t start_ns, uint64_t held_ns,
		     uint64_t file_key, const char *path, const struct exact_sites *s);
/* Whether process (pid, start_ns) was linked at a hold that began after exec_ns: it has
 * exec'd into a held target since an image of it exec'd at exec_ns. */
bool target_links_held_after(struct target_links *tl, uint32_t pid, uint64_t start_ns,
			     uint64_t exec_ns);
/* Counts process (pid, start_ns) as not linked (once), as a refused add does. */
void target_links_deny(struct target_links *tl, uint32_t pid, uint64_t start_ns);
/* Processes not linked (the kernel behind) since the last call: for missed_late. */
uint64_t target_links_take_denied(struct target_links *tl);
/* Whether pid holds links. */
bool target_links_has(struct target_links *tl, uint32_t pid);
/* Detaches pid's links (queued for the closer). */
void target_links_drop(struct target_links *tl, uint32_t pid);
/* Process (pid, start_ns) ended, or the exec gate rejected it (held at its exec): its
 * links are dropped, and any the link thread adds for it later are undone. */
void target_links_reject(struct target_links *tl, uint32_t pid, uint64_t start_ns);
/* Detaches every link and waits for the closer. */
void target_links_free(struct target_links *tl);
