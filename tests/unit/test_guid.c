/* Unit tests for symbolizer/guid.c. Ground truth is LLVM itself: llvm-profdata-19 merge
 * --sample --use-md5 stores each function as Function::getGUID(name) (= MD5Hash) and
 * `show` prints it; the constants below were printed by it, and the live test asks it
 * again for names taken from the fixtures. Canonicalization cases follow
 * FunctionSamples::getCanonicalFnName(Name, "selected") step by step. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#include "symbolizer/guid.h"

#define UNUSED __attribute__((unused))

static void test_known_llvm_guids(void **s UNUSED)
{
	/* llvm-profdata-19 show --sample of a --use-md5 profile of these names. */
	assert_int_equal(guid_md5_low64("main", 4), 15822663052811949562ull);
	assert_int_equal(guid_md5_low64("_Z3fooi", 7), 1228452328526475178ull);
	assert_int_equal(guid_md5_low64("_ZL6helperv.llvm.123", 20), 7645758350308290410ull);
	assert_int_equal(guid_md5_low64("foo.c;bar", 9), 12006575757093280806ull);
	/* MemProf drops the ThinLTO promotion suffix before hashing. */
	assert_int_equal(guid_memprof("_ZL6helperv.llvm.123"), 16297162465296336205ull);
	assert_int_equal(guid_memprof("_ZL6helperv"), 16297162465296336205ull);
	assert_int_equal(guid_memprof("main"), 15822663052811949562ull);
}

static void canon(const char *in, const char *want)
{
	size_t n = guid_canonical_len(in, strlen(in));

	if (n != strlen(want) || strncmp(in, want, n))
		fail_msg("canonical(%s) = %.*s, want %s", in, (int)n, in, want);
	assert_int_equal(guid_memprof(in), guid_md5_low64(want, strlen(want)));
}

static void test_canonical_names(void **s UNUSED)
{
	canon("f", "f");
	canon("f.llvm.42", "f");
	canon("f.part.3", "f");
	canon("f.part.2.llvm.1", "f");          /* .llvm. first, then .part. */
	canon("f.llvm.1.part.2", "f.llvm.1");   /* .part. stripped after .llvm. was tried */
	canon("f.__uniq.1234", "f.__uniq.1234"); /* kept: tells static functions apart */
	canon("f.__uniq.1234.llvm.5", "f.__uniq.1234");
	canon("f.llvm.1.cold", "f.llvm.1.cold"); /* a dot after the suffix: not a suffix */
	canon("f.cold", "f.cold");
	canon("", "");
}

static void test_global_identifier(void **s UNUSED)
{
	char buf[64];

	assert_int_equal(guid_global_identifier(buf, sizeof(buf), "bar", true, "foo.c"), 9);
	assert_string_equal(buf, "foo.c;bar");
	assert_int_equal(guid_md5_low64(buf, strlen(buf)), 12006575757093280806ull);
	assert_int_equal(guid_global_identifier(buf, sizeof(buf), "bar", true, ""), 13);
	assert_string_equal(buf, "<unknown>;bar");
	assert_int_equal(guid_global_identifier(buf, sizeof(buf), "\1bar", false, "foo.c"), 3);
	assert_string_equal(buf, "bar");
	assert_int_equal(guid_global_identifier(buf, 4, "long_name", false, NULL), 9);
	assert_string_equal(buf, "lon");
	assert_int_equal(guid_global_identifier(NULL, 0, "x", false, NULL), 1);
	assert_int_equal(guid_global_identifier(buf, sizeof(buf), NULL, false, NULL), -EINVAL);
}

/* Asks llvm-profdata-19 for the GUIDs of names the fixtures define, now. */
static void test_live_llvm_profdata(void **s UNUSED)
{
	static const char *const names[] = {
		"_ZN2fx3runILi3EEEii", "_ZN2fx5twiceIiEET_S1_", "outer_static", "leaf",
		"_ZNSt6vectorIiSaIiEE9push_backERKi", "a",
	};
	char dir[] = "/tmp/test_guid.XXXXXX", path[256], cmd[1024], line[512];
	unsigned found = 0;
	FILE *f;

	if (system("command -v llvm-profdata-19 >/dev/null 2>&1") != 0)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.txt", dir);
	assert_non_null(f = fopen(path, "w"));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		fprintf(f, "%s:%zu:1\n 1: 1\n", names[i], 100 + i);   /* total = tag */
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cd %s && llvm-profdata-19 merge --sample --extbinary --use-md5 "
		 "p.txt -o p.prof && llvm-profdata-19 show --sample p.prof", dir);
	assert_non_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long g, total;

		if (sscanf(line, "Function: %llu: %llu", &g, &total) != 2)
			continue;
		assert_true(total >= 100 && total < 100 + sizeof(names) / sizeof(names[0]));
		const char *n = names[total - 100];
		assert_int_equal(guid_md5_low64(n, strlen(n)), g);
		assert_int_equal(guid_memprof(n), g);
		found++;
	}
	pclose(f);
	assert_int_equal(found, sizeof(names) / sizeof(names[0]));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_llvm_guids),
		cmocka_unit_test(test_canonical_names),
		cmocka_unit_test(test_global_identifier),
		cmocka_unit_test(test_live_llvm_profdata),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
