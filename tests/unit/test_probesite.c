/* Probe placement: skips only instructions that keep the argument registers and rsp,
 * lands on one the kernel emulates, and never crosses a branch. Code comes from
 * byte files written here, so each case is exact. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/probesite.h"

static uint64_t site(const unsigned char *code, size_t n, uint64_t at, unsigned args)
{
	char path[] = "/tmp/probesite-XXXXXX";
	int fd = mkstemp(path);
	unsigned char pad[64] = { 0 };
	uint64_t out = ~0ULL;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, pad, at), (ssize_t)at);   /* the function sits at offset `at` */
	assert_int_equal(write(fd, code, n), (ssize_t)n);
	close(fd);
	assert_int_equal(probesite_find(path, at, args, &out), 0);
	unlink(path);
	return out;
}

static void skips_endbr_and_test_to_jcc(void **state)
{
	/* endbr64; test %rdi,%rdi; je +0x10 */
	const unsigned char c[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 0x10 };
	assert_int_equal(site(c, sizeof(c), 16, PROBESITE_ARG1), 16 + 7);
}

static void push_at_entry_stays(void **state)
{
	/* push %r12; push %rbp */
	const unsigned char c[] = { 0x41, 0x54, 0x55 };
	assert_int_equal(site(c, sizeof(c), 8, PROBESITE_ARG1), 8);
}

static void write_to_an_argument_stops(void **state)
{
	/* endbr64; mov %rsi,%rdi; push %rbp: rdi changes before the push */
	const unsigned char c[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xf7, 0x55 };
	assert_int_equal(site(c, sizeof(c), 0, PROBESITE_ARG1), 0);
	/* endbr64; mov %rsi,%rax; push %rbp: only rax changes: lands on the push */
	const unsigned char d[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xf0, 0x55 };
	assert_int_equal(site(d, sizeof(d), 0, PROBESITE_ARG1 | PROBESITE_ARG2), 7);
	/* ... but mov %rax,%rsi writes the second argument */
	const unsigned char e[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xc6, 0x55 };
	assert_int_equal(site(e, sizeof(e), 0, PROBESITE_ARG1 | PROBESITE_ARG2), 0);
	assert_int_equal(site(e, sizeof(e), 0, PROBESITE_ARG1), 7);
}

static void stack_pointer_change_stops(void **state)
{
	/* endbr64; sub $8,%rsp; push %rbx: a uretprobe there would miss the return address */
	const unsigned char c[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08, 0x53 };
	assert_int_equal(site(c, sizeof(c), 0, PROBESITE_ARG1), 0);
}

static void undecodable_and_missing_keep_entry(void **state)
{
	const unsigned char c[] = { 0x0f, 0xff, 0xff, 0xff };
	uint64_t out = 1;

	assert_int_equal(site(c, sizeof(c), 4, PROBESITE_ARG1), 4);
	assert_int_equal(probesite_find("/nonexistent/binary", 0x40, PROBESITE_ARG1, &out), -ENOENT);
	assert_int_equal(out, 0x40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(skips_endbr_and_test_to_jcc),
		cmocka_unit_test(push_at_entry_stays),
		cmocka_unit_test(write_to_an_argument_stops),
		cmocka_unit_test(stack_pointer_change_stops),
		cmocka_unit_test(undecodable_and_missing_keep_entry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
