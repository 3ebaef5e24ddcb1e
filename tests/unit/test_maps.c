/* Unit tests for symbolizer/maps.c: the /proc/PID/maps parser on typical, odd and
 * malformed lines (each malformed line must fail with -EINVAL and its line number),
 * maps_find at every boundary, and maps_read_pid on this process and on a reaped one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#define UNUSED __attribute__((unused))

#include "symbolizer/maps.h"

static int parse_str(struct maps *m, const char *s, unsigned *bad)
{
	return maps_parse(m, s, strlen(s), bad);
}

static void test_typical(void **state UNUSED)
{
	static const char text[] =
		"55d0c8a00000-55d0c8a02000 r--p 00000000 fd:01 1234567                    /usr/bin/foo\n"
		"55d0c8a02000-55d0c8a22000 r-xp 00002000 fd:01 1234567                    /usr/bin/foo\n"
		"55d0c8c22000-55d0c8c23000 rw-s 00022000 103:1a 18446744073709551615       /usr/bin/foo\n"
		"55d0c9000000-55d0c9021000 rw-p 00000000 00:00 0                          [heap]\n"
		"7f0000000000-7f0000001000 ---p 00000000 00:00 0 \n"
		"7f0000001000-7f0000002000 rw-p 00000000 00:00 0\n"
		"7ffc4a000000-7ffc4a021000 rw-p 00000000 00:00 0                          [stack]\n"
		"7ffc4a1f0000-7ffc4a1f4000 r--p 00000000 00:00 0                          [vvar]\n"
		"7ffc4a1f4000-7ffc4a1f6000 r-xp 00000000 00:00 0                          [vdso]\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
	struct maps m;
	unsigned bad = 99;

	assert_int_equal(parse_str(&m, text, &bad), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(m.n, 10);

	assert_int_equal(m.v[0].start, 0x55d0c8a00000ull);
	assert_int_equal(m.v[0].end, 0x55d0c8a02000ull);
	assert_int_equal(m.v[0].prot, PROT_READ);
	assert_string_equal(m.v[0].path, "/usr/bin/foo");
	assert_int_equal(m.v[0].deleted, 0);

	assert_int_equal(m.v[1].prot, PROT_READ | PROT_EXEC);
	assert_int_equal(m.v[1].offset, 0x2000);
	assert_int_equal(m.v[1].dev_major, 0xfd);
	assert_int_equal(m.v[1].dev_minor, 0x01);
	assert_int_equal(m.v[1].inode, 1234567);

	assert_int_equal(m.v[2].prot, PROT_READ | PROT_WRITE);
	assert_int_equal(m.v[2].dev_major, 0x103);
	assert_int_equal(m.v[2].dev_minor, 0x1a);
	assert_int_equal(m.v[2].inode, UINT64_MAX);

	assert_string_equal(m.v[3].path, "[heap]");
	assert_int_equal(m.v[4].prot, 0);
	assert_string_equal(m.v[4].path, "");   /* anonymous, kernel's trailing space */
	assert_string_equal(m.v[5].path, "");   /* anonymous, no trailing space */
	assert_string_equal(m.v[6].path, "[stack]");
	assert_string_equal(m.v[7].path, "[vvar]");
	assert_string_equal(m.v[8].path, "[vdso]");
	assert_int_equal(m.v[9].start, 0xffffffffff600000ull);
	assert_int_equal(m.v[9].prot, PROT_EXEC);
	assert_string_equal(m.v[9].path, "[vsyscall]");
	maps_free(&m);
	assert_null(m.v);
	assert_int_equal(m.n, 0);
}

static void test_spaces_deleted_named(void **state UNUSED)
{
	static const char text[] =
		"1000-2000 r-xp 00000000 08:02 42     /tmp/my dir/lib with  spaces.so\n"
		"2000-3000 r-xp 00001000 08:02 43     /usr/bin/foo (deleted)\n"
		"3000-4000 rw-s 00000000 00:01 44     /memfd:jit code (deleted)\n"
		"4000-5000 rw-p 00000000 00:00 0      [anon:my arena]\n"
		"5000-6000 r--p 00000000 08:02 45     /tmp/(deleted)\n"
		"6000-7000 r--p 00000000 08:02 46     /tmp/x (deleted) (deleted)"; /* no final \n */
	struct maps m;

	assert_int_equal(parse_str(&m, text, NULL), 0);
	assert_int_equal(m.n, 6);
	assert_string_equal(m.v[0].path, "/tmp/my dir/lib with  spaces.so");
	assert_int_equal(m.v[0].deleted, 0);
	assert_string_equal(m.v[1].path, "/usr/bin/foo");
	assert_int_equal(m.v[1].deleted, 1);
	assert_string_equal(m.v[2].path, "/memfd:jit code");
	assert_int_equal(m.v[2].deleted, 1);
	assert_int_equal(m.v[2].prot, PROT_READ | PROT_WRITE);
	assert_string_equal(m.v[3].path, "[anon:my arena]");
	assert_string_equal(m.v[4].path, "/tmp/(deleted)");
	assert_int_equal(m.v[4].deleted, 0);
	assert_string_equal(m.v[5].path, "/tmp/x (deleted)");
	assert_int_equal(m.v[5].deleted, 1);
	maps_free(&m);
}

static void test_empty_and_sorting(void **state UNUSED)
{
	struct maps m;
	unsigned bad = 7;

	assert_int_equal(maps_parse(&m, NULL, 0, &bad), 0);
	assert_int_equal(m.n, 0);
	assert_int_equal(bad, 0);
	assert_null(maps_find(&m, 0x1000));
	maps_free(&m);

	assert_int_equal(parse_str(&m,
		"5000-6000 r--p 00000000 00:00 0 c\n"
		"1000-2000 r--p 00000000 00:00 0 a\n"
		"3000-4000 r--p 00000000 00:00 0 b\n", NULL), 0);
	assert_int_equal(m.n, 3);
	assert_string_equal(m.v[0].path, "a");
	assert_string_equal(m.v[1].path, "b");
	assert_string_equal(m.v[2].path, "c");
	maps_free(&m);

	/* Not NUL-terminated: the parser must stop at len. */
	static const char nonul[] = "1000-2000 r--p 00000000 00:00 0 /abcXYZ";
	assert_int_equal(maps_parse(&m, nonul, sizeof(nonul) - 1 - 3, NULL), 0);
	assert_string_equal(m.v[0].path, "/abc");
	maps_free(&m);
}

/* Three good lines around bad one at line 3: -EINVAL, *bad_line == 3, nothing returned. */
static void expect_bad_line3(const char *bad_line_text)
{
	char buf[8192];
	struct maps m = { (struct map_entry *)0x1, 5 };
	unsigned bad = 0;

	snprintf(buf, sizeof(buf),
		 "1000-2000 r--p 00000000 00:00 0 /a\n"
		 "2000-3000 r--p 00000000 00:00 0 /b\n"
		 "%s\n"
		 "f000-f100 r--p 00000000 00:00 0 /d\n", bad_line_text);
	assert_int_equal(parse_str(&m, buf, &bad), -EINVAL);
	assert_int_equal(bad, 3);
	assert_null(m.v);
	assert_int_equal(m.n, 0);
}

static void test_malformed(void **state UNUSED)
{
	static const char *bad[] = {
		"",                                                 /* blank line */
		"zz00-5000 r--p 00000000 00:00 0 /x",               /* bad hex */
		"4000-50g0 r--p 00000000 00:00 0 /x",
		"4000-5000 r--p 0000000g 00:00 0 /x",
		"4000-5000 r--p 00000000 0z:00 0 /x",
		"4000-5000 r--p 00000000 00:00 12a /x",             /* bad decimal inode */
		"4000 r--p 00000000 00:00 0 /x",                    /* missing end */
		"4000-5000",                                        /* missing fields */
		"4000-5000 r--p",
		"4000-5000 r--p 00000000",
		"4000-5000 r--p 00000000 00:00",
		"4000-5000 r--p 00000000 00:00 ",
		"4000-5000 r--p 00000000 0000 0 /x",                /* dev without ':' */
		"4000-5000 r--q 00000000 00:00 0 /x",               /* bad perms */
		"4000-5000 rw? 00000000 00:00 0 /x",
		"4000-5000 xwrp 00000000 00:00 0 /x",
		"4000-5000 r--pp 00000000 00:00 0 /x",
		"5000-4000 r--p 00000000 00:00 0 /x",               /* end < start */
		"4000-4000 r--p 00000000 00:00 0 /x",               /* end == start */
		"-4000-5000 r--p 00000000 00:00 0 /x",
		" 4000-5000 r--p 00000000 00:00 0 /x",
		"0x4000-5000 r--p 00000000 00:00 0 /x",
		"10000000000000000-10000000000000001 r--p 00000000 00:00 0 /x", /* 17 digits */
		"4000-5000 r--p 00000000 00:00 99999999999999999999 /x",      /* inode overflow */
		"4000-5000 r--p 00000000 00:00 0/x",                /* no separator */
		"4000-5000  r--p 00000000 00:00 0 /x",              /* double space */
		"2800-5000 r--p 00000000 00:00 0 /x",               /* overlaps line 2 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		print_message("malformed #%zu: '%s'\n", i, bad[i]);
		expect_bad_line3(bad[i]);
	}

	/* A NUL byte inside a line. */
	static const char nul[] = "1000-2000 r--p 00000000 00:00 0 /a\n2000-3000 r--p 00000000 00:00 0 /b\x00x\n";
	struct maps m;
	unsigned line = 0;
	assert_int_equal(maps_parse(&m, nul, sizeof(nul) - 1, &line), -EINVAL);
	assert_int_equal(line, 2);

	/* Path of MAPS_PATH_MAX - 1 bytes is fine, MAPS_PATH_MAX bytes is not. */
	char *path = malloc(MAPS_PATH_MAX + 1);
	assert_non_null(path);
	path[0] = '/';
	memset(path + 1, 'p', MAPS_PATH_MAX - 1);
	path[MAPS_PATH_MAX] = '\0';
	char *line_text = malloc(MAPS_PATH_MAX + 128);
	assert_non_null(line_text);
	snprintf(line_text, MAPS_PATH_MAX + 128, "4000-5000 r--p 00000000 00:00 0 %s", path);
	expect_bad_line3(line_text);
	path[MAPS_PATH_MAX - 1] = '\0';
	snprintf(line_text, MAPS_PATH_MAX + 128, "4000-5000 r--p 00000000 00:00 0 %s\n", path);
	assert_int_equal(parse_str(&m, line_text, NULL), 0);
	assert_int_equal(strlen(m.v[0].path), MAPS_PATH_MAX - 1);
	maps_free(&m);
	free(line_text);
	free(path);

	/* Overlap discovered only after sorting: the later of the two lines is reported. */
	assert_int_equal(parse_str(&m,
		"5000-6000 r--p 00000000 00:00 0 /c\n"
		"1000-5800 r--p 00000000 00:00 0 /a\n"
		"9000-a000 r--p 00000000 00:00 0 /b\n", &line), -EINVAL);
	assert_int_equal(line, 2);
}

static void test_too_many(void **state UNUSED)
{
	size_t n = MAPS_MAX_ENTRIES + 1, cap = n * 48, len = 0;
	char *buf = malloc(cap);
	struct maps m;
	unsigned bad;

	assert_non_null(buf);
	for (size_t i = 0; i < n - 1; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%zx-%zx r--p 0 00:00 0\n",
					(i + 1) * 0x1000, (i + 1) * 0x1000 + 0x800);
	assert_int_equal(maps_parse(&m, buf, len, &bad), 0);
	assert_int_equal(m.n, MAPS_MAX_ENTRIES);
	maps_free(&m);
	len += (size_t)snprintf(buf + len, cap - len, "%zx-%zx r--p 0 00:00 0\n",
				n * 0x1000, n * 0x1000 + 0x800);
	assert_int_equal(maps_parse(&m, buf, len, &bad), -E2BIG);
	assert_null(m.v);
	free(buf);
}

static void test_find(void **state UNUSED)
{
	struct maps m;

	assert_int_equal(parse_str(&m,
		"1000-2000 r--p 00000000 00:00 0 /a\n"
		"2000-3000 r--p 00000000 00:00 0 /b\n"   /* adjacent to /a */
		"5000-6000 r--p 00000000 00:00 0 /c\n"   /* gap before */
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n", NULL), 0);
	assert_null(maps_find(&m, 0));
	assert_null(maps_find(&m, 0xfff));
	assert_string_equal(maps_find(&m, 0x1000)->path, "/a");
	assert_string_equal(maps_find(&m, 0x1fff)->path, "/a");
	assert_string_equal(maps_find(&m, 0x2000)->path, "/b");
	assert_string_equal(maps_find(&m, 0x2fff)->path, "/b");
	assert_null(maps_find(&m, 0x3000));
	assert_null(maps_find(&m, 0x4fff));
	assert_string_equal(maps_find(&m, 0x5000)->path, "/c");
	assert_string_equal(maps_find(&m, 0x5fff)->path, "/c");
	assert_null(maps_find(&m, 0x6000));
	assert_null(maps_find(&m, 0xffffffffff5fffffull));
	assert_string_equal(maps_find(&m, 0xffffffffff600000ull)->path, "[vsyscall]");
	assert_string_equal(maps_find(&m, 0xffffffffff600fffull)->path, "[vsyscall]");
	assert_null(maps_find(&m, 0xffffffffff601000ull));
	assert_null(maps_find(&m, UINT64_MAX));
	assert_int_equal(map_entry_file_offset(maps_find(&m, 0x5123), 0x5123), 0x123);
	maps_free(&m);
	assert_null(maps_find(&m, 0x1000));
	assert_null(maps_find(NULL, 0x1000));
}

static __attribute__((noinline)) int marker_fn(int x) { return x * 3 + 1; }

static void test_read_self(void **state UNUSED)
{
	struct maps m;
	int on_stack = 0;
	const struct map_entry *e;

	assert_int_equal(maps_read_pid(&m, getpid()), 0);
	assert_true(m.n > 3);
	for (size_t i = 1; i < m.n; i++)
		assert_true(m.v[i - 1].end <= m.v[i].start);

	e = maps_find(&m, (uint64_t)(uintptr_t)&marker_fn);
	assert_non_null(e);
	assert_true(e->prot & PROT_EXEC);
	assert_true(e->path[0] == '/');
	assert_true(e->inode != 0);
	assert_int_equal(e->deleted, 0);

	e = maps_find(&m, (uint64_t)(uintptr_t)&on_stack);
	assert_non_null(e);
	assert_true(e->prot & PROT_WRITE);
	assert_int_equal(marker_fn(1), 4);
	maps_free(&m);
}

static void test_read_dead(void **state UNUSED)
{
	struct maps m;
	pid_t pid = (pid_t)mpd_reaped_pid();

	assert_int_equal(maps_read_pid(&m, pid), -ESRCH);
	assert_null(m.v);
	assert_int_equal(maps_read_pid(&m, 0), -EINVAL);
	assert_int_equal(maps_read_pid(&m, -1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_typical),
		cmocka_unit_test(test_spaces_deleted_named),
		cmocka_unit_test(test_empty_and_sorting),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_too_many),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_read_self),
		cmocka_unit_test(test_read_dead),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
