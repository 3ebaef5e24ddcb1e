/* Records both allocation modes share: stacks and the process lifecycle (events.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/record/recorder.h"

/* Counts the allocations of process (tgid, start_ns) made before ts_ns as dying then. */
typedef void (*events_reap_fn)(struct recorder *r, uint32_t tgid, uint64_t start_ns,
			       uint64_t ts_ns, uint32_t cpu);

/* Handles EV_STACK, EV_FORK, EV_EXEC and EV_EXIT; false for any other record type. */
bool events_common(struct recorder *r, const void *data, size_t len, events_reap_fn reap);

/* Keys of a live map (struct live_key) of process tgid (0: all), collected before the
 * caller deletes any: deleting while walking would restart the walk. *out is malloc'd
 * (NULL when empty). 0 or -ENOMEM. */
int events_live_keys(int fd, uint32_t tgid, struct live_key **out, size_t *n);

struct bpf_link;
struct bpf_program;

/* What every allocation mode sets up before loading its BPF object: libbpf's logging,
 * the unknown-stack context, and the monotonic-to-realtime offset. 0 or -ENOMEM. */
int events_recorder_init(struct recorder *r);
/* Appends l to a growing link array; on -ENOMEM l is destroyed. */
int events_link_push(struct bpf_link ***v, size_t *n, size_t *cap, struct bpf_link *l);
/* Attaches the three sched tracepoint programs every BPF object has (fork, exec, exit). */
int events_attach_lifecycle(struct bpf_program *on_fork, struct bpf_program *on_exec,
			    struct bpf_program *on_exit, struct bpf_link ***v, size_t *n,
			    size_t *cap);
