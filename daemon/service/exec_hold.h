/* Exact mode's held execs (exec_hold.c): an exec of a file a literal exe rule names is
 * stopped in the kernel (bpf/exec_watch.bpf.h); one thread reads the holds ring, gives
 * the process its pid-filtered links on the files known ahead (the rule's executable,
 * the host's allocator libraries) and continues it, apart from the main loop's latency;
 * it also makes the links the main thread asks for (exec_hold_request), so that thread
 * never waits on the kernel's link registration.
 * A forked watchdog (exec_hold_watchdog.c) continues what stays held too long, and every
 * held process when the daemon dies. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "bpf/alloc.h"

#define EXEC_HOLD_FILES_MAX 64        /* rule executables and host libraries linked at a hold */
#define EXEC_HOLD_LATE_NS 200000000ULL   /* a hold older than this is ended by the watchdog */
#define EXEC_HOLD_WATCH_MS 20         /* the watchdog's sweep period */
#define EXEC_HOLD_REQS 1024           /* the main thread's link requests waiting */

struct recorder;
struct target_links;
struct exact_sites;

struct exec_hold_file {
	struct hold_key kkey;          /* the executable as the kernel names it; all 0: a
	                                * library linked for every held process */
	uint64_t key;                  /* target_links' file key */
	char path[32];                 /* /proc/self/fd/N, held open by targets.c */
	const struct exact_sites *sites;   /* NULL: nothing to link (released only) */
};

struct exec_hold_req {
	uint32_t pid;
	uint64_t start_ns, key;
	int fd;                        /* the file, held open by targets.c */
	const struct exact_sites *sites;
};

struct exec_hold {
	const struct recorder *r;
	struct target_links *tl;
	int held_fd, late_fd;
	struct ring_buffer *rb;
	struct exec_hold_file files[EXEC_HOLD_FILES_MAX];
	size_t nfiles;
	pthread_t th;
	int stop_fd;                   /* eventfd: the thread ends */
	int wake_fd;                   /* eventfd: a request is queued */
	pthread_mutex_t mu;            /* reqs */
	struct exec_hold_req reqs[EXEC_HOLD_REQS];
	size_t reqs_head, nreqs;
	bool mu_up;
	bool up;
	pid_t watchdog;                /* its pid, or 0 */
	int alive_fd;                  /* the watchdog reads EOF when this closes */
	uint64_t late_seen;            /* watchdog's late count already added to missed_late */
	/* Written by the thread, read at stop. */
	uint64_t holds, hold_ns_sum, hold_ns_max, link_ns_sum, stale;
};

/* Adds a file linked at holds of kkey (NULL: at every hold). 0 or -E2BIG. */
int exec_hold_add_file(struct exec_hold *h, const struct hold_key *kkey, uint64_t key, int fd,
		       const struct exact_sites *sites);
/* Queues links for a target the main thread found (at its exec record, fork or rescan):
 * made on the link thread, after the holds waiting. 0, or -EBUSY when the queue is full
 * (counted as not linked). */
int exec_hold_request(struct exec_hold *h, uint32_t pid, uint64_t start_ns, uint64_t key, int fd,
		      const struct exact_sites *sites);
/* Starts the watchdog and the thread (after the files are added). 0 or -errno. */
int exec_hold_start(struct exec_hold *h, struct recorder *r, struct target_links *tl);
/* Adds the holds the watchdog ended late to r->missed_late (main thread, per tick). */
void exec_hold_count_late(struct exec_hold *h, struct recorder *r);
/* Stops the thread, continues every held process, stops the watchdog. */
void exec_hold_stop(struct exec_hold *h);
/* The watchdog (exec_hold_watchdog.c): forks it. held_fd, files_fd, late_fd: the maps.
 * *alive: the pipe end whose close tells it the daemon is gone. Its pid, or -errno. */
pid_t exec_hold_watchdog(int held_fd, int files_fd, int late_fd, int *alive);
/* Continues (SIGCONT) pid if it is still held as start_ns (0: whatever it is). */
void exec_hold_release(int held_fd, uint32_t pid, uint64_t start_ns);
