/* daemon/service/config.c: defaults, every value type, the shipped deploy/memprofd.conf, and
 * errors: unknown sections and keys, bad values, syntax errors, long lines and an
 * unreadable file, each one line naming the file and the line. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/service/config.h"
#include "daemon/access/src_pmu.h"

static char path[64];

static const char *write_conf(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/test_config.%d.conf", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int load(struct config *c, const char *text, char **errs)
{
	int r = config_load(c, write_conf(text), errs);
	unlink(path);
	return r;
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

static void test_defaults(void **state)
{
	struct config c;
	char *errs;

	assert_int_equal(load(&c, "", &errs), 0);
	assert_null(errs);
	assert_string_equal(c.db, "/var/lib/memprofd/memprofd.db");
	assert_int_equal(c.flush_interval_ms, 500);
	assert_true(c.cpu_budget > 0.0099 && c.cpu_budget < 0.0101);
	assert_int_equal(c.alloc, CFG_ALLOC_SAMPLED);
	assert_int_equal(c.access, CFG_ACCESS_AUTO);
	/* The daemon samples accesses at record's default rate; each PMU source at its own. */
	assert_int_equal(c.access_freq_hz, SOFT_DEFAULT_FREQ);
	assert_int_equal(c.access_period, 0);
	assert_int_equal(c.retention_s, 14 * 86400);
	assert_int_equal(c.max_db_bytes, 1ULL << 30);
	assert_int_equal(c.cache_bytes, 2ULL << 20);
	assert_int_equal(c.ntiers, 3);
	assert_int_equal(c.ntargets, 0);
	config_free(&c);
}

static void test_values(void **state)
{
	struct config c;
	char *errs;
	int r = load(&c,
		"; comment\n# comment\n"
		"[store]\ndb = /tmp/x.db\nflush_interval = 2s\nmax_db_size = 64M\ncache_size = 256K\n"
		"retention = 30d ; inline comment\ncompact = 1h:5m, 1d:1h\n"
		"[sampling]\nalloc = exact\naccess = soft\naccess_freq = 99\nsample_bytes = 1M\n"
		"[governor]\ncpu_budget = 2.5%\nmin_scale = 0.125\n"
		"[target web]\nexe = /usr/bin/nginx*\ncomm = nginx\ncgroup = /system.slice/*\n"
		"[target kv]\nbuild_id = ABCDEF0123456789\n"
		"[deny]\nexe = */memprofd\nexe = /usr/bin/sshd\n", &errs);
	if (r)
		fprintf(stderr, "%s", errs);
	assert_int_equal(r, 0);
	assert_string_equal(c.db, "/tmp/x.db");
	assert_int_equal(c.flush_interval_ms, 2000);
	assert_int_equal(c.max_db_bytes, 64ULL << 20);
	assert_int_equal(c.cache_bytes, 256 << 10);
	assert_int_equal(c.retention_s, 30 * 86400);
	assert_int_equal(c.ntiers, 2);
	assert_int_equal(c.tiers[0].age_s, 3600);
	assert_int_equal(c.tiers[0].width_s, 300);
	assert_int_equal(c.tiers[1].width_s, 3600);
	assert_int_equal(c.alloc, CFG_ALLOC_EXACT);
	assert_int_equal(c.access, CFG_ACCESS_SOFT);
	assert_int_equal(c.access_freq_hz, 99);
	assert_int_equal(c.sample_bytes, 1 << 20);
	assert_true(c.cpu_budget > 0.0249 && c.cpu_budget < 0.0251);
	assert_true(c.min_scale == 0.125);
	assert_int_equal(c.ntargets, 2);
	assert_string_equal(c.targets[0].name, "web");
	assert_int_equal(c.targets[0].exe.n, 1);
	assert_string_equal(c.targets[0].cgroup.v[0], "/system.slice/*");
	assert_string_equal(c.targets[1].build_id.v[0], "abcdef0123456789");   /* lowered */
	assert_int_equal(c.deny.exe.n, 2);
	config_free(&c);
}

static void test_parsers(void **state)
{
	uint64_t v;
	double d;

	assert_int_equal(config_parse_duration("500ms", 1000, &v), 0); assert_int_equal(v, 500);
	assert_int_equal(config_parse_duration("7", 1000, &v), 0); assert_int_equal(v, 7000);
	assert_int_equal(config_parse_duration("2h", 1, &v), 0); assert_int_equal(v, 7200000);
	assert_int_equal(config_parse_duration("1w", 1, &v), 0); assert_int_equal(v, 604800000);
	assert_int_equal(config_parse_duration("-1s", 1, &v), -EINVAL);
	assert_int_equal(config_parse_duration("1x", 1, &v), -EINVAL);
	assert_int_equal(config_parse_duration("", 1, &v), -EINVAL);
	assert_int_equal(config_parse_duration("99999999999999999999d", 1, &v), -EINVAL);
	assert_int_equal(config_parse_size("4K", &v), 0); assert_int_equal(v, 4096);
	assert_int_equal(config_parse_size("1GiB", &v), 0); assert_int_equal(v, 1ULL << 30);
	assert_int_equal(config_parse_size("1MB", &v), 0); assert_int_equal(v, 1 << 20);
	assert_int_equal(config_parse_size("1Q", &v), -EINVAL);
	assert_int_equal(config_parse_size("100000000T", &v), -EINVAL);   /* overflows */
	assert_int_equal(config_parse_percent("1%", &d), 0); assert_true(d == 0.01);
	assert_int_equal(config_parse_percent("0.5%", &d), 0); assert_true(d == 0.005);
	assert_int_equal(config_parse_percent("1", &d), -EINVAL);
	assert_int_equal(config_parse_percent("-1%", &d), -EINVAL);
	assert_int_equal(config_parse_percent("0%", &d), -EINVAL);
}

/* Every error is reported, each on its own line "PATH:LINE: why". */
static void test_errors(void **state)
{
	struct config c;
	char *errs, want[128];
	int r = load(&c,
		"[store]\n"                         /* 1 */
		"flush_interval = fast\n"          /* 2 bad duration */
		"colour = blue\n"                  /* 3 unknown key */
		"[bogus]\n"                        /* 4 */
		"x = 1\n"                          /* 5 unknown section */
		"[sampling]\n"                     /* 6 */
		"alloc = always\n"                 /* 7 bad enum */
		"this line has no equals sign\n"   /* 8 syntax */
		"[governor]\n"                     /* 9 */
		"cpu_budget = 1\n"                 /* 10 not a percentage */
		"[target]\n"                       /* 11 */
		"exe = /x\n"                       /* 12 target without a name */
		"[deny]\n"                         /* 13 */
		"exe = relative/path\n"            /* 14 not absolute */
		"build_id = xyz\n"                 /* 15 not hex */
		"[store\n"                         /* 16 bad header */
		"[store]\nflush_interval = 10\n"  /* 17, 18: 10 ms < 50 ms minimum */
		"cache_size = 4K\n",               /* 19: under 64K */
		&errs);
	assert_int_equal(r, -EINVAL);
	assert_non_null(errs);
	fprintf(stderr, "%s", errs);
	static const unsigned lines[] = { 2, 3, 5, 7, 8, 10, 12, 14, 15, 16, 18, 19 };
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(want, sizeof(want), "%s:%u: ", path, lines[i]);
		assert_non_null(strstr(errs, want));
	}
	assert_int_equal(count_lines(errs), sizeof(lines) / sizeof(lines[0]));
	assert_non_null(strstr(errs, "unknown key 'colour'"));
	assert_non_null(strstr(errs, "unknown section [bogus]"));
	assert_non_null(strstr(errs, "expected exact, sampled or off, got 'always'"));
	free(errs);
	config_free(&c);
}

static void test_cross_and_tiers(void **state)
{
	struct config c;
	char *errs;

	assert_int_equal(load(&c, "[store]\ncompact = 1d:1h 1h:1m\n", &errs), -EINVAL);
	assert_non_null(strstr(errs, ":2: [store] compact: tiers must grow"));
	free(errs);
	assert_int_equal(load(&c, "[store]\ncompact = 1h\n", &errs), -EINVAL);
	free(errs);
	assert_int_equal(load(&c, "[store]\ncompact = 1m:1m\n", &errs), -EINVAL);
	free(errs);
	assert_int_equal(load(&c, "[store]\nretention = 2d\ncompact = 1h:1m 7d:1d\n", &errs), -EINVAL);
	assert_non_null(strstr(errs, ":2: [store] retention"));
	free(errs);
	assert_int_equal(load(&c, "[store]\nretention = 0\ncompact = off\n", &errs), 0);
	assert_int_equal(c.ntiers, 0);
	assert_int_equal(c.retention_s, 0);
	config_free(&c);
}

static void test_long_line(void **state)
{
	struct config c;
	char *errs, text[600];

	snprintf(text, sizeof(text), "[store]\ndb = /%0300d\nflush_interval = 1s\n", 0);
	assert_int_equal(load(&c, text, &errs), -EINVAL);
	assert_non_null(strstr(errs, ":2: line longer than"));
	assert_int_equal(count_lines(errs), 1);   /* the rest of the line is not a new line */
	free(errs);
}

static void test_unreadable(void **state)
{
	struct config c;
	char *errs;

	assert_int_equal(config_load(&c, "/nonexistent/memprofd.conf", &errs), -ENOENT);
	assert_string_equal(errs, "/nonexistent/memprofd.conf: cannot read the config: "
			    "No such file or directory\n");
	free(errs);
	assert_int_equal(config_load(&c, "/tmp", &errs), -EISDIR);
	assert_string_equal(errs, "/tmp: cannot read the config: Is a directory\n");
	free(errs);
	config_free(&c);
}

/* The shipped default config parses and equals the built-in defaults. */
static void test_shipped(void **state)
{
	struct config c, d;
	char *errs;
	int r = config_load(&c, SOURCE_ROOT "/deploy/memprofd.conf", &errs);

	if (r)
		fprintf(stderr, "%s", errs);
	assert_int_equal(r, 0);
	config_defaults(&d);
	assert_string_equal(c.db, d.db);
	assert_int_equal(c.flush_interval_ms, d.flush_interval_ms);
	assert_int_equal(c.max_db_bytes, d.max_db_bytes);
	assert_int_equal(c.cache_bytes, d.cache_bytes);
	assert_int_equal(c.retention_s, d.retention_s);
	assert_int_equal(c.ntiers, d.ntiers);
	assert_memory_equal(c.tiers, d.tiers, sizeof(d.tiers[0]) * d.ntiers);
	assert_int_equal(c.alloc, d.alloc);
	assert_int_equal(c.sample_bytes, d.sample_bytes);
	assert_int_equal(c.access, d.access);
	assert_int_equal(c.access_freq_hz, d.access_freq_hz);
	assert_int_equal(c.access_period, d.access_period);
	assert_true(c.cpu_budget == d.cpu_budget);
	assert_true(c.min_scale == d.min_scale);
	assert_int_equal(c.max_processes, d.max_processes);
	assert_int_equal(c.deny.exe.n, 1);      /* the daemon never profiles itself */
	config_free(&c);
	config_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults), cmocka_unit_test(test_values),
		cmocka_unit_test(test_parsers), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_cross_and_tiers), cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_unreadable), cmocka_unit_test(test_shipped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
