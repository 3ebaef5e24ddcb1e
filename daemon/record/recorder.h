/* The recorder's context: everything `memprofd record` (and later the daemon) holds
 * while tracing. It is the one place with mutable state outside a function's frame. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/attrib/aggregate.h"
#include "daemon/alloc/intern.h"
#include "daemon/alloc/procs.h"
#include "daemon/alloc/stash.h"
#include "bpf/alloc.h"
#include "daemon/access/src_pmu.h"

#define RECORD_FLUSH_MS 500          /* at most this much is lost on a crash */
#define RECORD_POLL_MS 100
#define RECORD_SYMBOLIZE_SLICE_MS 100   /* a running flush's naming of new stacks (the rest
                                         * waits for the next flush; the last names all) */

struct alloc_bpf;
struct ring_buffer;
struct bpf_link;
struct store;
struct store_frame;

/* Why an object went to unknown_stack: BPF gave it no stack key (the copy or walk was
 * dropped: CNT_DROP_STACK, CNT_DROP_RINGBUF), its copied stack never arrived or never
 * unwound, or its frame-pointer stack never arrived. */
enum unknown_stack_why { UNKNOWN_NO_KEY, UNKNOWN_COPY_LOST, UNKNOWN_FP_LOST };

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
	uint64_t slice_end_ns;           /* events_poll's bound (CLOCK_MONOTONIC), 0: none */
	uint64_t slice_records;          /* records handled in the current slice */
	bool slice_spent;                /* the slice ran out with records left */
	uint64_t unresolved_frames;
	uint64_t ustacks, ustacks_truncated;  /* stacks unwound from DWARF CFI, of them cut short */
	uint64_t fp_keys_checked[2];     /* frame-pointer keys against their copy: [1] same */
	uint64_t ustack_stops[4];             /* of those, by enum unwind_stop */
	struct stash stash;              /* the ring read during a running flush (stash.h) */
	int unwind_modes_fd;             /* BPF unwind_modes map (daemon/alloc/ustack.c), 0: none */
	int sent_stacks_fd;              /* BPF sent_stacks map: a key's check (ustack.c), 0: none */
	bool unwind_mode_logged;
	uint64_t unknown_stack_objs;     /* objects attributed to unknown_stack */
	uint64_t unknown_stack_why[3];   /* of those: enum unknown_stack_why */
	uint64_t objects;                /* objects aggregated (deaths + live at end) */
	uint64_t probe_net_ns;           /* probe time taken out of their lifetimes (exact) */
	uint64_t probe_net_objects;      /* ... of this many objects */
	uint64_t hit_entry_ns, hit_ret_ns; /* a probe hit's cost beyond its program (exact_calibrate) */
	uint64_t hit_edges_ns;           /* of a call's two, what its gap leaves out */
	uint64_t calib_gap_ns;           /* the calibration's gaps, what target gaps scale by */
	bool flush_error_logged;
	struct symcache *symcache;       /* DWARF lines of frames, by build-id (NULL: ELF only) */
	struct sym_warm *sym_warm;       /* a thread using symcache: joined before its next use */
	struct namecache *names;         /* chains found by earlier runs (NULL: none; record's) */
	bool core_btf_used;              /* the BPF load's CO-RE ran on a cached minimized BTF */
	struct istack **unsym;           /* stacks stored bare, oldest first (symbolize.c) */
	size_t nunsym, unsym_cap;
	unsigned unsym_at;               /* the first stack's frame to resume naming at */
	int64_t sym_slice_ms;            /* a running flush's naming (0: RECORD_SYMBOLIZE_SLICE_MS) */
	bool sym_error_logged;
	bool names_elsewhere;            /* the daemon's namer names bare frames: none queued */
	/* --access: the source that opened, its samples, and attribution (NULL when off). */
	struct access_choice access;
	struct src_soft *soft;
	struct src_spe *spe;             /* --access spe: its own AUX-area reader instead of soft */
	struct attrib *attrib;
	struct addrspace *addrspace;     /* attrib's region and data-symbol resolver */
	struct sampled *sampled;         /* --alloc sampled: its state (alloc_sampled.c), else NULL */
	/* --alloc sampled with --access: watchpoint windows over the sampled objects
	 * (daemon/access/watch.h; NULL: none), and what they gave the settled objects. */
	struct watch *watch;
	bool no_watch;                   /* set before access_setup: --watch off */
	bool no_watch_usdt;              /* set before sampled_open: the sampler's memprofd:watch
					  * probe cannot be used (its program is not loaded) */
	bool watch_inprocess;            /* set before access_setup: memprofd:watch (the sampler's
	                                  * in-process watches) is attached with the watch: by
	                                  * record per sampler file, by the daemon per selected
	                                  * process (daemon/service/watch_links.c) */
	uint64_t watch_hits, watch_est;  /* traps behind the estimates, accesses estimated */
	uint64_t watch_imputed;          /* unwatched objects given their context's ratio */
	/* The daemon's view of the process lifecycle (NULL in record mode): called after
	 * EV_FORK, EV_EXEC and EV_EXIT are handled, and for EV_NEWEXEC. */
	bool watch_all_exec;             /* set before exact_open: BPF reports every exec */
	bool mark_at_exec;               /* with watch_all_exec: the kernel makes every exec'ing
	                                  * process a target until the daemon decides */
	bool no_otel;                    /* set before sampled_open: otel_memory programs are not
	                                  * loaded (their verification is most of start-up) */
	size_t ring_bytes;               /* set before exact_open: 0 = ALLOC_RINGBUF_BYTES */
	int ring_fd;                     /* > 0: a ring of ring_bytes made beforehand, adopted by
	                                  * the load (record's ring_bg.h); else the load makes it */
	bool alloc_off;                  /* alloc = off: exact mode's lifecycle, no allocator probe */
	bool per_target_probes;          /* set before exact_open (the daemon): each target gets
	                                  * its own pid-filtered links, and execs of files the
	                                  * rules name are held until they exist; exact_open
	                                  * clears it without multi-uprobe links */
	void (*lifecycle)(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns);
	void *lifecycle_arg;
	/* Aggregates dropped, oldest bucket first, while the store was unwritable and they
	 * outgrew the memory limit (recorder_bound_memory). */
	uint64_t mem_dropped_aggs, mem_dropped_objects;
	uint64_t mem_limit_bytes;        /* the limit they were dropped over */
	uint64_t mem_peak_bytes;         /* the aggregates' largest size at a failed flush */
	bool mem_drop_logged;            /* in this unwritable spell */
	bool mem_behind_logged;          /* dropped while only behind, once a run */
	/* The daemon's stop within its budget (daemon/service/stop.c): ring records read
	 * after the drain's deadline are counted instead of handled, the final flush writes
	 * aggregates until stop_write_end_ns and names stacks until stop_name_end_ns
	 * (CLOCK_MONOTONIC; 0: no bound, as in record), and what it left out is counted. */
	bool stop_discard;
	int64_t flush_write_ms;          /* a running flush writes aggregates this long at most,
	                                  * the rest stay dirty for the next (0: no bound) */
	uint64_t write_end_ns;           /* the flush in progress's bound (recorder.c) */
	uint64_t stop_write_end_ns, stop_name_end_ns, stop_budget_ms;
	uint64_t stop_records, stop_aggs, stop_objects;
	uint64_t procs_forgotten;        /* exited processes freed by recorder_forget_exited */
	/* What the run missed (query status): processes whose probes came after they
	 * started (the daemon's targets), allocation records of processes never named. */
	uint64_t missed_late, missed_unknown;
	/* The daemon's exec gate (NULL in record mode): called first for every record;
	 * 0 drops it (a process the daemon's rules rejected, decided at its exec). */
	int (*gate)(void *arg, const void *data, size_t len);
	void *gate_arg;
};

/* The subcommand name messages start with. */
static inline const char *recorder_cmd(const struct recorder *r)
{
	return r->cmd ? r->cmd : "record";
}

/* Logs why an allocation object's core_btf_load failed at stage (core_btf.h; a
 * configure stage logged its own) and returns err. */
int recorder_bpf_load_error(const struct recorder *r, int err, int stage);

/* The BPF targets map of the allocation mode in use: the processes recorded (the access
 * sources share it). */
int recorder_targets_fd(const struct recorder *r);

int recorder_flush(struct recorder *r, const char *status);
/* A stack about to be stored bare, queued for recorder_symbolize (named at once where the
 * queue cannot grow). Always 0. */
int recorder_queue_symbols(struct recorder *r, struct istack *s);
/* Names queued stacks for about budget_ms (< 0: all; at least one frame), then writes the
 * frames' names and lines in a transaction of its own: 0, or -errno (kept queued). */
int recorder_symbolize(struct recorder *r, int64_t budget_ms);
/* The store's view of s's frames (ALLOC_MAX_UFRAMES at most), names where known. */
void recorder_store_frames(struct recorder *r, const struct istack *s, struct store_frame *f);
void recorder_symbols_free(struct recorder *r);
/* Frees exited processes whose exit is committed, whose aggregates are all written
 * (those are freed too: nothing can add to them any more) and of which access
 * attribution holds no unsettled object; attribution and the access source forget them
 * too. After a successful flush. Returns processes freed. */
size_t recorder_forget_exited(struct recorder *r);
/* While aggregates take more than limit bytes, drops the oldest bucket's (counted in
 * mem_dropped_*, logged once per unwritable spell). For when flushes keep failing, or
 * leave entries dirty (a daemon fed faster than its store takes them). */
void recorder_bound_memory(struct recorder *r, uint64_t limit);
/* Folds one object's MIB into its context's aggregate (bucket from dead_ns, monotonic). */
void recorder_add_mib(struct recorder *r, struct proc *p, struct istack *s, uint64_t dead_ns,
		      const struct mib *m);
/* Takes the probes' share of one object's lifetime out of m (store/mib.h
 * mib_net_of_probes), counted in probe_net_ns and probe_net_objects. */
void recorder_net_of_probes(struct recorder *r, struct mib *m, uint64_t probe_ns);
/* The same with the object's AccessHistogram (daemon/attrib/attrib.h: per ATTRIB_GRANULE bytes). */
void recorder_add_mib_hist(struct recorder *r, struct proc *p, struct istack *s,
			   uint64_t dead_ns, const struct mib *m, const uint64_t *hist,
			   uint32_t hist_len);
