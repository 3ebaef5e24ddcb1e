/* The recorder's context: everything `memprofd record` (and later the daemon) holds
 * while tracing. It is the one place with mutable state outside a function's frame. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/attrib/aggregate.h"
#include "daemon/alloc/intern.h"
#include "daemon/alloc/procs.h"
#include "bpf/alloc.h"
#include "daemon/access/src_pmu.h"

#define RECORD_FLUSH_MS 500          /* at most this much is lost on a crash */
#define RECORD_POLL_MS 100

struct alloc_bpf;
struct ring_buffer;
struct bpf_link;
struct store;

struct recorder {
	const char *cmd;                 /* "record" or "daemon", for messages (NULL: "record") */
	struct alloc_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks, links_cap;
	int *fds;                        /* multi-uprobe link fds */
	size_t nfds, fds_cap;
	bool uprobe_multi;               /* kernel has multi-uprobe links */
	struct interner in;
	struct proctab procs;
	struct aggtab aggs;
	struct istack *unknown_stack;    /* context of allocations whose stack was lost */
	struct store *store;
	int64_t run_id;
	int64_t mono_to_real_ns;         /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
	uint64_t events;
	uint64_t unresolved_frames;
	uint64_t unknown_stack_objs;     /* objects attributed to unknown_stack */
	uint64_t objects;                /* objects aggregated (deaths + live at end) */
	bool flush_error_logged;
	struct symcache *symcache;       /* DWARF lines of frames, by build-id (NULL: ELF only) */
	/* --access: the source that opened, its samples, and attribution (NULL when off). */
	struct access_choice access;
	struct src_soft *soft;
	struct src_spe *spe;             /* --access spe: its own AUX-area reader instead of soft */
	struct attrib *attrib;
	struct addrspace *addrspace;     /* attrib's region and data-symbol resolver */
	struct sampled *sampled;         /* --alloc sampled: its state (alloc_sampled.c), else NULL */
	/* The daemon's view of the process lifecycle (NULL in record mode): called after
	 * EV_FORK, EV_EXEC and EV_EXIT are handled, and for EV_NEWEXEC. */
	bool watch_all_exec;             /* set before exact_open: BPF reports every exec */
	void (*lifecycle)(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns);
	void *lifecycle_arg;
	/* Aggregates dropped, oldest bucket first, while the store was unwritable and they
	 * outgrew the memory limit (recorder_bound_memory). */
	uint64_t mem_dropped_aggs, mem_dropped_objects;
	bool mem_drop_logged;
	uint64_t procs_forgotten;        /* exited processes freed by recorder_forget_exited */
};

/* The subcommand name messages start with. */
static inline const char *recorder_cmd(const struct recorder *r)
{
	return r->cmd ? r->cmd : "record";
}

/* The BPF targets map of the allocation mode in use: the processes recorded (the access
 * sources share it). */
int recorder_targets_fd(const struct recorder *r);

int exact_open(struct recorder *r);
/* Attaches the allocator probes to every allocator function `path` defines; returns the
 * number of functions attached (0 if it defines none) or -errno. */
int exact_attach_binary(struct recorder *r, const char *path);
int exact_add_target(struct recorder *r, uint32_t pid);
/* 0 also when pid was no target. */
int exact_remove_target(struct recorder *r, uint32_t pid);
/* Whether pid is in the BPF targets map. */
bool exact_is_target(struct recorder *r, uint32_t pid);
/* Number of entries in the BPF targets map (walks it: for periodic use). */
size_t exact_count_targets(struct recorder *r);
int exact_poll(struct recorder *r, int timeout_ms);
/* Counts allocations made before ts (monotonic ns) and still live as dying at ts: of
 * process (tgid, start), or of every process when tgid == 0. */
int exact_reap(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu);
void exact_counters(struct recorder *r, uint64_t out[CNT_MAX]);
void exact_close(struct recorder *r);

int recorder_flush(struct recorder *r, const char *status);
/* Frees exited processes whose exit is committed, whose aggregates are all written
 * (those are freed too: nothing can add to them any more) and of which access
 * attribution holds no unsettled object; attribution and the access source forget them
 * too. After a successful flush. Returns processes freed. */
size_t recorder_forget_exited(struct recorder *r);
/* While aggregates take more than limit bytes, drops the oldest bucket's (counted in
 * mem_dropped_*, logged once per unwritable spell). For when flushes keep failing. */
void recorder_bound_memory(struct recorder *r, uint64_t limit);
/* Folds one object's MIB into its context's aggregate (bucket from dead_ns, monotonic). */
void recorder_add_mib(struct recorder *r, struct proc *p, struct istack *s, uint64_t dead_ns,
		      const struct mib *m);
/* The same with the object's AccessHistogram (daemon/attrib/attrib.h: per ATTRIB_GRANULE bytes). */
void recorder_add_mib_hist(struct recorder *r, struct proc *p, struct istack *s,
			   uint64_t dead_ns, const struct mib *m, const uint64_t *hist,
			   uint32_t hist_len);

/* --access (daemon/access/access.c). access_setup picks and opens the source (after exact_open
 * or sampled_open: it shares the targets map) and prints which one it uses and why others
 * did not open. A source that cannot open is an error when required (asked for); the
 * default records on without access sampling and says why on stderr (then r->attrib is
 * NULL). */
int access_setup(struct recorder *r, const char *mode, bool required, uint64_t freq,
		 uint64_t period);
int access_poll(struct recorder *r);
void access_forget(struct recorder *r, uint32_t tgid);
/* A process exited (after its allocations were reaped): attribution ends its live objects. */
void access_exit(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns);
void access_finish(struct recorder *r, uint64_t end_ns);
/* One stderr line: the source, its samples, and the accesses by class. */
void access_report(struct recorder *r);
void access_close(struct recorder *r);

/* ---- `--alloc sampled` (daemon/alloc/alloc_sampled.c) ------------------------------------
 * Its own BPF object and ring buffer; shares the recorder's interner, process table
 * and aggregates. Counters use alloc.h's enum alloc_counter indices (so recorder_flush
 * can store them as exact mode's), followed by bpf/sampled.h's enum sampled_counter. */
#include "bpf/sampled.h"
struct sampled;
/* Loads and attaches the lifecycle programs; *out is set even on failure (close it). */
int sampled_open(struct sampled **out, struct recorder *r);
/* Attaches memprofd:alloc/free in the ELF file path (pid -1: every process that maps
 * it, including ones started later). 1 attached, 0 path has no sampler probes, -errno. */
int sampled_attach_binary(struct sampled *s, const char *path, int pid);
/* The same, with the two links (memprofd:alloc, memprofd:free) handed to the caller, who
 * destroys them (bpf_link__destroy) to detach, and without registering path for symbols
 * (the daemon attaches each sampler file once, through a descriptor it holds). */
#define SAMPLED_LINKS 2
struct bpf_link;
int sampled_attach_links(struct sampled *s, const char *path, int pid,
			 struct bpf_link *out[SAMPLED_LINKS]);
/* The sampler a running process has (preloaded/dlopen'ed library, or linked into its
 * executable): 1 attached, 0 none, -errno. */
int sampled_attach_pid(struct sampled *s, int pid);
/* One error line: pid has no sampler, and the ways to load it (unit Environment=, -l). */
void sampled_report_missing(int pid, const char *sampler_path);
/* The two ways to load the sampler, as the end of such a line ("restart it with ..."). */
void sampled_missing_hint(int pid, const char *sampler_path, char *buf, size_t n);
/* Path of libmemprofd_sampler.so to inject: $MEMPROFD_SAMPLER, next to memprofd's build
 * or install prefix, then the system library directories. 0 or -ENOENT. */
int sampled_find_library(char *out, size_t outsz);
/* A copy of environ with LD_PRELOAD=sampler_path[:old LD_PRELOAD]; free with
 * sampled_free_env(). 0 or -ENOMEM. */
int sampled_setup_child_env(char ***envp_out, const char *sampler_path);
void sampled_free_env(char **envp);
int sampled_add_target(struct sampled *s, uint32_t pid);
int sampled_poll(struct sampled *s, int timeout_ms);
/* Every record the BPF side made before this (CLOCK_MONOTONIC ns) has been consumed by
 * sampled_poll: the allocation watermark for attribution. */
uint64_t sampled_watermark(const struct sampled *s);
int sampled_drain(struct sampled *s);          /* consumes everything queued */
int sampled_targets_fd(const struct sampled *s);
int sampled_ring_fd(const struct sampled *s);      /* epoll fd of its ring buffer */
/* Thinning (bpf/sampled.bpf.c keep_q16): keeps each sample with probability keep, its
 * weight divided by keep. Returns the probability in force (keep rounded to 1/65536). */
double sampled_set_keep(struct sampled *s, double keep);
/* With access attribution: the BPF side also sends each sampled allocation (EV_SALLOC). */
void sampled_send_allocs(struct sampled *s, bool on);
struct attrib_object;
/* A sampled object settled in attribution: aggregated with its accesses, weighted. */
void sampled_object(struct sampled *s, const struct attrib_object *o);
int sampled_reap(struct sampled *s, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu);
void sampled_counters(struct sampled *s, uint64_t out[SCNT_MAX]);
/* Sampled allocation and free records read so far (what thinning reduces). */
uint64_t sampled_records(const struct sampled *s);
/* Samples aggregated so far and the objects they stand for (sum of weights). */
void sampled_stats(const struct sampled *s, uint64_t *samples, double *est_objects);
void sampled_close(struct sampled *s);
