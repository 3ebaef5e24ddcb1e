/* `--alloc exact` (daemon/alloc/alloc_exact.c): the allocator uprobes' BPF object, its
 * targets map and ring buffer, held in the recorder (r->skel, r->rb, r->links). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/record/recorder.h"

int exact_open(struct recorder *r);
/* Attaches the allocator probes to every allocator function `path` defines; returns the
 * number of functions attached (0 if it defines none) or -errno. */
int exact_attach_binary(struct recorder *r, const char *path);
/* The same for process pid alone (its threads, across its execs; not its children) where
 * the kernel has multi-uprobe links, so no other process traps; elsewhere (classic
 * uprobes) as exact_attach_binary. pid <= 0: every process. */
int exact_attach_binary_pid(struct recorder *r, const char *path, int pid);
/* A binary's allocator probe sites (file offsets, cookies), found once and attached to
 * many processes. */
#define EXACT_PROBES_MAX 64      /* allocator functions probed per binary */
#define EXACT_PID_LINKS 3        /* links per binary and process: entry, return, free */
struct exact_sites {
	uint64_t aoff[EXACT_PROBES_MAX], acookie[EXACT_PROBES_MAX];
	uint64_t foff[EXACT_PROBES_MAX], fcookie[EXACT_PROBES_MAX];
	size_t na, nf;
	int attached;            /* distinct functions */
};
/* Fills s for path: the number of functions (0: none), or -errno. */
int exact_sites_of(const char *path, struct exact_sites *s);
/* Attaches s at path for pid alone (pid <= 0: every process); links kept in r. 0/-errno. */
int exact_attach_sites(struct recorder *r, const char *path, const struct exact_sites *s, int pid);
/* Multi-uprobe links of s at path for process pid alone, handed to the caller in fds
 * (close them to detach; -1 where a kind has no site). 0, -EOPNOTSUPP without
 * multi-uprobe links, or -errno. Thread-safe: r is only read. */
int exact_attach_pid_links(const struct recorder *r, const char *path, const struct exact_sites *s,
			   int pid, int fds[EXACT_PID_LINKS]);
int exact_add_target(struct recorder *r, uint32_t pid);
/* 0 also when pid was no target. */
int exact_remove_target(struct recorder *r, uint32_t pid);
/* Whether pid is in the BPF targets map. */
bool exact_is_target(struct recorder *r, uint32_t pid);
/* Number of entries in the BPF targets map (walks it: for periodic use). */
size_t exact_count_targets(struct recorder *r);
int exact_poll(struct recorder *r, int timeout_ms, bool *more);
/* Counts allocations made before ts (monotonic ns) and still live as dying at ts: of
 * process (tgid, start), or of every process when tgid == 0. */
int exact_reap(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu);
void exact_counters(struct recorder *r, uint64_t out[CNT_MAX]);
void exact_close(struct recorder *r);
