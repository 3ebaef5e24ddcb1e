/* The aggregation table behind every flush: MemProf MIB semantics (AccessHistograms
 * included) come from store/mib.c; this file only keys entries and tracks which ones a
 * flush still owes the store. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "daemon/attrib/aggregate.h"

struct aggkey { const struct istack *s; const struct proc *p; int64_t bucket; };

static uint64_t key_hash(const struct aggkey *k)
{
	return hash_u64((uintptr_t)k->s * 31 + (uintptr_t)k->p * 17 + (uint64_t)k->bucket);
}

static bool key_eq(const void *val, const void *key)
{
	const struct agg *a = val;
	const struct aggkey *k = key;

	return a->stack == k->s && a->proc == k->p && a->bucket == k->bucket;
}

struct agg *agg_find(const struct aggtab *t, const struct istack *s, const struct proc *p,
		     int64_t bucket)
{
	struct aggkey k = { s, p, bucket };

	return hmap_find(&t->map, key_hash(&k), key_eq, &k);
}

int agg_add(struct aggtab *t, struct istack *s, struct proc *p, int64_t bucket,
	    const struct mib *obj)
{
	return agg_add_hist(t, s, p, bucket, obj, NULL, 0);
}

static void agg_entry_free(struct aggtab *t, struct agg *a)
{
	t->hist_bytes -= (size_t)a->hist.len * sizeof(*a->hist.v);
	mib_hist_free(&a->hist);
	free(a);
}

int agg_add_hist(struct aggtab *t, struct istack *s, struct proc *p, int64_t bucket,
		 const struct mib *obj, const uint64_t *hist, uint32_t hist_len)
{
	if (bucket < t->watermark)
		bucket = t->watermark;
	struct aggkey k = { s, p, bucket };
	uint64_t h = key_hash(&k);
	struct agg *a = hmap_find(&t->map, h, key_eq, &k);

	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		a->stack = s;
		a->proc = p;
		a->bucket = bucket;
		if (hmap_insert(&t->map, h, a)) {
			free(a);
			return -ENOMEM;
		}
	}
	if (hist_len) {
		uint32_t before = a->hist.len;
		int r = mib_hist_merge(&a->hist, hist, hist_len);

		if (r)
			return r;   /* a new entry stays, empty: mib_combine() ignores it */
		t->hist_bytes += (size_t)(a->hist.len - before) * sizeof(*a->hist.v);
	}
	mib_merge(&a->mib, obj);
	if (!a->dirty) {
		a->dirty = true;
		t->ndirty++;
	}
	return 0;
}

int agg_write_dirty(struct aggtab *t, agg_write_cb cb, void *arg)
{
	hmap_foreach(&t->map, i) {
		struct agg *a = t->map.vals[i];
		if (a->dirty) {
			int r = cb(a, arg);
			if (r < 0)
				return r;
			a->skipped = r == AGG_SKIP;
		}
	}
	return 0;
}

void agg_mark_clean(struct aggtab *t)
{
	size_t left = 0;

	hmap_foreach(&t->map, i) {
		struct agg *a = t->map.vals[i];

		if (a->dirty && !a->skipped)
			a->stored_count = a->mib.alloc_count;
		a->dirty = a->dirty && a->skipped;
		left += a->dirty;
		a->skipped = false;
	}
	t->ndirty = left;
}

void agg_evict(struct aggtab *t, int64_t before)
{
	/* Collect first: removal reorders probe runs under the iteration. */
	size_t n = 0;
	struct agg **v = malloc(t->map.n * sizeof(*v) + 1);

	if (!v)
		return;   /* memory stays bounded by the next successful eviction */
	/* Dirty entries of old buckets stay; no new ones may join them. */
	if (before > t->watermark)
		t->watermark = before;
	hmap_foreach(&t->map, i) {
		struct agg *a = t->map.vals[i];
		if (!a->dirty && a->bucket < before)
			v[n++] = a;
	}
	for (size_t i = 0; i < n; i++) {
		struct aggkey k = { v[i]->stack, v[i]->proc, v[i]->bucket };
		hmap_remove(&t->map, key_hash(&k), v[i]);
		agg_entry_free(t, v[i]);
	}
	free(v);
}

/* Collect first: removal reorders probe runs under the iteration. */
static size_t remove_where(struct aggtab *t, bool (*pick)(const struct agg *a, const void *arg),
			   const void *arg, uint64_t *objects)
{
	size_t n = 0;
	struct agg **v = malloc(t->map.n * sizeof(*v) + 1);

	if (!v)
		return 0;
	hmap_foreach(&t->map, i) {
		struct agg *a = t->map.vals[i];
		if (pick(a, arg))
			v[n++] = a;
	}
	for (size_t i = 0; i < n; i++) {
		struct aggkey k = { v[i]->stack, v[i]->proc, v[i]->bucket };
		if (v[i]->dirty)
			t->ndirty--;
		if (objects)
			*objects += v[i]->mib.alloc_count - v[i]->stored_count;
		hmap_remove(&t->map, key_hash(&k), v[i]);
		agg_entry_free(t, v[i]);
	}
	free(v);
	return n;
}

static bool in_bucket(const struct agg *a, const void *arg)
{
	return a->bucket == *(const int64_t *)arg;
}

size_t agg_drop_oldest(struct aggtab *t, uint64_t *objects)
{
	int64_t oldest = INT64_MAX;

	hmap_foreach(&t->map, i) {
		const struct agg *a = t->map.vals[i];
		if (a->bucket < oldest)
			oldest = a->bucket;
	}
	if (oldest == INT64_MAX)
		return 0;
	if (oldest + AGG_BUCKET_SECONDS > t->watermark)
		t->watermark = oldest + AGG_BUCKET_SECONDS;
	return remove_where(t, in_bucket, &oldest, objects);
}

static bool clean_and_gone(const struct agg *a, const void *arg)
{
	bool (*gone)(const struct proc *) = *(bool (*const *)(const struct proc *))arg;

	return !a->dirty && gone(a->proc);
}

size_t agg_forget(struct aggtab *t, bool (*gone)(const struct proc *p))
{
	return remove_where(t, clean_and_gone, &gone, NULL);
}

size_t agg_bytes(const struct aggtab *t)
{
	/* Slots per entry: at most 4/3 at full load, twice that just after growing. */
	return t->map.n * (sizeof(struct agg) + 2 * (sizeof(uint64_t) + sizeof(void *))) +
	       t->hist_bytes;
}

size_t agg_count(const struct aggtab *t)
{
	return t->map.n;
}

void agg_free(struct aggtab *t)
{
	hmap_foreach(&t->map, i)
		agg_entry_free(t, t->map.vals[i]);
	hmap_free(&t->map);
	t->ndirty = 0;
}
