/* Records both allocation modes share: stacks and the process lifecycle (events.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/record/recorder.h"

/* Counts the allocations of process (tgid, start_ns) made before ts_ns as dying then. */
typedef void (*events_reap_fn)(struct recorder *r, uint32_t tgid, uint64_t start_ns,
			       uint64_t ts_ns, uint32_t cpu);

/* Handles EV_STACK, EV_USTACK, EV_FORK, EV_EXEC and EV_EXIT (false for any other record
 * type), then tells r->lifecycle of EV_FORK..EV_NEWEXEC records. */
bool events_common(struct recorder *r, const void *data, size_t len, events_reap_fn reap);

/* The process of an allocation record (proc_get), counting the record in
 * r->missed_unknown when the process has no name (seen by neither an exec record nor
 * /proc): its contexts would be nameless. NULL if out of memory. */
struct proc *events_proc(struct recorder *r, uint32_t tgid, uint64_t start_ns);
/* Runs the daemon's exec gate (recorder.gate): false when the record is to be dropped. */
static inline bool events_gate(struct recorder *r, const void *data, size_t len)
{
	return !r->gate || r->gate(r->gate_arg, data, len);
}

/* Keys of a live map (struct live_key) of process tgid (0: all), collected before the
 * caller deletes any: deleting while walking would restart the walk. *out is malloc'd
 * (NULL when empty). 0 or -ENOMEM. */
int events_live_keys(int fd, uint32_t tgid, struct live_key **out, size_t *n);

/* A bounded drain of an allocation ring. A producer faster than its reader (a flood of
 * short-lived objects, DWARF stack copies, a sanitizer build) would keep one
 * ring_buffer__consume going for seconds, starving the flushes, the governor's ticks and
 * the watchdog. libbpf 1.1 has no ring_buffer__consume_n, but it stops a consume (or poll)
 * when the sample callback returns < 0, after moving past that record, so the record is
 * consumed and handled. Each ring callback returns events_slice_after(r); events_poll()
 * runs one slice. Costs one clock read (vDSO) per record while a slice is bounded. */
#define EVENTS_SLICE_NS (50 * 1000000ULL)   /* one wake-up's reading, then the loop's jobs */
int events_slice_after(struct recorder *r);
/* ring_buffer__poll(timeout_ms) then a consume, for at most max_ns of reading (0: until
 * empty). Returns the records handled (>= 0) or -errno; *more (may be NULL) tells whether
 * the slice ran out with records left: the caller polls again without waiting. */
int events_poll(struct recorder *r, struct ring_buffer *rb, int timeout_ms, uint64_t max_ns,
		bool *more);

struct bpf_link;
struct bpf_program;

/* What every allocation mode sets up before loading its BPF object: libbpf's logging,
 * the unknown-stack context, and the monotonic-to-realtime offset. 0 or -ENOMEM. */
int events_recorder_init(struct recorder *r);
/* Appends l to a growing link array; on -ENOMEM l is destroyed. */
int events_link_push(struct bpf_link ***v, size_t *n, size_t *cap, struct bpf_link *l);
/* Attaches the lifecycle programs every BPF object has: the sched tracepoints (fork,
 * exec, exit) and, unless NULL, mmap(2)'s exit (EV_MMAP, bpf/mmap_watch.bpf.h). */
int events_attach_lifecycle(struct bpf_program *on_fork, struct bpf_program *on_exec,
			    struct bpf_program *on_exit, struct bpf_program *on_mmap,
			    struct bpf_link ***v, size_t *n, size_t *cap);

#define EVENTS_DETACH_THREADS 16   /* links detached at once at the end of a recording */
/* Destroys every link and closes every link fd, in parallel (each classic uprobe waits
 * for a grace period on detach). */
void events_detach_all(struct bpf_link **links, size_t nlinks, const int *fds, size_t nfds);
