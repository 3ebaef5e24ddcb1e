/* itree: random inserts and erases keep the AVL and max-end invariants (itree_check after
 * every change), stabbing queries return exactly the intervals a brute-force scan finds,
 * in (start, seq) order, and the visit stops where the callback says. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/attrib/itree.h"

#define N 3000

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct visit {
	const struct itree_node *got[N];
	size_t n, stop_after;
};

static int collect(struct itree_node *n, void *arg)
{
	struct visit *v = arg;

	v->got[v->n++] = n;
	return v->stop_after && v->n == v->stop_after;
}

static bool before(const struct itree_node *a, const struct itree_node *b)
{
	return a->start < b->start || (a->start == b->start && a->seq < b->seq);
}

static void check_stab(struct itree *t, struct itree_node *v, const bool *in, uint64_t p)
{
	static struct visit got;
	size_t want = 0;

	got.n = 0;
	got.stop_after = 0;
	assert_null(itree_stab(t, p, collect, &got));
	for (size_t i = 0; i < N; i++)
		want += in[i] && v[i].start <= p && p < v[i].end;
	assert_int_equal(got.n, want);
	for (size_t i = 0; i < got.n; i++) {
		assert_true(got.got[i]->start <= p && p < got.got[i]->end);
		assert_true(in[got.got[i] - v]);
		if (i)
			assert_true(before(got.got[i - 1], got.got[i]));
	}
	if (want >= 2) {
		got.n = 0;
		got.stop_after = 2;
		assert_ptr_equal(itree_stab(t, p, collect, &got), got.got[1]);
		assert_int_equal(got.n, 2);
	}
}

static void test_random(void **state)
{
	static struct itree_node v[N];
	static bool in[N];
	struct itree t = { 0 };

	(void)state;
	for (size_t i = 0; i < N; i++) {
		/* Many equal starts (reused addresses) and a few huge intervals. */
		v[i].start = (rnd() % 512) * 16;
		v[i].end = v[i].start + (rnd() % 50 == 0 ? 1 + rnd() % 8192 : 1 + rnd() % 64);
		v[i].seq = i;
	}
	for (int round = 0; round < 4 * N; round++) {
		size_t i = rnd() % N;
		if (in[i])
			itree_erase(&t, &v[i]);
		else
			itree_insert(&t, &v[i]);
		in[i] = !in[i];
		if (round % 97 == 0) {
			assert_int_equal(itree_check(&t), 0);
			check_stab(&t, v, in, rnd() % 9000);
		}
	}
	assert_int_equal(itree_check(&t), 0);
	size_t held = 0;
	for (size_t i = 0; i < N; i++)
		held += in[i];
	assert_int_equal(t.n, held);
	for (uint64_t p = 0; p < 9000; p += 7)
		check_stab(&t, v, in, p);

	/* walk: every node once, in order */
	static struct visit all;
	all.n = 0;
	all.stop_after = 0;
	itree_walk(&t, collect, &all);
	assert_int_equal(all.n, held);
	for (size_t i = 1; i < all.n; i++)
		assert_true(before(all.got[i - 1], all.got[i]));

	/* empty it in insertion order: heights stay logarithmic all the way */
	for (size_t i = 0; i < N; i++)
		if (in[i]) {
			itree_erase(&t, &v[i]);
			in[i] = false;
			if (t.root)
				assert_true(t.root->height <= 20);
		}
	assert_null(t.root);
	assert_int_equal(t.n, 0);
}

/* Sorted inserts (allocator addresses often grow): height stays ~log2(n). */
static void test_sorted(void **state)
{
	static struct itree_node v[1 << 16];
	struct itree t = { 0 };

	(void)state;
	for (size_t i = 0; i < 1 << 16; i++) {
		v[i] = (struct itree_node){ .start = i * 32, .end = i * 32 + 32, .seq = i };
		itree_insert(&t, &v[i]);
	}
	assert_int_equal(itree_check(&t), 0);
	assert_true(t.root->height <= 18);        /* AVL: < 1.45 log2(n + 2) */
	struct visit *got = calloc(1, sizeof(*got));
	assert_non_null(got);
	itree_stab(&t, 40000 * 32 + 5, collect, got);
	assert_int_equal(got->n, 1);
	assert_ptr_equal(got->got[0], &v[40000]);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_sorted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
