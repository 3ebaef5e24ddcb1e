/* mpd_cmocka.h itself: a run whose cases pass or skip exits 77, so meson reports a skip
 * and not a pass (run by check_cmocka_skip.sh, which expects exactly that status). */
#include "tests/unit/mpd_cmocka.h"

static void passes(void **state)
{
	assert_int_equal(1 + 1, 2);
}

static void skips(void **state)
{
	skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(passes),
		cmocka_unit_test(skips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
