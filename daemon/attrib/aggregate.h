/* Aggregation of allocation deaths into MemInfoBlocks, one per (context, process, time
 * bucket). Invariants: an entry is dirty from its first change until a flush writes it;
 * only clean entries of closed buckets are evicted, so a failed flush loses nothing; and
 * no entry is ever re-created for an evicted bucket (an object that dies late for one
 * goes to the oldest bucket still held), because a flush writes an entry's full value
 * and a re-created entry would overwrite what the store already holds. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/alloc/intern.h"
#include "store/mib.h"

#define AGG_BUCKET_SECONDS 60      /* time bucket of stored MIBs (CLOCK_REALTIME) */

struct proc;

struct agg {
	struct istack *stack;
	struct proc *proc;
	int64_t bucket;            /* bucket start, unix seconds */
	struct mib mib;
	struct mib_hist hist;      /* AccessHistogram of the objects merged in (mib_hist_merge) */
	bool dirty;
	bool skipped;              /* the last agg_write_dirty's callback left it out */
	uint64_t stored_count;     /* mib.alloc_count as the store holds it (agg_mark_clean) */
};

struct aggtab {
	struct hmap map;
	size_t ndirty;
	int64_t watermark;         /* buckets below this were evicted */
	size_t hist_bytes;         /* heap bytes of the entries' histograms */
};

static inline int64_t agg_bucket_of(int64_t realtime_ns)
{
	int64_t s = realtime_ns / 1000000000;
	return s - s % AGG_BUCKET_SECONDS;
}

/* Folds one object's MIB into its entry (creating it). 0 or -ENOMEM. */
int agg_add(struct aggtab *t, struct istack *s, struct proc *p, int64_t bucket,
	    const struct mib *obj);
/* The same with the object's AccessHistogram (hist_len counts, NULL/0 for none), merged
 * as MemInfoBlock::Merge merges histograms. 0, -E2BIG or -ENOMEM (nothing changed). */
int agg_add_hist(struct aggtab *t, struct istack *s, struct proc *p, int64_t bucket,
		 const struct mib *obj, const uint64_t *hist, uint32_t hist_len);
struct agg *agg_find(const struct aggtab *t, const struct istack *s, const struct proc *p,
		     int64_t bucket);

/* Calls cb for every dirty entry; stops at the first error (< 0) and returns it. Entries
 * are marked clean only by agg_mark_clean(), after the caller's transaction commits; one
 * whose cb returned AGG_SKIP (not written: a flush past its time) stays dirty. */
#define AGG_SKIP 1
typedef int (*agg_write_cb)(struct agg *a, void *arg);
int agg_write_dirty(struct aggtab *t, agg_write_cb cb, void *arg);
void agg_mark_clean(struct aggtab *t);
/* Frees clean entries with bucket < before, and from then on files objects of such
 * buckets under `before`. */
void agg_evict(struct aggtab *t, int64_t before);
size_t agg_count(const struct aggtab *t);
/* Heap bytes the table's entries take, with their share of hash slots. */
size_t agg_bytes(const struct aggtab *t);
/* Drops every entry, dirty or not, of the oldest bucket held, and raises the watermark
 * past it (a late object must not re-create a partial entry). Returns entries dropped;
 * *objects gets the objects they held that the store does not. 0 when the table is empty. */
size_t agg_drop_oldest(struct aggtab *t, uint64_t *objects);
/* Frees the clean entries whose process gone() says is gone for good. Returns how many. */
size_t agg_forget(struct aggtab *t, bool (*gone)(const struct proc *p));
void agg_free(struct aggtab *t);
