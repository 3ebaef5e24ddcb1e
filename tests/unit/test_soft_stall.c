/* soft_stall: the weight factor from a block's per-instruction sample shares. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/access/soft_stall.h"

#define BLOCK 0x1234567ULL

/* Feeds n rounds of per-position counts; returns the last factor. */
static double feed_mask(struct soft_stall *st, uint64_t block, const unsigned *per, unsigned k,
			unsigned rounds, uint64_t after_read)
{
	double f = 0;

	for (unsigned r = 0; r < rounds; r++)
		for (unsigned i = 0; i < k; i++)
			for (unsigned j = 0; j < per[i]; j++)
				f = soft_stall_note(st, block, i, k, after_read);
	return f;
}

static double feed(struct soft_stall *st, uint64_t block, const unsigned *per, unsigned k,
		   unsigned rounds)
{
	return feed_mask(st, block, per, k, rounds, 0);
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

/* db_bench's memtable lookup: mov (%r15),%rdi; movzbl (%rdi),%eax; test; jns. Both reads
 * miss, so samples pile up on the two instructions after them (the median of all four is
 * a pile-up); the two others are the one-cycle reference. */
static void two_dependent_misses_are_scaled_down(void **state)
{
	struct soft_stall *st;
	unsigned per[4] = { 1, 100, 110, 1 };
	uint64_t after_read = 1u << 1 | 1u << 2;

	assert_int_equal(soft_stall_open(&st), 0);
	double f = feed_mask(st, BLOCK, per, 4, 2, after_read);
	assert_true(f > 4.0 * 1 / 212 - 1e-9 && f < 4.0 * 1 / 212 + 1e-9);
	assert_true(feed(st, BLOCK + 1, per, 4, 2) > 0.9);   /* without the mask: not seen */
	soft_stall_close(st);
}

/* With every instruction after a read there is no reference: the median of all. */
static void all_after_reads_fall_back_to_all(void **state)
{
	struct soft_stall *st;
	unsigned per[4] = { 1, 17, 1, 1 };

	assert_int_equal(soft_stall_open(&st), 0);
	double f = feed_mask(st, BLOCK, per, 4, 10, 0xf);
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
	assert_true(soft_stall_note(st, 0, 0, 8, 0) == 1.0);
	assert_true(soft_stall_note(st, BLOCK, 3, 2, 0) == 1.0);                 /* pos past the end */
	assert_true(soft_stall_note(st, BLOCK, 0, SOFT_STALL_INSNS + 1, 0) == 1.0);
	assert_true(soft_stall_note(NULL, BLOCK, 0, 4, 0) == 1.0);
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
	assert_true(soft_stall_note(st, BLOCK + SOFT_STALL_BLOCKS, 1, 4, 0) == 1.0);
	soft_stall_close(st);
}

/* lua's string-table walk (internshrstr): a 3-instruction block, the compare after the
 * shrlen read gets 11 of 12 samples. No load-after-load inside the block (the next-pointer
 * load is in the next block), so the median rule never applies; the excess rule does,
 * with the prior keeping a block seen a few times near its weight. */
static void excess_after_read_scales_a_block_without_dependent_load(void **state)
{
	uint16_t pile[3] = { 0, 11, 1 }, few[3] = { 0, 2, 0 }, uni[3] = { 4, 4, 4 };
	uint64_t after_read = 1u << 1;

	/* 3/2 x (1 + 2 x 1) / (12 + 3 x 1) = 0.3 */
	assert_true(fabs(soft_stall_excess(pile, 3, after_read, NULL) - 0.3) < 1e-9);
	assert_true(soft_stall_excess(few, 3, after_read, NULL) > 0.55);   /* 3/2 x 2 / 5 = 0.6 */
	assert_true(fabs(soft_stall_excess(uni, 3, after_read, NULL) - 1.0) < 1e-9);
	assert_true(soft_stall_excess(pile, 3, 0, NULL) == 1.0);          /* no read: no rule */
	assert_true(soft_stall_excess(pile, 3, 0x7, NULL) == 1.0);        /* no reference */
}

/* The soft source's choice: the median rule once a dependent-load block has the samples,
 * the excess rule before that and in blocks without one; piles after no read keep the
 * weight (a retire group's first instruction). */
static void factor_picks_the_rule(void **state)
{
	struct soft_stall *st;
	double f = 0;

	assert_int_equal(soft_stall_open(&st), 0);
	for (unsigned r = 0; r < 40; r++) {
		f = soft_stall_factor(st, BLOCK, 1, 4, 1u << 1, 1u << 1, false, NULL);
		f = soft_stall_factor(st, BLOCK, 1, 4, 1u << 1, 1u << 1, false, NULL);
		f = soft_stall_factor(st, BLOCK, 0, 4, 1u << 1, 1u << 1, false, NULL);
	}
	/* 80 on the instruction after the read, 40 on one other: 4/3 x 43 / 124 */
	assert_true(fabs(f - 4.0 / 3 * 43 / 124) < 1e-9);
	for (unsigned r = 0; r < 40; r++)
		f = soft_stall_factor(st, BLOCK + 1, 0, 4, 1u << 1, 1u << 1, false, NULL);
	assert_true(f > 0.99);                                      /* a pile at no read */
	for (unsigned r = 0; r < 60; r++)
		for (unsigned i = 0; i < 4; i++)
			f = soft_stall_factor(st, BLOCK + 2, i, 4, 0, 0, true, NULL);
	assert_true(fabs(f - 1.0) < 1e-9);                          /* median rule, uniform */
	/* short_copies' read loop (add -8(%rdi,%rax),%rdx; add $8,%rax; cmp; jae): every
	 * sample after the load, which is skew, not a stall: no unstrided read, no factor */
	for (unsigned r = 0; r < 100; r++)
		f = soft_stall_factor(st, BLOCK + 3, 1, 4, 1u << 1, 0, false, NULL);
	assert_true(f == 1.0);
	assert_true(soft_stall_factor(NULL, BLOCK, 0, 4, 1, 1, false, NULL) == 1.0);
	soft_stall_close(st);
}

/* The factor's error: 1 / sqrt(the reference's samples); a block seen 100x as often is
 * 10x surer, and with no rule there is no factor to be unsure of. The soft source gets
 * each sample's share: summed in quadrature over the block, the block's error. */
static void factor_error_shrinks_with_the_reference(void **state)
{
	uint16_t few[3] = { 0, 11, 1 }, many[3] = { 0, 1100, 100 };
	double e1, e2;

	soft_stall_excess(few, 3, 1u << 1, &e1);     /* reference: 1 + 2 x prior = 3 */
	soft_stall_excess(many, 3, 1u << 1, &e2);    /* 100 + 2 */
	assert_true(fabs(e1 - 1 / sqrt(3.0)) < 1e-9);
	assert_true(fabs(e2 - 1 / sqrt(102.0)) < 1e-9);
	soft_stall_excess(few, 3, 0, &e1);
	assert_true(e1 == 0);

	struct soft_stall *st;
	double f = 0, e = -1;
	assert_int_equal(soft_stall_open(&st), 0);
	unsigned per[4] = { 1, 100, 110, 1 };      /* the median rule: reference 1 x 2 insns */
	for (unsigned r = 0; r < 2; r++)
		for (unsigned i = 0; i < 4; i++)
			for (unsigned j = 0; j < per[i]; j++)
				f = soft_stall_factor(st, BLOCK, i, 4, 1u << 1 | 1u << 2, 0, true, &e);
	assert_true(f < 0.05);
	/* median 2 over 2 instructions, the share of one of 424 samples */
	assert_true(fabs(e - sqrt(424.0) / sqrt(4.0)) < 1e-9);
	assert_true(soft_stall_factor(st, 0, 0, 4, 0, 0, false, &e) == 1.0 && e == 0);
	soft_stall_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(uniform_block_keeps_its_weight),
		cmocka_unit_test(stalled_block_is_scaled_down),
		cmocka_unit_test(two_dependent_misses_are_scaled_down),
		cmocka_unit_test(all_after_reads_fall_back_to_all),
		cmocka_unit_test(too_few_samples_or_no_block_keep_the_weight),
		cmocka_unit_test(factor_is_floored_and_aged),
		cmocka_unit_test(colliding_block_starts_afresh),
		cmocka_unit_test(excess_after_read_scales_a_block_without_dependent_load),
		cmocka_unit_test(factor_picks_the_rule),
		cmocka_unit_test(factor_error_shrinks_with_the_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
