/* mib_merge() against a transliteration of LLVM's MemInfoBlock::Merge (MemProfData.inc),
 * on hand-checked sequences and on random ones; mib_combine() for disjoint aggregates:
 * counts add, min/max, last-object fields from the later one, order independence;
 * mib_hist_merge() against Merge's v4 AccessHistogram rule, and its blob form. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "store/mib.h"

/* LLVM's MemInfoBlock, reduced to the fields we keep, and its constructor and Merge. */
struct ref_mib {
	uint64_t AllocCount, TotalAccessCount, MinAccessCount, MaxAccessCount;
	uint64_t TotalSize, MinSize, MaxSize;
	uint64_t AllocTimestamp, DeallocTimestamp;
	uint64_t TotalLifetime, MinLifetime, MaxLifetime;
	uint32_t AllocCpuId, DeallocCpuId;
	uint64_t NumMigratedCpu, NumLifetimeOverlaps, NumSameAllocCpu, NumSameDeallocCpu;
};

static void ref_init(struct ref_mib *m, uint64_t size, uint64_t access, uint64_t ats,
		     uint64_t dts, uint32_t acpu, uint32_t dcpu)
{
	*m = (struct ref_mib){0};
	m->AllocCount = 1;
	m->TotalAccessCount = m->MinAccessCount = m->MaxAccessCount = access;
	m->TotalSize = m->MinSize = m->MaxSize = size;
	m->AllocTimestamp = ats;
	m->DeallocTimestamp = dts;
	m->TotalLifetime = m->MinLifetime = m->MaxLifetime = dts - ats;
	m->AllocCpuId = acpu;
	m->DeallocCpuId = dcpu;
	m->NumMigratedCpu = acpu != dcpu;
}

static void ref_merge(struct ref_mib *t, const struct ref_mib *n)
{
	t->AllocCount += n->AllocCount;
	t->TotalAccessCount += n->TotalAccessCount;
	t->MinAccessCount = n->MinAccessCount < t->MinAccessCount ? n->MinAccessCount : t->MinAccessCount;
	t->MaxAccessCount = n->MaxAccessCount > t->MaxAccessCount ? n->MaxAccessCount : t->MaxAccessCount;
	t->TotalSize += n->TotalSize;
	t->MinSize = n->MinSize < t->MinSize ? n->MinSize : t->MinSize;
	t->MaxSize = n->MaxSize > t->MaxSize ? n->MaxSize : t->MaxSize;
	t->TotalLifetime += n->TotalLifetime;
	t->MinLifetime = n->MinLifetime < t->MinLifetime ? n->MinLifetime : t->MinLifetime;
	t->MaxLifetime = n->MaxLifetime > t->MaxLifetime ? n->MaxLifetime : t->MaxLifetime;
	t->NumLifetimeOverlaps += n->AllocTimestamp < t->DeallocTimestamp;
	t->AllocTimestamp = n->AllocTimestamp;
	t->DeallocTimestamp = n->DeallocTimestamp;
	t->NumSameAllocCpu += t->AllocCpuId == n->AllocCpuId;
	t->NumSameDeallocCpu += t->DeallocCpuId == n->DeallocCpuId;
	t->AllocCpuId = n->AllocCpuId;
	t->DeallocCpuId = n->DeallocCpuId;
}

static void assert_same(const struct mib *m, const struct ref_mib *r)
{
	assert_int_equal(m->alloc_count, r->AllocCount);
	assert_int_equal(m->total_access_count, r->TotalAccessCount);
	assert_int_equal(m->min_access_count, r->MinAccessCount);
	assert_int_equal(m->max_access_count, r->MaxAccessCount);
	assert_int_equal(m->total_size, r->TotalSize);
	assert_int_equal(m->min_size, r->MinSize);
	assert_int_equal(m->max_size, r->MaxSize);
	assert_int_equal(m->alloc_ts_ns, r->AllocTimestamp);
	assert_int_equal(m->dealloc_ts_ns, r->DeallocTimestamp);
	assert_int_equal(m->total_lifetime_ns, r->TotalLifetime);
	assert_int_equal(m->min_lifetime_ns, r->MinLifetime);
	assert_int_equal(m->max_lifetime_ns, r->MaxLifetime);
	assert_int_equal(m->alloc_cpu, r->AllocCpuId);
	assert_int_equal(m->dealloc_cpu, r->DeallocCpuId);
	assert_int_equal(m->num_migrated_cpu, r->NumMigratedCpu);
	assert_int_equal(m->num_lifetime_overlaps, r->NumLifetimeOverlaps);
	assert_int_equal(m->num_same_alloc_cpu, r->NumSameAllocCpu);
	assert_int_equal(m->num_same_dealloc_cpu, r->NumSameDeallocCpu);
}

static void test_from_object(void **state)
{
	struct mib m;

	mib_from_object(&m, 64, 1000, 4000, 2, 3, 17);
	assert_int_equal(m.alloc_count, 1);
	assert_int_equal(m.total_size, 64);
	assert_int_equal(m.min_size, 64);
	assert_int_equal(m.max_size, 64);
	assert_int_equal(m.total_lifetime_ns, 3000);
	assert_int_equal(m.min_lifetime_ns, 3000);
	assert_int_equal(m.max_lifetime_ns, 3000);
	assert_int_equal(m.num_migrated_cpu, 1);
	assert_int_equal(m.total_access_count, 17);
	assert_int_equal(m.min_access_count, 17);
	assert_int_equal(m.max_access_count, 17);
	assert_int_equal(m.access_samples, 0);
	assert_int_equal(m.num_lifetime_overlaps + m.num_same_alloc_cpu + m.num_same_dealloc_cpu, 0);
	/* A clock that went backwards gives lifetime 0, never a huge unsigned one. */
	mib_from_object(&m, 8, 5000, 4000, 0, 0, 0);
	assert_int_equal(m.total_lifetime_ns, 0);
	assert_int_equal(m.num_migrated_cpu, 0);
}

/* Exact mode's probes' time comes out of the lifetime and its density; the timestamps
 * (overlaps, buckets) stay as seen; more probe time than life leaves 0, never wraps. */
static void test_net_of_probes(void **state)
{
	struct mib m;

	(void)state;
	mib_from_object(&m, 100, 1000000, 5001000000ull, 0, 0, 500);
	assert_int_equal(m.total_lifetime_ns, 5000000000ull);
	double before = m.min_lifetime_access_density;
	mib_net_of_probes(&m, 4000000000ull);
	assert_int_equal(m.total_lifetime_ns, 1000000000ull);
	assert_int_equal(m.min_lifetime_ns, 1000000000ull);
	assert_int_equal(m.max_lifetime_ns, 1000000000ull);
	assert_int_equal(m.alloc_ts_ns, 1000000);
	assert_int_equal(m.dealloc_ts_ns, 5001000000ull);
	assert_true(fabs(m.min_lifetime_access_density - 5 * before) < 1e-9 * before);
	assert_true(m.max_lifetime_access_density == m.min_lifetime_access_density);
	mib_net_of_probes(&m, 0);
	assert_int_equal(m.total_lifetime_ns, 1000000000ull);
	mib_net_of_probes(&m, 3000000000ull);
	assert_int_equal(m.total_lifetime_ns, 0);
	assert_true(m.min_lifetime_access_density ==
		    mib_lifetime_density(500, 100, 0));
}

static void test_merge_by_hand(void **state)
{
	struct mib acc = {0}, o;

	/* A: [100, 200) cpu 0->0; B: [150, 300) cpu 0->1, overlaps A; C: [400, 500) 1->1. */
	mib_from_object(&o, 10, 100, 200, 0, 0, 5);
	mib_merge(&acc, &o);
	assert_memory_equal(&acc, &o, sizeof(o));     /* empty + obj = obj */
	mib_from_object(&o, 30, 150, 300, 0, 1, 1);
	mib_merge(&acc, &o);
	mib_from_object(&o, 20, 400, 500, 1, 1, 9);
	mib_merge(&acc, &o);

	assert_int_equal(acc.alloc_count, 3);
	assert_int_equal(acc.total_size, 60);
	assert_int_equal(acc.min_size, 10);
	assert_int_equal(acc.max_size, 30);
	assert_int_equal(acc.total_lifetime_ns, 350);
	assert_int_equal(acc.min_lifetime_ns, 100);
	assert_int_equal(acc.max_lifetime_ns, 150);
	assert_int_equal(acc.num_lifetime_overlaps, 1);   /* B only: 150 < 200, 400 >= 300 */
	assert_int_equal(acc.num_same_alloc_cpu, 1);      /* B (0 == 0); C is 1 vs 0 */
	assert_int_equal(acc.num_same_dealloc_cpu, 1);    /* C (1 == 1); B is 1 vs 0 */
	assert_int_equal(acc.num_migrated_cpu, 0);        /* Merge keeps the first's flag */
	assert_int_equal(acc.alloc_ts_ns, 400);
	assert_int_equal(acc.dealloc_ts_ns, 500);
	assert_int_equal(acc.alloc_cpu, 1);
	assert_int_equal(acc.dealloc_cpu, 1);
	assert_int_equal(acc.total_access_count, 15);
	assert_int_equal(acc.min_access_count, 1);
	assert_int_equal(acc.max_access_count, 9);
}

static void test_merge_overlap_boundary(void **state)
{
	struct mib acc = {0}, o;

	/* Allocated exactly when the previous one died: not an overlap (strict <). */
	mib_from_object(&o, 1, 0, 100, 0, 0, 0);
	mib_merge(&acc, &o);
	mib_from_object(&o, 1, 100, 200, 0, 0, 0);
	mib_merge(&acc, &o);
	assert_int_equal(acc.num_lifetime_overlaps, 0);
	mib_from_object(&o, 1, 199, 300, 0, 0, 0);
	mib_merge(&acc, &o);
	assert_int_equal(acc.num_lifetime_overlaps, 1);
	/* First object migrated: the flag stays 1 whatever follows. */
	struct mib m2 = {0};

	mib_from_object(&o, 1, 0, 10, 0, 1, 0);
	mib_merge(&m2, &o);
	mib_from_object(&o, 1, 20, 30, 1, 2, 0);
	mib_merge(&m2, &o);
	mib_from_object(&o, 1, 40, 50, 2, 2, 0);
	mib_merge(&m2, &o);
	assert_int_equal(m2.num_migrated_cpu, 1);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_merge_matches_llvm_random(void **state)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	for (int round = 0; round < 200; round++) {
		struct mib acc = {0};
		struct ref_mib ref;
		uint64_t dts = 1000;
		int n = 1 + (int)(rnd(&seed) % 50);

		for (int i = 0; i < n; i++) {
			/* Deallocation order; allocations may precede the previous death. */
			dts += rnd(&seed) % 100;
			uint64_t life = rnd(&seed) % 500, ats = dts > life ? dts - life : 0;
			uint64_t size = 1 + rnd(&seed) % 4096, acc_n = rnd(&seed) % 10;
			uint32_t acpu = (uint32_t)(rnd(&seed) % 3), dcpu = (uint32_t)(rnd(&seed) % 3);
			struct mib o;
			struct ref_mib ro;

			mib_from_object(&o, size, ats, dts, acpu, dcpu, acc_n);
			ref_init(&ro, size, acc_n, ats, dts, acpu, dcpu);
			mib_merge(&acc, &o);
			if (i == 0)
				ref = ro;
			else
				ref_merge(&ref, &ro);
		}
		assert_same(&acc, &ref);
	}
}

/* MemInfoBlock::Merge's histogram part (LLVM 19, MemProfData.inc v4): keep the longer
 * histogram (the current one on a tie), add the shorter one's counts to it. */
struct ref_hist {
	uint64_t *h;
	uint32_t size;
};

static void ref_hist_merge(struct ref_hist *cur, struct ref_hist nw)
{
	struct ref_hist shorter;

	if (nw.size > cur->size) {
		shorter = *cur;
		*cur = nw;
	} else {
		shorter = nw;
	}
	for (uint32_t i = 0; i < shorter.size; i++)
		cur->h[i] += shorter.h[i];
}

static void test_hist_merge_matches_llvm(void **state)
{
	uint64_t seed = 0x51ed2701ull;
	static uint64_t pool[64][40];

	for (int round = 0; round < 300; round++) {
		int n = 1 + (int)(rnd(&seed) % 12);
		struct mib_hist fwd = {0}, rev = {0};
		struct ref_hist ref = {0};
		uint32_t len[64];

		for (int i = 0; i < n; i++) {
			len[i] = (uint32_t)(rnd(&seed) % 40);   /* 0: an object without one */
			for (uint32_t k = 0; k < len[i]; k++)
				pool[i][k] = rnd(&seed) % 1000;
		}
		for (int i = 0; i < n; i++)
			assert_int_equal(mib_hist_merge(&fwd, pool[i], len[i]), 0);
		for (int i = n - 1; i >= 0; i--)
			assert_int_equal(mib_hist_merge(&rev, pool[i], len[i]), 0);
		/* The reference adds into the kept array in place: give it copies. */
		static uint64_t copies[64][40];
		for (int i = 0; i < n; i++) {
			memcpy(copies[i], pool[i], sizeof(pool[i]));
			if (i == 0)
				ref = (struct ref_hist){ copies[0], len[0] };
			else
				ref_hist_merge(&ref, (struct ref_hist){ copies[i], len[i] });
		}
		assert_int_equal(fwd.len, ref.size);
		assert_int_equal(rev.len, ref.size);
		for (uint32_t k = 0; k < ref.size; k++) {
			assert_int_equal(fwd.v[k], ref.h[k]);
			assert_int_equal(rev.v[k], ref.h[k]);   /* order-free: combine == merge */
		}
		mib_hist_free(&fwd);
		mib_hist_free(&rev);
	}
}

static void test_hist_by_hand_and_blob(void **state)
{
	const uint64_t a[] = { 5, 0, 1 }, b[] = { 1, 2, 3, 4, 5 };
	struct mib_hist h = {0}, back = {0};
	unsigned char blob[5 * 8], odd[12] = {0};

	assert_int_equal(mib_hist_merge(&h, NULL, 0), 0);     /* none: nothing */
	assert_int_equal(h.len, 0);
	assert_int_equal(mib_hist_merge(&h, a, 3), 0);
	assert_int_equal(mib_hist_merge(&h, b, 5), 0);        /* the longer one is kept */
	assert_int_equal(h.len, 5);
	assert_int_equal(h.v[0], 6);
	assert_int_equal(h.v[1], 2);
	assert_int_equal(h.v[2], 4);
	assert_int_equal(h.v[3], 4);
	assert_int_equal(h.v[4], 5);
	assert_int_equal(mib_hist_merge(&h, a, 3), 0);        /* shorter added in place */
	assert_int_equal(h.len, 5);
	assert_int_equal(h.v[0], 11);
	assert_int_equal(h.v[4], 5);

	mib_hist_to_blob(&h, blob);
	assert_int_equal(blob[0], 11);                        /* little-endian uint64 */
	assert_int_equal(blob[1], 0);
	assert_int_equal(blob[8], 2);
	assert_int_equal(mib_hist_merge_blob(&back, blob, sizeof(blob)), 0);
	assert_int_equal(back.len, 5);
	assert_memory_equal(back.v, h.v, 5 * sizeof(uint64_t));
	/* A blob that is not whole uint64s, or too long, changes nothing. */
	assert_int_equal(mib_hist_merge_blob(&back, odd, sizeof(odd)), -EINVAL);
	assert_int_equal(mib_hist_merge(&back, b, MIB_HIST_MAX_LEN + 1), -E2BIG);
	assert_int_equal(back.len, 5);
	assert_int_equal(back.v[0], 11);
	/* Sums saturate instead of wrapping. */
	const uint64_t big[] = { UINT64_MAX - 1 };
	assert_int_equal(mib_hist_merge(&back, big, 1), 0);
	assert_true(back.v[0] == UINT64_MAX);
	mib_hist_free(&h);
	mib_hist_free(&back);
	assert_null(back.v);
	assert_int_equal(back.len, 0);
}

static void test_combine(void **state)
{
	struct mib a = {0}, b = {0}, o, ab, ba, empty = {0};

	mib_from_object(&o, 10, 100, 200, 0, 1, 4);
	mib_merge(&a, &o);
	mib_from_object(&o, 50, 150, 250, 0, 0, 0);
	mib_merge(&a, &o);                          /* overlap 1, same alloc cpu 1 */
	mib_from_object(&o, 5, 50, 900, 3, 2, 7);
	mib_merge(&b, &o);
	mib_from_object(&o, 7, 60, 1000, 3, 3, 1);
	mib_merge(&b, &o);                          /* overlap 1, same alloc cpu 1 */
	b.access_samples = 3;

	ab = a;
	mib_combine(&ab, &b);
	ba = b;
	mib_combine(&ba, &a);
	assert_memory_equal(&ab, &ba, sizeof(ab));  /* order does not matter */

	assert_int_equal(ab.alloc_count, 4);
	assert_int_equal(ab.total_size, 72);
	assert_int_equal(ab.min_size, 5);
	assert_int_equal(ab.max_size, 50);
	assert_int_equal(ab.total_lifetime_ns, 100 + 100 + 850 + 940);
	assert_int_equal(ab.min_lifetime_ns, 100);
	assert_int_equal(ab.max_lifetime_ns, 940);
	assert_int_equal(ab.num_lifetime_overlaps, 2);
	assert_int_equal(ab.num_same_alloc_cpu, 2);
	assert_int_equal(ab.num_same_dealloc_cpu, 0);
	assert_int_equal(ab.num_migrated_cpu, 2);   /* a's first (1) + b's first (1) */
	assert_int_equal(ab.access_samples, 3);
	assert_int_equal(ab.total_access_count, 12);
	assert_int_equal(ab.min_access_count, 0);
	assert_int_equal(ab.max_access_count, 7);
	/* Last object: b's died last (1000). */
	assert_int_equal(ab.alloc_ts_ns, 60);
	assert_int_equal(ab.dealloc_ts_ns, 1000);
	assert_int_equal(ab.alloc_cpu, 3);
	assert_int_equal(ab.dealloc_cpu, 3);

	/* Empty is the identity on both sides. */
	struct mib x = a;

	mib_combine(&x, &empty);
	assert_memory_equal(&x, &a, sizeof(a));
	x = empty;
	mib_combine(&x, &a);
	assert_memory_equal(&x, &a, sizeof(a));
}

static void test_combine_ties(void **state)
{
	struct mib a, b, ab, ba;

	/* Same death time: alloc_ts, then the CPUs decide, whichever order. */
	mib_from_object(&a, 1, 10, 100, 1, 1, 0);
	mib_from_object(&b, 1, 20, 100, 0, 0, 0);
	ab = a;
	mib_combine(&ab, &b);
	ba = b;
	mib_combine(&ba, &a);
	assert_memory_equal(&ab, &ba, sizeof(ab));
	assert_int_equal(ab.alloc_ts_ns, 20);
	mib_from_object(&a, 1, 10, 100, 1, 0, 0);
	mib_from_object(&b, 1, 10, 100, 0, 5, 0);
	ab = a;
	mib_combine(&ab, &b);
	ba = b;
	mib_combine(&ba, &a);
	assert_memory_equal(&ab, &ba, sizeof(ab));
	assert_int_equal(ab.alloc_cpu, 1);
	assert_int_equal(ab.dealloc_cpu, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_object),
		cmocka_unit_test(test_net_of_probes),
		cmocka_unit_test(test_merge_by_hand),
		cmocka_unit_test(test_merge_overlap_boundary),
		cmocka_unit_test(test_merge_matches_llvm_random),
		cmocka_unit_test(test_combine),
		cmocka_unit_test(test_combine_ties),
		cmocka_unit_test(test_hist_merge_matches_llvm),
		cmocka_unit_test(test_hist_by_hand_and_blob),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
