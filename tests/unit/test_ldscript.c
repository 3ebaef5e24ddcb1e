/* linker_script_gen/ldgen.c: hot/cold selection (the fewest symbols covering the share,
 * stable ties, cold only over a big enough window, TLS never placed) and the three
 * writers' exact shapes (ordering file lines, INSERT blocks, objcopy renames). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/unit/mpd_cmocka.h"
#include <errno.h>

#include "linker_script_gen/ldgen.h"

static void add(struct ldgen_set *s, const char *name, const char *sec, uint64_t addr,
		uint64_t samples, bool sampled)
{
	assert_int_equal(ldgen_add(s, name, sec, addr, 8, samples, samples * 1000, sampled), 0);
}

/* 50/30/15/4/1 samples and two never-sampled symbols. */
static void fill(struct ldgen_set *s)
{
	ldgen_init(s);
	add(s, "c", ".bss", 0x3000, 15, true);
	add(s, "a", ".data", 0x1000, 50, true);
	add(s, "e", ".rodata", 0x5000, 1, true);
	add(s, "b", ".rodata", 0x2000, 30, true);
	add(s, "d", ".data.rel.ro", 0x4000, 4, true);
	add(s, "a", ".data", 0x1000, 0, false);   /* the binary's own copy of a */
	add(s, "z", ".data", 0x9000, 0, false);
	add(s, "y", ".bss", 0x8000, 0, false);
}

static char *render(int (*w)(FILE *, const struct ldgen_set *, const struct ldgen_hdr *),
		    const struct ldgen_set *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct ldgen_hdr h = { .binary = "/bin/x", .build_id = "ab", .tool = "t" };

	assert_non_null(f);
	assert_int_equal(w(f, s, &h), 0);
	fclose(f);
	return buf;
}

static void test_share(void **state)
{
	struct ldgen_set s;

	fill(&s);
	assert_int_equal(s.n, 7);   /* a merged */
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = 0.99,
							       .cold_min_samples = 100 }), 0);
	assert_int_equal(s.total_samples, 100);
	assert_int_equal(s.nhot, 4);   /* 50+30+15+4 = 99 >= 99 */
	assert_int_equal(s.hot_samples, 99);
	assert_string_equal(s.v[0].name, "a");
	assert_string_equal(s.v[1].name, "b");
	assert_string_equal(s.v[2].name, "c");
	assert_string_equal(s.v[3].name, "d");
	assert_int_equal(s.v[4].cls, LDGEN_OTHER);   /* e: 1 sample, not hot, not cold */
	assert_true(s.cold_decided);
	assert_int_equal(s.ncold, 2);
	assert_string_equal(s.v[5].name, "y");       /* cold by address */
	assert_string_equal(s.v[6].name, "z");
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = 0.8 }), 0);
	assert_int_equal(s.nhot, 2);
	assert_false(s.cold_decided);                 /* 100 < default 1000 */
	assert_int_equal(s.ncold, 0);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = 1 }), 0);
	assert_int_equal(s.nhot, 5);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = 1.5 }), -EINVAL);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = -0.1 }), -EINVAL);
	ldgen_free(&s);
}

static void test_ties_and_tls(void **state)
{
	struct ldgen_set s;

	ldgen_init(&s);
	add(&s, "t2", ".data", 0x200, 10, true);
	add(&s, "t1", ".data", 0x100, 10, true);
	add(&s, "tls", ".tbss", 0x0, 80, true);
	assert_int_equal(ldgen_classify(&s, NULL), 0);
	/* tls holds most samples but cannot be placed; equal samples: lower address first */
	assert_int_equal(s.nhot, 2);
	assert_string_equal(s.v[0].name, "t1");
	assert_string_equal(s.v[1].name, "t2");
	assert_int_equal(s.v[2].cls, LDGEN_OTHER);
	/* a sampled row after the binary's symbols is a caller bug */
	add(&s, "u", ".data", 0x300, 0, false);
	assert_int_equal(ldgen_add(&s, "v", ".data", 0x400, 8, 1, 1, true), -EINVAL);
	ldgen_free(&s);
	ldgen_init(&s);
	assert_int_equal(ldgen_classify(&s, NULL), 0);   /* empty: nothing hot, no crash */
	assert_int_equal(s.nhot, 0);
	ldgen_free(&s);
}

/* Repeated store rows of one symbol (one per run) fold into one: samples summed, the
 * largest size, the first movable kind in arrival order; binary symbols find them. */
static void test_fold(void **state)
{
	struct ldgen_set s;

	ldgen_init(&s);
	add(&s, "b", ".data", 0x2000, 1, true);
	assert_int_equal(ldgen_add(&s, "a", "", 0x1000, 4, 3, 3000, true), 0);  /* unknown kind */
	assert_int_equal(ldgen_add(&s, "a", ".bss", 0x1000, 16, 5, 5000, true), 0);
	assert_int_equal(ldgen_add(&s, "a", ".rodata", 0x1000, 8, 7, 7000, true), 0);
	add(&s, "a", ".data", 0x1008, 2, true);   /* same name, other address: another symbol */
	add(&s, "a", ".data", 0x1000, 0, false);
	add(&s, "c", ".data", 0x3000, 0, false);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.nsampled, 3);
	assert_int_equal(s.v[0].address, 0x1000);
	assert_int_equal(s.v[0].samples, 15);
	assert_int_equal(s.v[0].est, 15000);
	assert_int_equal(s.v[0].size, 16);
	assert_int_equal(s.v[0].kind, LDGEN_BSS);
	assert_int_equal(s.v[1].address, 0x1008);
	ldgen_free(&s);
}

/* ldgen_add over n sampled rows costs O(n log n), not O(n^2): 200,000 rows (every symbol
 * twice) and as many binary symbols take well under a second of CPU (a linear search per
 * row took ~20 billion comparisons). CPU time, not wall time: the machine may be loaded. */
#define LDGEN_SCALE_ROWS 200000
#define LDGEN_SCALE_CPU_S 5.0

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_scale(void **state)
{
	struct ldgen_set s;
	char name[32];
	double t0 = cpu_seconds();

	ldgen_init(&s);
	for (unsigned i = 0; i < LDGEN_SCALE_ROWS; i++) {
		unsigned k = (i * 2654435761u) % (LDGEN_SCALE_ROWS / 2);

		snprintf(name, sizeof(name), "sym_%u", k);
		add(&s, name, ".data", 0x1000 + 8 * (uint64_t)k, 1, true);
	}
	for (unsigned k = 0; k < LDGEN_SCALE_ROWS; k++) {
		snprintf(name, sizeof(name), "sym_%u", k);
		add(&s, name, ".data", 0x1000 + 8 * (uint64_t)k, 0, false);
	}
	assert_int_equal(ldgen_classify(&s, NULL), 0);
	double used = cpu_seconds() - t0;

	assert_int_equal(s.n, LDGEN_SCALE_ROWS);
	assert_int_equal(s.nsampled, LDGEN_SCALE_ROWS / 2);
	assert_int_equal(s.total_samples, LDGEN_SCALE_ROWS);
	print_message("ldgen: %d rows in %.3f s of CPU\n", 2 * LDGEN_SCALE_ROWS, used);
	assert_true(used < LDGEN_SCALE_CPU_S);
	ldgen_free(&s);
}

static void test_kinds_and_names(void **state)
{
	assert_int_equal(ldgen_kind_of(".data"), LDGEN_DATA);
	assert_int_equal(ldgen_kind_of(".data.rel.ro"), LDGEN_RELRO);
	assert_int_equal(ldgen_kind_of(".bss"), LDGEN_BSS);
	assert_int_equal(ldgen_kind_of(".tdata"), LDGEN_UNMOVABLE);
	assert_int_equal(ldgen_kind_of(NULL), LDGEN_UNMOVABLE);
	assert_true(ldgen_name_ok("counter.0"));
	assert_true(ldgen_name_ok("_ZN3foo3barE"));
	assert_false(ldgen_name_ok(""));
	assert_false(ldgen_name_ok("a*b"));
	assert_false(ldgen_name_ok("a b"));
	assert_false(ldgen_name_ok("x)"));
	assert_false(ldgen_name_ok(NULL));
}

static void test_symbol_order(void **state)
{
	struct ldgen_set s;
	char *out, *body;

	fill(&s);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .cold_min_samples = 100 }), 0);
	out = render(ldgen_write_symbol_order, &s);
	assert_non_null(strstr(out, "# hot: 4 symbols"));
	assert_non_null(strstr(out, "# cold: 2 symbols"));
	assert_non_null(strstr(out, "#   cold y z\n"));
	body = strstr(out, "\na\n");
	assert_non_null(body);
	/* hot, hottest first, then every other sampled symbol (e): none left among the
	 * unsampled */
	assert_string_equal(body, "\na\nb\nc\nd\ne\n");
	assert_non_null(strstr(out, "# then 1 more sampled symbols below the hot share"));
	free(out);
	ldgen_free(&s);
	/* below the hot share: by samples, descending */
	ldgen_init(&s);
	add(&s, "p", ".data", 0x100, 5, true);
	add(&s, "q", ".data", 0x200, 1, true);
	add(&s, "r", ".bss", 0x300, 2, true);
	add(&s, "s", ".data", 0x400, 100, true);
	add(&s, "t", ".data", 0x500, 0, false);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .hot_share = 0.9 }), 0);
	assert_int_equal(s.nhot, 1);
	out = render(ldgen_write_symbol_order, &s);
	body = strstr(out, "\ns\n");
	assert_non_null(body);
	assert_string_equal(body, "\ns\np\nr\nq\n");
	free(out);
	ldgen_free(&s);
}

static void test_ld_script(void **state)
{
	struct ldgen_set s;
	char *out;

	fill(&s);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .cold_min_samples = 100 }), 0);
	out = render(ldgen_write_ld_script, &s);
	assert_non_null(strstr(out, "  .data.hot :\n  {\n    *(.data.a .data.rel.a .data.rel.local.a)\n"
				 "  }\n}\nINSERT BEFORE .data;\n"));
	assert_non_null(strstr(out, "  .data.unlikely :\n  {\n    *(.data.z .data.rel.z "
				 ".data.rel.local.z)\n  }\n}\nINSERT AFTER .data;\n"));
	assert_non_null(strstr(out, "  .rodata.hot :\n  {\n    *(.rodata.b)\n  }\n}\n"
				 "INSERT AFTER .rodata;\n"));
	assert_non_null(strstr(out, "  .bss.hot :\n  {\n    *(.bss.c)\n  }\n}\nINSERT BEFORE .bss;\n"));
	assert_non_null(strstr(out, "  .bss.unlikely :\n  {\n    *(.bss.y)\n  }\n}\nINSERT AFTER .bss;\n"));
	assert_non_null(strstr(out, "*(.data.rel.ro.d .data.rel.ro.local.d)\n  }\n}\n"
				 "INSERT BEFORE .data.rel.ro;\n"));
	assert_null(strstr(out, ".rodata.unlikely"));   /* no cold read-only data */
	assert_null(strstr(out, "*(.rodata.e)"));       /* neither hot nor cold */
	assert_int_equal(strncmp(out, "/* memprofd export t for /bin/x (build-id ab) */\n", 48), 0);
	free(out);
	/* cold read-only data follows the hot, or .rodata itself when none is hot */
	ldgen_free(&s);
	ldgen_init(&s);
	add(&s, "r1", ".rodata", 0x10, 500, true);
	add(&s, "r2", ".rodata", 0x20, 600, true);
	add(&s, "r3", ".rodata", 0x30, 0, false);
	assert_int_equal(ldgen_classify(&s, NULL), 0);
	out = render(ldgen_write_ld_script, &s);
	assert_non_null(strstr(out, "    *(.rodata.r2)\n    *(.rodata.r1)\n"));
	assert_non_null(strstr(out, "*(.rodata.r3)\n  }\n}\nINSERT AFTER .rodata.hot;\n"));
	free(out);
	ldgen_free(&s);
}

static void test_section_prefixes(void **state)
{
	struct ldgen_set s;
	char *out;

	fill(&s);
	assert_int_equal(ldgen_classify(&s, &(struct ldgen_opts){ .cold_min_samples = 100 }), 0);
	out = render(ldgen_write_section_prefixes, &s);
	assert_non_null(strstr(out, "\n--rename-section .data.a=.data.hot.a\n"
				 "--rename-section .data.rel.a=.data.rel.hot.a\n"
				 "--rename-section .data.rel.local.a=.data.rel.local.hot.a\n"));
	assert_non_null(strstr(out, "\n--rename-section .bss.y=.bss.unlikely.y\n"));
	assert_non_null(strstr(out, "\n--rename-section .data.rel.ro.local.d=.data.rel.ro.local.hot.d\n"));
	assert_null(strstr(out, ".rodata.e="));
	free(out);
	ldgen_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_ties_and_tls),
		cmocka_unit_test(test_fold),
		cmocka_unit_test(test_scale),
		cmocka_unit_test(test_kinds_and_names),
		cmocka_unit_test(test_symbol_order),
		cmocka_unit_test(test_ld_script),
		cmocka_unit_test(test_section_prefixes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
