/* Aggregation into MemInfoBlocks: per-key MemProf merging in deallocation order (with
 * AccessHistograms), dirty tracking across flushes, eviction of closed buckets, and stack
 * interning identity. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/attrib/aggregate.h"
#include "daemon/alloc/intern.h"

struct proc { int dummy; };   /* only its address is used as a key */

static struct istack *mkstack(struct interner *in, const char *bid, uint64_t off0, uint64_t off1)
{
	struct iframe f[2] = { { intern_str(in, bid), off0 }, { intern_str(in, bid), off1 } };
	return intern_stack(in, f, 2);
}

static void add(struct aggtab *t, struct istack *s, struct proc *p, int64_t bucket,
		uint64_t size, uint64_t a_ns, uint64_t d_ns, uint32_t acpu, uint32_t dcpu)
{
	struct mib m;

	mib_from_object(&m, size, a_ns, d_ns, acpu, dcpu, 0);
	assert_int_equal(agg_add(t, s, p, bucket, &m), 0);
}

static void merges_like_memprof(void **state)
{
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p;
	struct istack *s = mkstack(&in, "abcd", 0x10, 0x20);

	/* Three objects, freed in this order; the second overlaps the first's lifetime. */
	add(&t, s, &p, 0, 100, 1000, 5000, 0, 0);
	add(&t, s, &p, 0, 300, 4000, 9000, 0, 1);
	add(&t, s, &p, 0, 200, 9500, 9600, 1, 1);
	struct agg *a = agg_find(&t, s, &p, 0);
	assert_non_null(a);
	assert_int_equal(a->mib.alloc_count, 3);
	assert_int_equal(a->mib.total_size, 600);
	assert_int_equal(a->mib.min_size, 100);
	assert_int_equal(a->mib.max_size, 300);
	assert_int_equal(a->mib.total_lifetime_ns, 4000 + 5000 + 100);
	assert_int_equal(a->mib.min_lifetime_ns, 100);
	assert_int_equal(a->mib.max_lifetime_ns, 5000);
	assert_int_equal(a->mib.num_lifetime_overlaps, 1);    /* 4000 < 5000; 9500 > 9000 */
	/* MemInfoBlock::Merge never updates NumMigratedCpu: it stays the first object's flag. */
	assert_int_equal(a->mib.num_migrated_cpu, 0);
	assert_int_equal(a->mib.num_same_alloc_cpu, 1);       /* 0==0, then 0 != 1 */
	assert_int_equal(a->mib.num_same_dealloc_cpu, 1);     /* 0 != 1, then 1 == 1 */
	assert_int_equal(a->mib.alloc_cpu, 1);
	assert_int_equal(a->mib.dealloc_ts_ns, 9600);
	agg_free(&t);
	interner_free(&in);
}

static void histograms_merge_and_are_counted(void **state)
{
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p;
	struct istack *s = mkstack(&in, "abcd", 0x10, 0x20);
	const uint64_t h1[] = { 9, 1 }, h2[] = { 1, 0, 0, 4 };
	struct mib m;
	size_t plain;

	mib_from_object(&m, 128, 10, 20, 0, 0, 10);
	assert_int_equal(agg_add_hist(&t, s, &p, 0, &m, h1, 2), 0);
	plain = agg_bytes(&t) - 2 * sizeof(uint64_t);
	mib_from_object(&m, 256, 15, 30, 0, 0, 5);
	assert_int_equal(agg_add_hist(&t, s, &p, 0, &m, h2, 4), 0);
	mib_from_object(&m, 64, 40, 50, 0, 0, 0);
	assert_int_equal(agg_add(&t, s, &p, 0, &m), 0);       /* an object without one */

	struct agg *a = agg_find(&t, s, &p, 0);

	assert_int_equal(a->mib.alloc_count, 3);
	assert_int_equal(a->hist.len, 4);                     /* the longer one kept */
	assert_int_equal(a->hist.v[0], 10);
	assert_int_equal(a->hist.v[1], 1);
	assert_int_equal(a->hist.v[2], 0);
	assert_int_equal(a->hist.v[3], 4);
	/* The memory bound sees the histogram's bytes. */
	assert_int_equal(agg_bytes(&t), plain + 4 * sizeof(uint64_t));
	/* Another bucket's entry has its own; evicting frees it and its bytes. */
	assert_int_equal(agg_add_hist(&t, s, &p, 60, &m, h1, 2), 0);
	assert_int_equal(agg_bytes(&t), 2 * plain + 6 * sizeof(uint64_t));
	agg_mark_clean(&t);
	agg_evict(&t, 60);
	assert_int_equal(agg_count(&t), 1);
	assert_int_equal(agg_bytes(&t), plain + 2 * sizeof(uint64_t));
	assert_int_equal(agg_find(&t, s, &p, 60)->hist.v[0], 9);
	agg_free(&t);
	assert_int_equal(t.hist_bytes, 0);
	interner_free(&in);
}

static void keys_are_context_process_bucket(void **state)
{
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p1, p2;
	struct istack *s1 = mkstack(&in, "abcd", 0x10, 0x20);
	struct istack *s2 = mkstack(&in, "abcd", 0x10, 0x21);

	assert_ptr_equal(s1, mkstack(&in, "abcd", 0x10, 0x20));   /* interned */
	assert_ptr_not_equal(s1, s2);
	add(&t, s1, &p1, 0, 8, 0, 1, 0, 0);
	add(&t, s1, &p2, 0, 8, 0, 1, 0, 0);
	add(&t, s2, &p1, 0, 8, 0, 1, 0, 0);
	add(&t, s1, &p1, 60, 8, 0, 1, 0, 0);
	add(&t, s1, &p1, 0, 8, 0, 1, 0, 0);
	assert_int_equal(agg_count(&t), 4);
	assert_int_equal(agg_find(&t, s1, &p1, 0)->mib.alloc_count, 2);
	assert_int_equal(agg_find(&t, s1, &p2, 0)->mib.alloc_count, 1);
	assert_null(agg_find(&t, s2, &p2, 0));
	agg_free(&t);
	interner_free(&in);
}

static int count_cb(struct agg *a, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static int fail_cb(struct agg *a, void *arg)
{
	return -ENOSPC;
}

static void dirty_until_marked_clean_and_evicts_closed(void **state)
{
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p;
	struct istack *s = mkstack(&in, "ef", 1, 2);
	int n = 0;

	add(&t, s, &p, 0, 8, 0, 1, 0, 0);
	add(&t, s, &p, 60, 8, 0, 1, 0, 0);
	/* A failed flush leaves everything dirty, and dirty entries are never evicted. */
	assert_int_equal(agg_write_dirty(&t, fail_cb, NULL), -ENOSPC);
	agg_evict(&t, 60);
	assert_int_equal(agg_count(&t), 2);
	assert_int_equal(agg_write_dirty(&t, count_cb, &n), 0);
	assert_int_equal(n, 2);
	agg_mark_clean(&t);
	n = 0;
	assert_int_equal(agg_write_dirty(&t, count_cb, &n), 0);
	assert_int_equal(n, 0);
	agg_evict(&t, 60);                  /* bucket 0 closed, bucket 60 still current */
	assert_int_equal(agg_count(&t), 1);
	assert_null(agg_find(&t, s, &p, 0));
	assert_non_null(agg_find(&t, s, &p, 60));
	add(&t, s, &p, 60, 8, 0, 1, 0, 0);  /* dirty again after a new object */
	n = 0;
	agg_write_dirty(&t, count_cb, &n);
	assert_int_equal(n, 1);
	assert_int_equal(agg_find(&t, s, &p, 60)->mib.alloc_count, 2);
	agg_free(&t);
	interner_free(&in);
}

/* A flush past its time leaves entries out (AGG_SKIP): they stay dirty, the next flush
 * writes them, and a dirty entry is never evicted. */
static int skip_first_cb(struct agg *a, void *arg)
{
	int *n = arg;

	(void)a;
	return (*n)++ == 0 ? AGG_SKIP : 0;
}

static void skipped_entries_stay_dirty(void **state)
{
	(void)state;
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p;
	struct istack *s = mkstack(&in, "ef", 1, 2);
	int n = 0;

	add(&t, s, &p, 0, 8, 0, 1, 0, 0);
	add(&t, s, &p, 60, 8, 0, 1, 0, 0);
	assert_int_equal(agg_write_dirty(&t, skip_first_cb, &n), 0);
	assert_int_equal(n, 2);
	agg_mark_clean(&t);
	assert_int_equal(t.ndirty, 1);
	agg_evict(&t, 120);                 /* both buckets closed: only the clean one goes */
	assert_int_equal(agg_count(&t), 1);
	n = 0;
	assert_int_equal(agg_write_dirty(&t, count_cb, &n), 0);
	assert_int_equal(n, 1);
	agg_mark_clean(&t);
	assert_int_equal(t.ndirty, 0);
	agg_free(&t);
	interner_free(&in);
}

static void late_object_of_evicted_bucket_joins_oldest_held(void **state)
{
	struct interner in = { 0 };
	struct aggtab t = { 0 };
	struct proc p;
	struct istack *s = mkstack(&in, "ab", 1, 2);
	int n = 0;

	add(&t, s, &p, 0, 8, 0, 1, 0, 0);
	add(&t, s, &p, 60, 8, 0, 1, 0, 0);
	agg_mark_clean(&t);
	agg_evict(&t, 60);
	/* An object of bucket 0 arriving now must not re-create (and, once written,
	 * overwrite) bucket 0's stored value: it joins bucket 60. */
	add(&t, s, &p, 0, 16, 0, 1, 0, 0);
	assert_null(agg_find(&t, s, &p, 0));
	assert_int_equal(agg_find(&t, s, &p, 60)->mib.alloc_count, 2);
	assert_int_equal(agg_find(&t, s, &p, 60)->mib.total_size, 24);
	agg_write_dirty(&t, count_cb, &n);
	assert_int_equal(n, 1);
	agg_evict(&t, 0);                 /* the watermark never moves back */
	add(&t, s, &p, 0, 8, 0, 1, 0, 0);
	assert_null(agg_find(&t, s, &p, 0));
	agg_free(&t);
	interner_free(&in);
}

static void hmap_survives_many_inserts_and_removes(void **state)
{
	struct hmap h = { 0 };
	static int vals[600];

	for (int i = 0; i < 600; i++)
		assert_int_equal(hmap_insert(&h, (uint64_t)i % 97, &vals[i]), 0);  /* many equal hashes */
	for (int i = 0; i < 600; i += 2)
		hmap_remove(&h, (uint64_t)i % 97, &vals[i]);
	assert_int_equal(h.n, 300);
	size_t seen = 0;
	hmap_foreach(&h, i) {
		int idx = (int *)h.vals[i] - vals;
		assert_int_equal(idx % 2, 1);
		assert_int_equal(h.hashes[i], (uint64_t)idx % 97 ? (uint64_t)idx % 97 : 1);
		seen++;
	}
	assert_int_equal(seen, 300);
	hmap_free(&h);
}

static void bucket_of_realtime(void **state)
{
	assert_int_equal(agg_bucket_of(119999999999LL), 60);
	assert_int_equal(agg_bucket_of(120000000000LL), 120);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(merges_like_memprof),
		cmocka_unit_test(histograms_merge_and_are_counted),
		cmocka_unit_test(keys_are_context_process_bucket),
		cmocka_unit_test(dirty_until_marked_clean_and_evicts_closed),
		cmocka_unit_test(late_object_of_evicted_bucket_joins_oldest_held),
		cmocka_unit_test(skipped_entries_stay_dirty),
		cmocka_unit_test(hmap_survives_many_inserts_and_removes),
		cmocka_unit_test(bucket_of_realtime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
