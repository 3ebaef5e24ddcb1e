/* cmocka for memprofd's unit tests, with skips meson can see. cmocka's own skip() marks a
 * case skipped but the executable still exits 0, which meson counts as a pass; every unit
 * test includes this header instead of <cmocka.h>, so a run with no failure and at least
 * one skipped case exits 77 (meson's skip code). Failures still win: their count is the
 * exit status, as cmocka returns it. */
#pragma once
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define MPD_CMOCKA_SKIP_EXIT 77

static int mpd_cmocka_skipped __attribute__((unused));

static inline __attribute__((unused)) int mpd_cmocka_result(int failed)
{
	if (failed)
		return failed;
	return mpd_cmocka_skipped ? MPD_CMOCKA_SKIP_EXIT : 0;
}

#undef skip
#define skip() do { mpd_cmocka_skipped++; _skip(__FILE__, __LINE__); } while (0)

#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown) \
	mpd_cmocka_result(_cmocka_run_group_tests(#group_tests, group_tests, \
		sizeof(group_tests) / sizeof((group_tests)[0]), group_setup, group_teardown))
