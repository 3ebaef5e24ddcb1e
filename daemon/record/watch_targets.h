/* record's in-process watches per target process (issue 15): memprofd:watch is linked to
 * the sampler file with a pid filter for the command and for each process it forks
 * (through the daemon's worker, daemon/service/watch_links.h), never host-wide, so a
 * process outside the recording that maps the same sampler file arms no watch. Without
 * multi-uprobe links, a classic pid-filtered attachment per process, made inline.
 * Costs: one link per target (~15 ms of the worker's wall time, little CPU). */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "daemon/service/watch_links.h"

struct recorder;
struct sampled;

struct rec_wtargets {
	struct wlinks wl;
	struct sampled *smp;       /* NULL: off */
	int fd;                    /* the sampler file, open for the run */
	bool classic;              /* no multi-uprobe links: sampled_attach_watch_pid inline */
	uint64_t forks;            /* forked children given a link of their own */
	void (*next)(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns);
	void *next_arg;            /* the recorder's lifecycle hook before ours, chained */
};

/* After access_setup: on only when the recorder's watch and in-process watches are on.
 * Chains itself into r->lifecycle (forks get links, exits lose theirs). 0 or -errno. */
int rwt_open(struct rec_wtargets *w, struct recorder *r, struct sampled *smp,
	     const char *sampler_path);
/* Links memprofd:watch for pid (queued; the worker makes it). 0 or -errno. */
int rwt_add(struct rec_wtargets *w, pid_t pid);
/* After release_later (the helper holds the links: closing them here waits for nothing). */
void rwt_close(struct rec_wtargets *w);
