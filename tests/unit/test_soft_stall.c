/* soft_stall: the weight factor from a block's per-instruction sample shares. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/access/soft_stall.h"

#define BLOCK 0x1234567ULL

/* Feeds n rounds of per-position counts; returns the last factor. */
static double feed(struct soft_stall *st, uint64_t block, const unsigned *per, unsigned k,
		   unsigned rounds)
{
	double f = 0;

	for (unsigned r = 0; r < rounds; r++)
		for (unsigned i = 0; i < k; i++)
			for (unsigned j = 0; j < per[i]; j++)
				f = soft_stall_note(st, block, i, k);
	return f;
}

static void uniform_block_keeps_its_weight(void **state)
{
	struct soft_stall *st;
	unsigned per[6] = { 1, 1, 1, 1, 1, 1 };

	assert_int_equal(soft_stall_open(&st), 0);
	assert_true(feed(st, BLOCK, per, 6, 20) == 1.0);
	soft_stall_close(st);
}

/* A chase: 4 instructions, the load's consumer gets 17 of every 20 samples. */
static void stalled_block_is_scaled_down(void **state)
{
	struct soft_stall *st;
	unsigned per[4] = { 1, 17, 1, 1 };

	assert_int_equal(soft_stall_open(&st), 0);
	double f = feed(st, BLOCK, per, 4, 10);
	assert_true(f > 4.0 * 1 / 20 - 1e-9 && f < 4.0 * 1 / 20 + 1e-9);
	soft_stall_close(st);
}

static void too_few_samples_or_no_block_keep_the_weight(void **state)
{
	struct soft_stall *st;
	unsigned per[8] = { 9, 0, 0, 0, 0, 0, 0, 0 };

	assert_int_equal(soft_stall_open(&st), 0);
	/* 27 samples of an 8-instruction block: fewer than 4 per instruction. */
	assert_true(feed(st, BLOCK, per, 8, 3) == 1.0);
	assert_true(soft_stall_note(st, 0, 0, 8) == 1.0);
	assert_true(soft_stall_note(st, BLOCK, 3, 2) == 1.0);                 /* pos past the end */
	assert_true(soft_stall_note(st, BLOCK, 0, SOFT_STALL_INSNS + 1) == 1.0);
	assert_true(soft_stall_note(NULL, BLOCK, 0, 4) == 1.0);
	soft_stall_close(st);
}

static void factor_is_floored_and_aged(void **state)
{
	struct soft_stall *st;
	unsigned per[4] = { 0, 1, 0, 0 };

	assert_int_equal(soft_stall_open(&st), 0);
	assert_true(feed(st, BLOCK, per, 4, 200) == SOFT_STALL_MIN_FACTOR);
	/* Counts are halved past SOFT_STALL_AGE_AT: a block that turns uniform recovers. */
	unsigned uni[4] = { 1, 1, 1, 1 };
	double f = feed(st, BLOCK, uni, 4, SOFT_STALL_AGE_AT);
	assert_true(f > 0.9);
	soft_stall_close(st);
}

/* Another block in the same slot starts afresh: no factor from the old one's counts. */
static void colliding_block_starts_afresh(void **state)
{
	struct soft_stall *st;
	unsigned per[4] = { 1, 17, 1, 1 };

	assert_int_equal(soft_stall_open(&st), 0);
	assert_true(feed(st, BLOCK, per, 4, 10) < 0.5);
	assert_true(soft_stall_note(st, BLOCK + SOFT_STALL_BLOCKS, 1, 4) == 1.0);
	soft_stall_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(uniform_block_keeps_its_weight),
		cmocka_unit_test(stalled_block_is_scaled_down),
		cmocka_unit_test(too_few_samples_or_no_block_keep_the_weight),
		cmocka_unit_test(factor_is_floored_and_aged),
		cmocka_unit_test(colliding_block_starts_afresh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
