/* MemInfoBlock: the per-allocation-context aggregate, with MemProf's field meanings
 * (llvm/include/llvm/ProfileData/MemProfData.inc). Lifetimes and timestamps are kept
 * in nanoseconds here; exports convert to MemProf's milliseconds. mib_merge() folds
 * objects in deallocation order, exactly as MemInfoBlock::Merge does. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct mib {
	uint64_t alloc_count;
	uint64_t total_size, min_size, max_size;
	uint64_t total_lifetime_ns, min_lifetime_ns, max_lifetime_ns;
	uint64_t alloc_ts_ns, dealloc_ts_ns;       /* of the last object merged in */
	uint32_t alloc_cpu, dealloc_cpu;           /* of the last object merged in */
	uint64_t num_migrated_cpu;
	uint64_t num_lifetime_overlaps;
	uint64_t num_same_alloc_cpu, num_same_dealloc_cpu;
	/* Access fields: zero until an access source attributes samples. */
	uint64_t access_samples;                   /* raw samples that hit this context */
	uint64_t total_access_count, min_access_count, max_access_count; /* estimated */
	/* Evidence and leaks (schema >= 9; 0 in rows of older stores: unknown). Not MemProf
	 * fields: its writers ignore them. */
	uint64_t alloc_samples;                    /* objects observed (exact: all; sampled:
						    * the samples alloc_count rests on) */
	uint64_t live_at_exit_count;               /* objects of alloc_count never freed... */
	uint64_t live_at_exit_bytes;               /* ...before their process ended, and */
	uint64_t live_at_exit_lifetime_ns;         /* ...their share of total_lifetime_ns */
	/* Per-object access density extremes (issue 17; schema >= 12): each object's
	 * est accesses / size (accesses per byte) and that per second of its lifetime
	 * (at least MIB_MIN_LIFETIME_NS), as MemProf's Min/Max(Lifetime)AccessDensity
	 * without its x100 and integer steps. has_density: every object behind this MIB
	 * contributed (false in zero-initialized MIBs and rows of older stores: then only
	 * bounds from the count/size/lifetime extremes are known, mib_density_bounds()). */
	uint64_t has_density;                      /* 0 or 1 (a full word: no padding) */
	double min_access_density, max_access_density;
	double min_lifetime_access_density, max_lifetime_access_density;
	/* Watch evidence (issue 15; schema >= 13; 0 in older rows: none): hardware-watch
	 * traps behind the estimate and the time granules of the objects were watched
	 * (granule-nanoseconds, trap time removed), raw counts, never scaled by weights:
	 * what a hot context would have shown is decided from them (reporter/classify.c). */
	uint64_t watch_hits, watch_ns;
	/* The stall factor's share of total_access_count's uncertainty (issue 17; schema >=
	 * 16; 0 in older rows): a standard error in accesses; rows add (mib_combine, the
	 * store's SQL and the fleet's sums alike: an upper bound). reporter/estimate.c
	 * widens the Poisson interval with it. */
	uint64_t access_est_err;
	/* Bytes read or written by total_access_count's accesses (issue 17; schema >= 17; 0
	 * in older rows: unknown): each sampled access weighted by its operand's width, the
	 * unit valgrind DHAT counts. The exports keep accesses, MemProf's unit. */
	uint64_t total_access_bytes;
};
#define MIB_MIN_LIFETIME_NS 1000000ull    /* MemProf's 1 ms floor for lifetime densities */

/* One object's lifetime access density (accesses per byte per second). */
double mib_lifetime_density(uint64_t count, uint64_t size, uint64_t life_ns);
/* The density fields of m (has_density) or, without them, their bounds from the
 * per-object extremes of count, size and lifetime: min count / max size / max lifetime
 * is at most every object's value and max / min / min at least (exact for one object). */
void mib_density_extremes(const struct mib *m, double *min_ad, double *max_ad,
			  double *min_lad, double *max_lad);

/* One object's MIB, as MemProf builds it at deallocation (or at process exit). */
void mib_from_object(struct mib *m, uint64_t size, uint64_t alloc_ts_ns, uint64_t dealloc_ts_ns,
		     uint32_t alloc_cpu, uint32_t dealloc_cpu, uint64_t access_count);

/* Takes probe_ns, the time exact mode's probes took during the object's life (bpf/
 * alloc.h ev_free.probe_ns), out of the lifetime of m, a one-object MIB from
 * mib_from_object, and recomputes its lifetime density. The timestamps stay as seen: they
 * order objects (overlaps) and place them in time buckets. A lifetime shorter than
 * probe_ns becomes 0 (MemProf's 1 ms floor then rates it). */
void mib_net_of_probes(struct mib *m, uint64_t probe_ns);

/* Marks every object of m as still allocated when its process ended (issue 21): the
 * live_at_exit fields take m's count, bytes and lifetimes. */
void mib_mark_live_at_exit(struct mib *m);

/* Fold the single object `obj` (deallocated after everything already in `into`) into
 * `into`, exactly as MemInfoBlock::Merge: NumLifetimeOverlaps counts objects allocated
 * before the previous one was deallocated, NumSame{Alloc,Dealloc}Cpu objects on the same
 * CPU as the previous one, and num_migrated_cpu stays the first object's flag.
 * An `into` with alloc_count == 0 is empty and becomes a copy of `obj`. */
void mib_merge(struct mib *into, const struct mib *obj);

/* Combine two aggregates of disjoint object sets whose order is unknown (buckets,
 * processes, hosts): counts add (num_migrated_cpu, overlaps and same-CPU counts
 * included), min/max combine, and the "last object" fields (timestamps, CPUs) are
 * those of the aggregate whose last object was deallocated later (alloc_ts, then the
 * CPUs break ties; full ties take `b`'s), so the result does not depend on the order.
 * An aggregate with alloc_count == 0 is empty: combining it changes nothing. */
void mib_combine(struct mib *a, const struct mib *b);

/* The v4 AccessHistogram of a MIB: estimated accesses per granule of the objects
 * (daemon/attrib/attrib.h's ATTRIB_GRANULE bytes; index 0 at the object's first byte). It lives
 * beside struct mib, not in it, so that struct mib stays a plain value; len 0 (v NULL)
 * means none. Stored as a blob of little-endian uint64 (mib.access_hist, schema >= 6). */
struct mib_hist {
	uint64_t *v;
	uint32_t len;
};
#define MIB_HIST_MAX_LEN 65536     /* entries; a longer histogram (a corrupt blob) is refused */

/* Folds n counts into h as MemInfoBlock::Merge does (MemProfData.inc, v4): the longer
 * histogram is kept and the shorter one's counts are added to it elementwise, so the
 * result is the elementwise sum with the shorter one zero-extended, whatever the order
 * (sums saturate at UINT64_MAX). n == 0 changes nothing. 0, -E2BIG (n over
 * MIB_HIST_MAX_LEN) or -ENOMEM; h is unchanged on failure. */
int mib_hist_merge(struct mib_hist *h, const uint64_t *v, uint32_t n);
/* The same with counts given as a little-endian uint64 blob; -EINVAL if bytes % 8. */
int mib_hist_merge_blob(struct mib_hist *h, const void *blob, size_t bytes);
/* Writes h as len little-endian uint64 into out (8 * len bytes). */
void mib_hist_to_blob(const struct mib_hist *h, void *out);
void mib_hist_free(struct mib_hist *h);
