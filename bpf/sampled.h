/* Contract between sampled.bpf.c and daemon/alloc/alloc_sampled.c: the sampler's USDT probes
 * (sampler/sampler.h) become these records. Stacks, forks, execs and exits use the
 * records of alloc.h unchanged, so both modes decode them with the same code; only a
 * sampled object's death differs: it carries the weight of its sample. */
#pragma once
#include "alloc.h"

#define SAMPLED_LIVE_MAX (1 << 18)     /* sampled objects live at once (of all targets) */
#define SAMPLED_CALLER_SEARCH 8        /* frames searched for the sampler's caller */
#define SAMPLED_DEFAULT_SKIP 2         /* sampler frames dropped when the caller is not found */
#define SAMPLED_WEIGHT_SHIFT 16        /* weights are Q48.16, as the probe passes them */
#define SAMPLED_KEEP_ONE (1u << 16)    /* keep_q16 that keeps every sample (no thinning) */
#define SAMPLED_F_OTEL 0x40000000u     /* from the otel_memory contract, not memprofd's sampler */
#define SAMPLED_F_THINNED 0x80000000u  /* slive_val.flags: dropped by thinning; kept in the
                                        * live map only so its free is known, not reported */

enum {
	EV_SFREE = 16,                 /* a sampled object died */
	EV_SALLOC,                     /* a sampled object was made (only with send_allocs) */
	EV_SWATCH,                     /* the sampler's own watch on an object ended (its free) */
};

/* Counters beyond alloc.h's enum alloc_counter (same per-CPU array, longer). */
enum sampled_counter {
	SCNT_NO_REGION = CNT_MAX,      /* samples outside the region: their free is not seen */
	SCNT_NO_CALLER,                /* stacks where the caller was not found (default skip) */
	SCNT_THINNED,                  /* samples of targets dropped by thinning (keep_q16) */
	SCNT_THINNED_FREES,            /* frees of those (their objects' deaths, not reported) */
	SCNT_MAX,
};

struct ev_sfree {
	struct ev_hdr h;
	unsigned long long key;        /* stack key (alloc.h's ev_stack.key), 0 if unknown */
	unsigned long long size;
	unsigned long long weight_q16; /* objects the sample stands for, * 2^16 */
	unsigned long long alloc_ns, free_ns;   /* CLOCK_MONOTONIC */
	unsigned int alloc_cpu, free_cpu;
	unsigned int flags;            /* SAMPLER_F_* of the allocation */
	unsigned int pad;
	unsigned long long addr;       /* the object, for access attribution */
};

/* Sent at a sampled allocation while the daemon attributes accesses (sampled.bpf.c's
 * send_allocs): with ev_sfree, attribution sees both ends of the object. */
struct ev_salloc {
	struct ev_hdr h;
	unsigned long long key;        /* stack key, 0 if unknown */
	unsigned long long addr, size;
	unsigned long long weight_q16;
	unsigned long long alloc_ns;   /* CLOCK_MONOTONIC, as ev_sfree's */
	unsigned int cpu;
	unsigned int flags;
};

struct slive_val {
	unsigned long long size;
	unsigned long long ts_ns;
	unsigned long long key;
	unsigned long long start_ns;
	unsigned long long weight_q16;
	unsigned int cpu;
	unsigned int flags;
};

/* memprofd:watch (sampler/sampler.h): the sampler's in-process watch on a region object,
 * read at its free; sent before that object's ev_sfree. */
struct ev_swatch {
	struct ev_hdr h;
	unsigned long long addr;
	unsigned long long hits;       /* traps of the allocating thread */
	unsigned long long watched_ns; /* time enabled (until the K-th trap when capped) */
	unsigned int flags;            /* K | SAMPLED_WATCH_CAPPED */
	unsigned int granule;          /* bytes watched */
};
#define SAMPLED_WATCH_K_MASK 0xffffu
#define SAMPLED_WATCH_CAPPED 0x10000u
#define SAMPLED_WATCH_OTHER_THREAD 0x40000u   /* freed by another thread than the allocating one */
#define SAMPLED_WATCH_STRAY_SHIFT 24          /* debug traps the sampler's guard swallowed */
