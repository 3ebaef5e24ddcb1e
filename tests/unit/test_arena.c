/* Arena: alignment, the empty-arena sentinel, slab growth, big and over-aligned requests. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "base/arena.h"

static void empty_arena_takes_slow_path(void **state)
{
	struct arena a = { 0 };

	assert_int_equal(a.end_sentinel, 0);
	void *p = arena_alloc(&a, 0);   /* even a zero-size request needs a slab */
	assert_non_null(p);
	assert_true(a.end_sentinel != 0);
	assert_int_equal(arena_total(&a), ARENA_SLAB_BYTES);
	arena_free(&a);
	assert_int_equal(a.cur, 0);
	assert_int_equal(a.end_sentinel, 0);
}

static void sizes_round_to_min_align(void **state)
{
	struct arena a = { 0 };
	char *p = arena_alloc(&a, 1), *q = arena_alloc(&a, 13), *r = arena_alloc(&a, 8);

	assert_int_equal((uintptr_t)p % ARENA_MIN_ALIGN, 0);
	assert_ptr_equal(q, p + 8);
	assert_ptr_equal(r, q + 16);
	arena_free(&a);
}

static void fills_slab_exactly_then_grows(void **state)
{
	struct arena a = { 0 };
	char *first = arena_alloc(&a, 8);
	size_t left = a.end_sentinel - 1 - a.cur;
	char *last = arena_alloc(&a, left);   /* ends exactly at the slab end: still fits? */

	/* cur + left == end, and end < end_sentinel: the one compare accepts it. */
	assert_ptr_equal(last, first + 8);
	assert_int_equal(a.cur, a.end_sentinel - 1);
	char *next = arena_alloc(&a, 8);
	assert_non_null(next);
	assert_int_equal(arena_total(&a), ARENA_SLAB_BYTES + 2 * ARENA_SLAB_BYTES);
	memset(next, 0xab, 8);
	arena_free(&a);
}

static void big_request_gets_own_slab(void **state)
{
	struct arena a = { 0 };
	char *p = arena_alloc(&a, 16);
	uintptr_t cur = a.cur, end = a.end_sentinel;
	char *big = arena_alloc(&a, 10 * ARENA_SLAB_BYTES);

	assert_non_null(big);
	memset(big, 1, 10 * ARENA_SLAB_BYTES);
	/* The regular slab keeps bumping where it was. */
	assert_int_equal(a.cur, cur);
	assert_int_equal(a.end_sentinel, end);
	assert_ptr_equal(arena_alloc(&a, 8), p + 16);
	arena_free(&a);
}

static void over_aligned_and_checked(void **state)
{
	struct arena a = { 0 };

	arena_alloc(&a, 8);
	void *p = arena_alloc_aligned(&a, 100, 256);
	assert_int_equal((uintptr_t)p % 256, 0);
	assert_null(arena_alloc_checked(&a, ARENA_MAX_ALLOC + 1));
	assert_null(arena_alloc_aligned(&a, 8, 3));   /* not a power of two */
	assert_string_equal(arena_strdup(&a, "frame"), "frame");
	arena_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(empty_arena_takes_slow_path),
		cmocka_unit_test(sizes_round_to_min_align),
		cmocka_unit_test(fills_slab_exactly_then_grows),
		cmocka_unit_test(big_request_gets_own_slab),
		cmocka_unit_test(over_aligned_and_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
