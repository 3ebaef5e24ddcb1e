/* Target discovery for `memprofd daemon`: which processes the config's rules select, and
 * what each needs before it is traced. Exact mode probes the allocator binaries a target
 * maps; sampled mode needs libmemprofd_sampler in the target and attaches its USDT probes
 * to each sampler file once (pid -1, as exact mode's uprobes, so forks are followed in
 * the kernel through the targets map). Invariants: a process is added to the BPF targets
 * map only once its probes are attached; a selected process whose sampler is not mapped
 * yet (ld.so maps preloads after exec) waits at most TARGETS_SAMPLER_WAIT_MS, then is
 * listed as lacking the sampler (logged once per executable) and never traced; a PID
 * reused by another process is never taken for the one it replaced. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "daemon/service/config.h"
#include "daemon/service/target_links.h"
#include "daemon/service/exec_hold.h"
#include "daemon/record/recorder.h"
#include "daemon/service/watch_links.h"

#define TARGETS_FILES_MAX 4096         /* distinct binaries (inodes) probed or found bare */
#define TARGETS_SAMPLER_WAIT_MS 2000   /* a new process's time to map the sampler */
#define TARGETS_RECHECK_MS 100         /* how often waiting processes are looked at again */
#define TARGETS_PENDING_MAX 1024       /* processes waiting for their sampler at once */
#define TARGETS_UNSAMPLED_MAX 256      /* selected processes without the sampler, listed */
#define TARGETS_UNSAMPLED_SHOWN 16     /* ... of which the status record names this many */
#define TARGETS_LOGGED_MAX 1024        /* executables already logged as lacking the sampler */

struct tfile;
struct tpending;
struct tunsampled;

struct targets {
	struct recorder *r;
	struct sampled *smp;             /* sampled mode, else NULL (exact mode) */
	const struct config *cfg;        /* rules and max_processes; the caller's, may change */
	char sampler_hint[4096];         /* library path the hint names */
	struct tfile *files;
	size_t nfiles;
	bool files_full;                 /* TARGETS_FILES_MAX reached (said once) */
	struct tpending *pending;
	size_t npending;
	struct tunsampled *unsampled;
	size_t nunsampled;
	uint64_t unsampled_over;         /* lacking the sampler beyond TARGETS_UNSAMPLED_MAX */
	struct hmap logged;              /* hash(exe) of executables logged as lacking it */
	bool logged_full;                /* TARGETS_LOGGED_MAX reached (said once) */
	size_t ntraced;                  /* processes in the BPF targets map (approximate
	                                  * between rescans: lifecycle records may be lost) */
	uint64_t skipped_full;           /* selected but not traced: max_processes reached */
	int64_t next_recheck;            /* CLOCK_MONOTONIC ms, 0: nothing waits */
	bool pid_links;                  /* exact mode with multi-uprobe links: probes per
	                                  * target process (links), none host-wide */
	struct target_links links;
	size_t held_files;               /* executables whose execs are held (exec_watch) */
	struct exec_hold hold;           /* their hold thread and watchdog */
	int own_fd;                      /* the process looked at: its sampler file's fd, -1 */
	struct wlinks wl;                /* in-process watch links of the selected processes */
};

/* smp: the sampled recorder, or NULL for exact mode. 0 or -ENOMEM. */
int targets_init(struct targets *t, struct recorder *r, struct sampled *smp,
		 const struct config *cfg);
void targets_free(struct targets *t);

struct proc_identity;
/* The exec gate's decision (exec_gate.c) for a process the kernel marked at its exec,
 * from its exec record's identity (build-id read from open_path when a rule needs it):
 * 1 it stays traced (counted), 0 the caller takes it out. */
int targets_decide_exec(struct targets *t, pid_t pid, struct proc_identity *id,
			const char *open_path);
/* Exact mode: the exec gate decided process (pid, start_ns), held at its exec (and
 * linked and continued by the hold thread): a rejected one loses its links. */
/* Whether process (pid, start_ns) was held at an exec later than exec_ns (a wrapper's
 * image, sh -c 'exec app', decided after app's hold): that image's rejection must not
 * take back what the hold set up. */
bool targets_held_after(struct targets *t, pid_t pid, uint64_t start_ns, uint64_t exec_ns);
void targets_held_exec(struct targets *t, pid_t pid, uint64_t start_ns, bool accepted);
/* Ends the processes the recorder holds that are gone without an exit record (one that
 * ended while it was being added to the targets map): written with an exit time of now,
 * then forgotten as any exited process; one still without its record at the next tick
 * has attribution's objects settled (access_exit), so nothing holds it for good. A /proc
 * read per held process: per tick. */
size_t targets_end_gone(struct targets *t);
/* Undoes targets_decide_exec's count for a process accepted but gone already. */
void targets_unaccept(struct targets *t);
/* Takes process (pid, start_ns) out of the BPF targets map (not a successor of its PID). */
void targets_untrack(struct targets *t, pid_t pid, uint64_t start_ns);
/* Puts process (pid, start_ns) back in the BPF targets map (a rejected wrapper that
 * exec'd into a selected program). */
void targets_retrack(struct targets *t, pid_t pid, uint64_t start_ns);
/* Probes a binary before any process runs it (the daemon's own sampler library), so
 * that the first processes of a preloading service are not late. */
void targets_preprobe(struct targets *t, const char *path);
/* A process to look at: found by a /proc walk (start_ns 0) or by an exec record
 * (start_ns: its task start time, CLOCK_MONOTONIC ns). */
void targets_consider(struct targets *t, pid_t pid, uint64_t start_ns, bool exec);
/* The recorder's lifecycle callback (recorder.lifecycle): exec discovery, counts. */
void targets_lifecycle(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns);
/* Walks /proc: every process is considered (the targets map makes it idempotent), the
 * traced count is recounted, and listed processes that ended are dropped. */
void targets_rescan(struct targets *t);
/* Looks again at processes waiting for their sampler (due at next_recheck). */
void targets_recheck(struct targets *t, int64_t now_ms);
/* Drops listed processes without the sampler that have ended (cheap; per status tick). */
void targets_prune(struct targets *t);

/* For the status record: the processes lacking the sampler now, "PID EXE" a line (at
 * most TARGETS_UNSAMPLED_SHOWN, newest first), and how many there are in all. */
size_t targets_unsampled_list(const struct targets *t, char *buf, size_t n);
uint64_t targets_unsampled_count(const struct targets *t);
