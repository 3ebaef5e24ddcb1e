/* reporter/estimate.c: the 95% Poisson (Garwood) interval against published chi-square
 * quantiles (lo = chi2(0.025, 2n) / 2, hi = chi2(0.975, 2n + 2) / 2), the scaling of a
 * sampled total by it, exact and unknown totals, and the few-samples mark. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "tests/unit/mpd_cmocka.h"

#include "reporter/estimate.h"

static void near(double got, double want, double rel)
{
	if (fabs(got - want) > rel * (want > 1 ? want : 1))
		fail_msg("%.6f, want %.6f (within %g)", got, want, rel);
}

static void test_garwood(void **state)
{
	static const struct { uint64_t n; double lo, hi; } ref[] = {
		{ 0, 0.0, 3.6889 }, { 1, 0.0253, 5.5716 }, { 2, 0.2422, 7.2247 },
		{ 8, 3.4538, 15.7632 }, { 100, 81.3641, 121.6296 },
		{ 1000, 939.0820, 1063.3660 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(ref) / sizeof(ref[0]); i++) {
		double lo, hi;

		estimate_poisson(ref[i].n, &lo, &hi);
		near(lo, ref[i].lo, 2e-3);
		near(hi, ref[i].hi, 2e-3);
	}
	/* Above ESTIMATE_EXACT_MAX: Wilson-Hilferty, continuous with the exact bounds. */
	double lo1, hi1, lo2, hi2;

	estimate_poisson(ESTIMATE_EXACT_MAX, &lo1, &hi1);
	estimate_poisson(ESTIMATE_EXACT_MAX + 1, &lo2, &hi2);
	near(lo2, lo1 + 1, 2e-3);
	near(hi2, hi1 + 1, 2e-3);
}

static void test_scaled(void **state)
{
	struct mib m = { .alloc_count = 5611, .total_size = 359104, .alloc_samples = 87,
			 .access_samples = 8, .total_access_count = 120000000 };
	struct estimate c, b, a;

	(void)state;
	estimate_mib(&m, &c, &b, &a);
	assert_int_equal(c.kind, ESTIMATE_SAMPLED);
	assert_true(c.lo < 5000 && c.hi > 5611 && c.hi < 7000);
	assert_true(b.lo < 320000 && b.hi > 359104);
	/* 120M accesses resting on 8 samples: [3.45, 15.76] / 8 of it, and marked. */
	near((double)a.lo, 120e6 * 3.4538 / 8, 2e-3);
	near((double)a.hi, 120e6 * 15.7632 / 8, 2e-3);
	assert_true(estimate_weak(&c, &a));
	assert_true(estimate_rel_pct(&a) > 70);
	m.access_samples = 800;
	estimate_mib(&m, &c, &b, &a);
	assert_false(estimate_weak(&c, &a));
}

/* The stall factor's error widens the accesses' interval in quadrature: 8000 samples
 * alone give about +-2.2%; an error of 10% of the value (1.96 x 10% = 19.6%) dominates;
 * none (an older store) leaves the Poisson interval as it was. */
static void test_stall_error_widens(void **state)
{
	struct mib m = { .alloc_count = 100, .total_size = 25600, .alloc_samples = 100,
			 .access_samples = 8000, .total_access_count = 1000000000 };
	struct estimate c, b, a, a0;

	(void)state;
	estimate_mib(&m, &c, &b, &a0);
	assert_true(estimate_rel_pct(&a0) > 2.0 && estimate_rel_pct(&a0) < 2.5);
	m.access_est_err = 100000000;
	estimate_mib(&m, &c, &b, &a);
	double half_lo = 1e9 - (double)a0.lo, z = 1.959963984540054 * 1e8;
	near((double)a.lo, 1e9 - sqrt(half_lo * half_lo + z * z), 1e-6);
	assert_true(a.hi > a0.hi && a.lo < a0.lo);
	assert_true(estimate_rel_pct(&a) > 19.6 && estimate_rel_pct(&a) < 20.0);
	m.access_est_err = 1000000000;                /* +-196%: lo floored at 0 */
	estimate_mib(&m, &c, &b, &a);
	assert_int_equal(a.lo, 0);
	assert_int_equal(a.value, 1000000000);
}

static void test_exact_and_unknown(void **state)
{
	struct mib exact = { .alloc_count = 100, .total_size = 25600, .alloc_samples = 100 };
	struct mib old = { .alloc_count = 100, .total_size = 25600 };   /* schema < 9 */
	struct estimate c, b, a;

	(void)state;
	estimate_mib(&exact, &c, &b, &a);
	assert_int_equal(c.kind, ESTIMATE_EXACT);
	assert_true(b.lo == 25600 && b.hi == 25600);
	assert_true(estimate_rel_pct(&b) < 0);
	assert_false(estimate_weak(&c, &a));
	estimate_mib(&old, &c, &b, &a);
	assert_int_equal(c.kind, ESTIMATE_UNKNOWN);
	assert_false(estimate_weak(&c, &a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_garwood),
		cmocka_unit_test(test_scaled),
		cmocka_unit_test(test_exact_and_unknown),
		cmocka_unit_test(test_stall_error_widens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
