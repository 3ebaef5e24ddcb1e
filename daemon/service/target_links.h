/* Exact mode's per-process probes (target_links.c): each target gets multi-uprobe links
 * filtered to its own pid on every allocator binary the daemon knows, so no other process
 * on the host traps. Closing a link waits for RCU grace periods (~0.1 s): closes are
 * handed to one closer thread, never done on the ring reader's path. Used by the main
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
#define TARGET_LINKS_DROPPED 64    /* processes dropped lately: a late add for one is undone */

struct recorder;
struct exact_sites;

struct target_links {
	struct recorder *r;
	pthread_mutex_t mu_set;        /* by_pid, dropped, the counters */
	struct hmap by_pid;            /* hash(pid) -> struct tlink_set */
	struct { uint32_t pid; uint64_t start_ns; } dropped[TARGET_LINKS_DROPPED];
	size_t ndropped;               /* ring position in dropped */
	pthread_t closer;
	bool closer_up;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int queue[TARGET_LINKS_QUEUE];
	size_t nqueue;
	bool stop;
	uint64_t attached;             /* processes given links */
	uint64_t failed;               /* attaches that failed (process gone, or an error) */
};

int target_links_init(struct target_links *tl, struct recorder *r);
/* Adds links for pid on binary path (sites found once by the caller) unless the file
 * (file_key: its identity) is linked for pid already. 0 or -errno. */
int target_links_add(struct target_links *tl, uint32_t pid, uint64_t start_ns, uint64_t held_ns,
		     uint64_t file_key, const char *path, const struct exact_sites *s);
/* Whether process (pid, start_ns) was linked at a hold that began after exec_ns: it has
 * exec'd into a held target since an image of it exec'd at exec_ns. */
bool target_links_held_after(struct target_links *tl, uint32_t pid, uint64_t start_ns,
			     uint64_t exec_ns);
/* Whether pid holds links. */
bool target_links_has(struct target_links *tl, uint32_t pid);
/* Detaches pid's links (queued for the closer). */
void target_links_drop(struct target_links *tl, uint32_t pid);
/* The exec gate rejected process (pid, start_ns), held at its exec: its links are
 * dropped, and any the hold thread adds for it later are undone. */
void target_links_reject(struct target_links *tl, uint32_t pid, uint64_t start_ns);
/* Detaches every link and waits for the closer. */
void target_links_free(struct target_links *tl);
