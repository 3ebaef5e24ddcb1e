/* base/: the shared helpers every layer uses, on their documented edges: FNV-1a's
 * published vectors, ARRAY_GROW's doubling and its refusal to overflow, base_name,
 * usage_error's one line and exit status, the clocks' units, escape's JSON and CSV. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/escape.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/path.h"

static void test_fnv1a(void **state)
{
	/* The FNV-1a 64-bit test vectors (draft-eastlake-fnv). */
	assert_true(fnv1a("", 0) == 0xcbf29ce484222325ULL);
	assert_true(fnv1a("a", 1) == 0xaf63dc4c8601ec8cULL);
	assert_true(fnv1a("foobar", 6) == 0x85944171f73967e8ULL);
	/* Continuing a hash equals hashing the concatenation. */
	assert_true(fnv1a_from(fnv1a("foo", 3), "bar", 3) == fnv1a("foobar", 6));
}

static void test_array_grow(void **state)
{
	int *v = NULL;
	size_t n = 0, cap = 0;

	for (int i = 0; i < 100; i++) {
		assert_int_equal(ARRAY_GROW(v, cap, n, 4), 0);
		v[n++] = i;
	}
	assert_int_equal(cap, 128);          /* 4, 8, ... 128: doubling from the minimum */
	for (int i = 0; i < 100; i++)
		assert_int_equal(v[i], i);
	assert_int_equal(ARRAY_GROW(v, cap, n, 4), 0);   /* room left: nothing changes */
	assert_int_equal(cap, 128);
	free(v);

	/* A capacity whose double overflows the byte count is refused, the array kept. */
	char *big = malloc(1);
	size_t bcap = SIZE_MAX / 2 + 1, bn = bcap;
	assert_int_equal(array_grow((void **)&big, &bcap, bn, 1, 1), -ENOMEM);
	assert_true(bcap == SIZE_MAX / 2 + 1);
	free(big);
}

static void test_base_name(void **state)
{
	assert_string_equal(base_name("/usr/bin/git"), "git");
	assert_string_equal(base_name("git"), "git");
	assert_string_equal(base_name("dir/"), "");
	assert_null(base_name(NULL));
}

/* One usage_error() with stderr redirected into captured[]; returns its result. */
static char captured[256];
static int capture_usage_error(void)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO), r;
	size_t n;

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	r = usage_error("export pprof", "--weight: unknown weight '%s'", "x");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(captured, 1, sizeof(captured) - 1, tmp);
	captured[n] = '\0';
	fclose(tmp);
	return r;
}

static void test_usage_error(void **state)
{
	assert_int_equal(capture_usage_error(), EXIT_USAGE);
	assert_string_equal(captured, "memprofd: export pprof: --weight: unknown weight 'x'\n");
	assert_int_equal(log_error_errno(-EINVAL, "%s", "x"), -EINVAL);
}

static void test_clocks(void **state)
{
	uint64_t a = mono_ns(), b = mono_ns();
	int64_t ms = mono_ms(), real = real_ns();

	assert_true(b >= a);
	assert_true(ms >= (int64_t)(a / NSEC_PER_MSEC));
	assert_true(real > (int64_t)(1600000000ULL * NSEC_PER_SEC));   /* after 2020 */
	assert_true(cpu_ns() > 0);
}

static char *escaped(void (*f)(FILE *, const char *), const char *s)
{
	static char buf[256];
	FILE *m = fmemopen(buf, sizeof(buf), "w");

	f(m, s);
	fclose(m);
	return buf;
}

static void test_escape(void **state)
{
	assert_string_equal(escaped(fmt_json_str, "a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
	assert_string_equal(escaped(fmt_json_str, "\xff" "ok"), "\"\\ufffdok\"");
	assert_string_equal(escaped(fmt_json_str, NULL), "null");
	assert_string_equal(escaped(fmt_csv_field, "plain"), "plain");
	assert_string_equal(escaped(fmt_csv_field, "a,\"b\""), "\"a,\"\"b\"\"\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_array_grow),
		cmocka_unit_test(test_base_name),
		cmocka_unit_test(test_usage_error),
		cmocka_unit_test(test_clocks),
		cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
