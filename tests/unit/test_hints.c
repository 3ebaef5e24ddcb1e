/* compiler_feedback/hints.c: call-stack trie trimming (a uniform site collapses to the
 * site frame; a mixed site gets an ambiguous line and minimal distinguishing prefixes),
 * hint bytes, stable order, and the JSON variant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "compiler_feedback/hints.h"

static struct cf_line L(const char *fn, unsigned line)
{
	return (struct cf_line){ .function = (char *)fn, .file = (char *)"a.cc", .line = line };
}

#define S 1000000000ull
static void ctx(struct cf_ctx *x, struct cf_frame *f, struct cf_line *l, unsigned n,
		const uint64_t *offs, const char *const *names, bool cold)
{
	for (unsigned i = 0; i < n; i++) {
		l[i] = L(names[i], 10 + i);
		f[i] = (struct cf_frame){ .build_id = (char *)"ab", .offset = offs[i],
					  .lines = &l[i], .nlines = 1 };
	}
	*x = (struct cf_ctx){ .frames = f, .nframes = n };
	x->mib.alloc_count = 1;
	x->mib.total_size = 4096;
	x->mib.total_lifetime_ns = cold ? 300 * S : 1000;
	x->mib.total_access_count = cold ? 0 : 100;
	/* One access per sample: 4096 B would have given millions of samples if hot. */
	x->cls = classify_mib(&x->mib, &(struct classify_evidence){ .access_weight = 1 });
}

static char *write_hints(struct cf_ctx *v, size_t n, bool json)
{
	struct cf_ctxs c = { .v = v, .n = n };
	struct export_opts o = { .build_id = "ab", .path = "/bin/x" };
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_int_equal(hints_write(m, &c, &o, json), 0);
	fclose(m);
	return buf;
}

static void test_trim(void **state)
{
	static const uint64_t oc[] = { 0x10, 0x20, 0x30 }, oh[] = { 0x10, 0x40, 0x30 },
		ou[] = { 0x50, 0x60 };
	static const char *const nc[] = { "wrap", "cold_path", "main" },
		*const nh[] = { "wrap", "hot_path", "main" }, *const nu[] = { "other", "main" };
	struct cf_frame f[3][3];
	struct cf_line l[3][3];
	struct cf_ctx v[3];

	ctx(&v[0], f[0], l[0], 3, oc, nc, true);
	ctx(&v[1], f[1], l[1], 3, oh, nh, false);
	ctx(&v[2], f[2], l[2], 2, ou, nu, false);
	char *t = write_hints(v, 3, false);

	assert_non_null(strstr(t, "# build-id: ab\n"));
	assert_non_null(strstr(t, "ambiguous\t222\t8192\t2\twrap a.cc:10\n"));
	assert_non_null(strstr(t, "cold\t1\t4096\t1\twrap a.cc:10 <- cold_path a.cc:11\n"));
	assert_non_null(strstr(t, "notcold\t128\t4096\t1\twrap a.cc:10 <- hot_path a.cc:11\n"));
	assert_non_null(strstr(t, "notcold\t128\t4096\t1\tother a.cc:10\n"));  /* uniform site */
	assert_null(strstr(t, "main"));      /* no frame beyond the distinguishing prefix */
	assert_true(strstr(t, "other a.cc:10") < strstr(t, "\nambiguous"));   /* byte order */
	char *t2 = write_hints(v, 3, false);

	assert_string_equal(t, t2);
	free(t2);
	free(t);
	t = write_hints(v, 3, true);
	assert_non_null(strstr(t, "\"class\": \"cold\", \"hint\": 1"));
	assert_non_null(strstr(t, "\"function\": \"cold_path\""));
	free(t);
}

/* A cold-looking context (no access in 300 s) whose samples could not have been seen (1e9
 * accesses per sample: 4096 B * 300 s * 1000 / 1e9 = 1.2 expected) gets no cold hint. */
static void test_unknown(void **state)
{
	static const uint64_t oc[] = { 0x10, 0x20 };
	static const char *const nc[] = { "wrap", "main" };
	struct cf_frame f[2];
	struct cf_line l[2];
	struct cf_ctx v;

	ctx(&v, f, l, 2, oc, nc, true);
	assert_int_equal(v.cls, CLASSIFY_COLD);
	v.cls = classify_mib(&v.mib, &(struct classify_evidence){ .access_weight = 1e9 });
	assert_int_equal(v.cls, CLASSIFY_UNKNOWN);
	char *t = write_hints(&v, 1, false);

	assert_non_null(strstr(t, "\nunknown\t128\t4096\t1\twrap a.cc:10\n"));
	assert_null(strstr(t, "\ncold\t"));
	free(t);
	t = write_hints(&v, 1, true);
	assert_non_null(strstr(t, "\"class\": \"unknown\", \"hint\": 128"));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_trim),
					    cmocka_unit_test(test_unknown) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
