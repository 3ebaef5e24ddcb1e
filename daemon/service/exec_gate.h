/* The daemon's exec gate (exec_gate.c): decides each process the kernel marked at its exec
 * (bpf/exec_watch.bpf.h) from the EV_NEWEXEC record alone, names it from the record, and
 * drops the records of the processes it rejected (and of their children forked before
 * the decision) that were already in the ring. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/alloc/intern.h"

#define EXEC_GATE_FORGET_MS 5000   /* a rejected process's records arrive within this */
#define EXEC_GATE_PURGE_MAX 4096   /* rejected processes remembered for the live-map purge */

struct recorder;
struct targets;

struct exec_gate {
	struct recorder *r;
	struct targets *t;
	struct hmap rejected[2];   /* hash(tgid, start_ns): this generation and the last */
	int cur;
	int64_t next_age_ms;       /* CLOCK_MONOTONIC: the older generation is forgotten */
	uint32_t *purge;           /* rejected pids whose allocations may sit in the live map */
	size_t npurge;
	bool purge_all;            /* more than EXEC_GATE_PURGE_MAX: purge every non-target */
};

void exec_gate_init(struct exec_gate *g, struct recorder *r, struct targets *t);
void exec_gate_free(struct exec_gate *g);
/* Deletes the live-map entries (allocations made between exec and rejection) of the
 * rejected processes that are no targets now: one walk of the live map, for the
 * daemon's periodic tick; nothing when none was rejected since the last call. */
void exec_gate_purge(struct exec_gate *g);
/* recorder.gate: 0 drops the record. */
int exec_gate(void *arg, const void *data, size_t len);
