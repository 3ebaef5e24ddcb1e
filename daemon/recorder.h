/* The recorder's context: everything `memprofd record` (and later the daemon) holds
 * while tracing. It is the one place with mutable state outside a function's frame. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/aggregate.h"
#include "daemon/intern.h"
#include "daemon/procs.h"
#include "bpf/alloc.h"

#define RECORD_FLUSH_MS 500          /* at most this much is lost on a crash */
#define RECORD_POLL_MS 100

struct alloc_bpf;
struct ring_buffer;
struct bpf_link;
struct store;

struct recorder {
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
};

int exact_open(struct recorder *r);
/* Attaches the allocator probes to every allocator function `path` defines; returns the
 * number of functions attached (0 if it defines none) or -errno. */
int exact_attach_binary(struct recorder *r, const char *path);
int exact_add_target(struct recorder *r, uint32_t pid);
int exact_poll(struct recorder *r, int timeout_ms);
/* Counts allocations made before ts (monotonic ns) and still live as dying at ts: of
 * process (tgid, start), or of every process when tgid == 0. */
int exact_reap(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu);
void exact_counters(struct recorder *r, uint64_t out[CNT_MAX]);
void exact_close(struct recorder *r);

int recorder_flush(struct recorder *r, const char *status);
