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
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Why a breakpoint cannot be used here, checked by the test itself: the PMU missing or
 * refused, or a watch that opens but counts none of 64 loads of its word (a hypervisor
 * that does not virtualise debug registers). NULL when watches work. */
static inline __attribute__((unused)) const char *mpd_breakpoints_unavailable(void)
{
	static volatile uint64_t word;
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a), .bp_type = HW_BREAKPOINT_RW,
		.bp_addr = (uintptr_t)&word, .bp_len = HW_BREAKPOINT_LEN_8,
		.exclude_kernel = 1, .exclude_hv = 1,
	};
	uint64_t count = 0;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return "breakpoint watch refused (no breakpoint PMU, or perf_event_paranoid)";
	for (int i = 0; i < 64; i++)
		(void)word;
	ssize_t n = read(fd, &count, sizeof(count));
	close(fd);
	return n == (ssize_t)sizeof(count) && count ? NULL :
	       "breakpoints open but never fire (0 of 64 watched loads counted)";
}

/* Skips the calling case, saying why, where breakpoints cannot be used. */
#define mpd_require_breakpoints() do { \
	const char *mpd_why_ = mpd_breakpoints_unavailable(); \
	if (mpd_why_) { \
		print_message("skip: %s\n", mpd_why_); \
		skip(); \
	} \
} while (0)

/* A process gone and reaped: a forked child that exited at once, waited for. Its pid has
 * no /proc entry and no maps, as a short-lived target's has once it is gone. */
static inline __attribute__((unused)) uint32_t mpd_reaped_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return (uint32_t)pid;
}
