/* daemon/service/governor.c: lowers proportionally when over budget, never below the floor,
 * raises only after GOV_RAISE_AFTER calm ticks (hysteresis), holds in between, leaves
 * idle sources alone, converges under a simulated cost model, and says what it did. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/service/governor.h"

#define SEC 1000000000ULL

static void init(struct governor *g)
{
	struct governor_cfg cfg = { .budget = 0.01, .min_scale = 1.0 / 64 };

	governor_init(g, &cfg);
	assert_int_equal(governor_add_source(g, "alloc"), 0);
	assert_int_equal(governor_add_source(g, "access"), 1);
}

static void test_lower_proportional(void **state)
{
	struct governor g;
	uint64_t ev[2] = { 1000, 1000 };

	init(&g);
	/* 2% used, 1% budget: scale to 0.8 * 1 / 2 = 0.4. */
	assert_int_equal(governor_tick(&g, 10 * SEC, 200000000, ev), GOV_LOWER);
	assert_true(governor_scale(&g, 0) > 0.399 && governor_scale(&g, 0) < 0.401);
	assert_true(governor_scale(&g, 1) > 0.399 && governor_scale(&g, 1) < 0.401);
	/* A huge overshoot is cut at most 4x per tick. */
	init(&g);
	assert_int_equal(governor_tick(&g, 10 * SEC, 10 * SEC, ev), GOV_LOWER);
	assert_true(governor_scale(&g, 0) == 0.25);
	assert_non_null(strstr(g.last, "over budget, lowering"));
	assert_non_null(strstr(g.last, "alloc scale 1 -> 0.25"));
}

static void test_floor(void **state)
{
	struct governor g;
	uint64_t ev[2] = { 1000, 1000 };

	init(&g);
	for (int i = 0; i < 10; i++)
		governor_tick(&g, SEC, SEC, ev);    /* 100% of a CPU */
	assert_true(governor_scale(&g, 0) == 1.0 / 64);
	assert_int_equal(governor_tick(&g, SEC, SEC, ev), GOV_AT_FLOOR);
	assert_non_null(strstr(g.last, "at the floor"));
}

static void test_idle_source_untouched(void **state)
{
	struct governor g;
	uint64_t ev[2] = { 5000, 0 };

	init(&g);
	assert_int_equal(governor_tick(&g, SEC, 20000000, ev), GOV_LOWER);
	assert_true(governor_scale(&g, 0) < 1.0);
	assert_true(governor_scale(&g, 1) == 1.0);
	/* Over budget with no events at all: a fixed cost, nothing to lower. */
	uint64_t none[2] = { 0, 0 };
	init(&g);
	assert_int_equal(governor_tick(&g, SEC, 20000000, none), GOV_AT_FLOOR);
	assert_non_null(strstr(g.last, "no source had events"));
	/* Nothing registered (exact allocation tracking has no rate): said so. */
	struct governor_cfg cfg = { .budget = 0.01, .min_scale = 1.0 / 64 };
	governor_init(&g, &cfg);
	assert_int_equal(governor_tick(&g, SEC, 20000000, NULL), GOV_AT_FLOOR);
	assert_non_null(strstr(g.last, "no source has a rate to lower"));
	assert_string_equal(governor_action_name(GOV_AT_FLOOR), "at_floor");
	assert_string_equal(governor_action_name(GOV_LOWER), "lower");
}

static void test_hysteresis(void **state)
{
	struct governor g;
	uint64_t ev[2] = { 100, 100 };

	init(&g);
	governor_tick(&g, SEC, 40000000, ev);   /* 4%: -> 0.25 */
	double s = governor_scale(&g, 0);
	assert_true(s == 0.25);
	/* Between low water and budget: hold, and it resets the calm count. */
	assert_int_equal(governor_tick(&g, SEC, 7000000, ev), GOV_HOLD);
	assert_int_equal(governor_tick(&g, SEC, 1000000, ev), GOV_HOLD);   /* calm 1 */
	assert_int_equal(governor_tick(&g, SEC, 1000000, ev), GOV_HOLD);   /* calm 2 */
	assert_int_equal(governor_tick(&g, SEC, 7000000, ev), GOV_HOLD);   /* reset */
	assert_int_equal(governor_tick(&g, SEC, 1000000, ev), GOV_HOLD);
	assert_int_equal(governor_tick(&g, SEC, 1000000, ev), GOV_HOLD);
	assert_true(governor_scale(&g, 0) == s);
	assert_int_equal(governor_tick(&g, SEC, 1000000, ev), GOV_RAISE);  /* third calm */
	assert_true(governor_scale(&g, 0) == 0.5);                         /* at most 2x */
	/* Never above 1. */
	for (int i = 0; i < 30; i++)
		governor_tick(&g, SEC, 0, ev);
	assert_true(governor_scale(&g, 0) == 1.0);
	assert_true(governor_scale(&g, 1) == 1.0);
}

/* Cost model: fixed 0.1% plus 3% at full rate, linear in the scale. Converges under the
 * budget within a few ticks and stays there without oscillating. */
static void test_converges(void **state)
{
	struct governor g;
	int changes_late = 0;

	init(&g);
	for (int t = 0; t < 200; t++) {
		double s = governor_scale(&g, 0);
		double use = 0.001 + 0.03 * s;
		uint64_t ev[2] = { (uint64_t)(1e6 * s), (uint64_t)(1e6 * s) };
		enum gov_action a = governor_tick(&g, SEC, (uint64_t)(use * SEC), ev);

		if (t >= 10 && a != GOV_HOLD)
			changes_late++;
		if (t >= 3)
			assert_true(use <= 0.0101 || a == GOV_LOWER);
	}
	double s = governor_scale(&g, 0);
	assert_true(0.001 + 0.03 * s <= 0.01);
	assert_true(0.001 + 0.03 * s > 0.005);   /* not starved: above the low water */
	assert_int_equal(changes_late, 0);
}

static void test_status_text(void **state)
{
	struct governor g;
	uint64_t ev[2] = { 10, 10 };
	char buf[4096], small_hist[8];

	init(&g);
	governor_tick(&g, SEC, 50000000, ev);
	governor_tick(&g, SEC, 50000000, ev);
	int n = governor_status(&g, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_non_null(strstr(buf, "budget 1.000% of one CPU"));
	assert_non_null(strstr(buf, "lowered 2"));
	assert_non_null(strstr(buf, "alloc: scale 0.0625"));
	/* Newest change first. */
	char *a = strstr(buf, "change: tick 2"), *b = strstr(buf, "change: tick 1");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
	/* The same changes for the store: newest first, one a line. */
	char hist[2 * GOV_TEXT];
	int hn = governor_history(&g, hist, sizeof(hist));
	assert_true(hn > 0 && (size_t)hn == strlen(hist));
	assert_true(strncmp(hist, "tick 2:", 7) == 0);
	assert_non_null(strstr(hist, "\ntick 1:"));
	assert_null(strchr(strchr(hist, '\n') + 1, '\n'));
	assert_int_equal(governor_history(&g, small_hist, sizeof(small_hist)), hn);
	/* Truncation is safe and reports the wanted length. */
	char small[16];
	assert_int_equal(governor_status(&g, small, sizeof(small)), n);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(governor_add_source(&g, "c"), 2);
	assert_int_equal(governor_add_source(&g, "d"), 3);
	assert_true(governor_add_source(&g, "e") < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lower_proportional), cmocka_unit_test(test_floor),
		cmocka_unit_test(test_idle_source_untouched), cmocka_unit_test(test_hysteresis),
		cmocka_unit_test(test_converges), cmocka_unit_test(test_status_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
