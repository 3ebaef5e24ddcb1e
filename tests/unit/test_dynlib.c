/* base/dynlib.c: a library opened on first use resolves every name into its table, and a
 * missing library or symbol fails with -ENOENT (the same answer again, the table left
 * empty) instead of half a table. zlib stands in: every memprofd links it anyway. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include <zlib.h>

#include "base/dynlib.h"

static struct {
	const char *(*version)(void);
	uLong (*crc)(uLong, const Bytef *, uInt);
} z;
static const char *const z_names[] = { "zlibVersion", "crc32" };

static void test_loads_every_name(void **state)
{
	static struct dynlib l = DYNLIB_INIT("libz.so.1", z_names, z, 0);

	assert_int_equal(dynlib_load(&l), 0);
	assert_string_equal(z.version(), zlibVersion());
	assert_int_equal(z.crc(0, (const Bytef *)"abc", 3), crc32(0, (const Bytef *)"abc", 3));
	assert_int_equal(dynlib_load(&l), 0);   /* the second call is the first's answer */
}

static struct {
	const char *(*version)(void);
	void (*nothing)(void);
} zbad;
static const char *const zbad_names[] = { "zlibVersion", "memprofd_no_such_symbol" };

static void test_missing_symbol(void **state)
{
	static struct dynlib l = DYNLIB_INIT("libz.so.1", zbad_names, zbad, 0);

	assert_int_equal(dynlib_load(&l), -ENOENT);
	assert_null(zbad.version);   /* all or nothing */
	assert_non_null(strstr(dynlib_error(&l), "memprofd_no_such_symbol"));
	assert_int_equal(dynlib_load(&l), -ENOENT);
}

static void test_missing_library(void **state)
{
	static struct { void (*f)(void); } t;
	static const char *const names[] = { "f" };
	static struct dynlib l = DYNLIB_INIT("libmemprofd_absent.so.9", names, t, 0);

	assert_int_equal(dynlib_load(&l), -ENOENT);
	assert_non_null(strstr(dynlib_error(&l), "libmemprofd_absent.so.9"));
	assert_null(t.f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loads_every_name),
		cmocka_unit_test(test_missing_symbol),
		cmocka_unit_test(test_missing_library),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
