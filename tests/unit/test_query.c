/* The query reporter: JSON output parsed by a strict validator (RFC 8259, UTF-8) with the
 * DESIGN.md fields in order, hostile symbol names escaped, classification thresholds,
 * CSV quoting, table width <= FMT_TABLE_WIDTH, human units, time arguments, and the
 * exit codes and one-line errors of cmd_query(). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"

#include "reporter/classify.h"
#include "sampler/sampler.h"
#include "reporter/format.h"
#include "reporter/query.h"
#include "store/store.h"

/* ---- a strict JSON validator ---- */

struct jp { const char *p; };

static bool j_value(struct jp *j, int depth);

static void j_ws(struct jp *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static bool j_lit(struct jp *j, const char *w)
{
	size_t n = strlen(w);

	if (strncmp(j->p, w, n))
		return false;
	j->p += n;
	return true;
}

static bool j_string(struct jp *j)
{
	const unsigned char *p = (const unsigned char *)j->p;

	if (*p++ != '"')
		return false;
	for (;;) {
		unsigned c = *p;

		if (c == '"') {
			j->p = (const char *)p + 1;
			return true;
		}
		if (c < 0x20)
			return false;            /* raw control character (or end of text) */
		if (c == '\\') {
			p++;
			if (strchr("\"\\/bfnrt", *p) && *p) {
				p++;
				continue;
			}
			if (*p != 'u')
				return false;
			for (int i = 1; i <= 4; i++)
				if (!isxdigit(p[i]))
					return false;
			p += 5;
			continue;
		}
		if (c < 0x80) {
			p++;
			continue;
		}
		int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 :
			c >= 0xc2 && c <= 0xdf ? 2 : 0;

		if (!n)
			return false;
		for (int i = 1; i < n; i++)
			if ((p[i] & 0xc0) != 0x80)
				return false;
		/* overlong 3- and 4-byte forms, UTF-16 surrogates, above U+10FFFF */
		if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
		    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
			return false;
		p += n;
	}
}

static bool j_number(struct jp *j)
{
	const char *p = j->p;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (isdigit((unsigned char)*p))
			p++;
	else
		return false;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p))
			p++;
	}
	j->p = p;
	return true;
}

static bool j_value(struct jp *j, int depth)
{
	if (depth > 32)
		return false;
	j_ws(j);
	switch (*j->p) {
	case '{':
		j->p++;
		j_ws(j);
		if (*j->p == '}') {
			j->p++;
			return true;
		}
		for (;;) {
			j_ws(j);
			if (!j_string(j))
				return false;
			j_ws(j);
			if (*j->p++ != ':')
				return false;
			if (!j_value(j, depth + 1))
				return false;
			j_ws(j);
			if (*j->p == ',') {
				j->p++;
				continue;
			}
			return *j->p++ == '}';
		}
	case '[':
		j->p++;
		j_ws(j);
		if (*j->p == ']') {
			j->p++;
			return true;
		}
		for (;;) {
			if (!j_value(j, depth + 1))
				return false;
			j_ws(j);
			if (*j->p == ',') {
				j->p++;
				continue;
			}
			return *j->p++ == ']';
		}
	case '"': return j_string(j);
	case 't': return j_lit(j, "true");
	case 'f': return j_lit(j, "false");
	case 'n': return j_lit(j, "null");
	default: return j_number(j);
	}
}

static bool json_valid(const char *text)
{
	struct jp j = { text };

	if (!j_value(&j, 0))
		return false;
	j_ws(&j);
	return *j.p == '\0';
}

static void test_validator_itself(void **state)
{
	assert_true(json_valid("[]"));
	assert_true(json_valid("[{\"a\": [1, -2.5e3, true, null, \"\\u00e9\\n\"]}]\n"));
	assert_false(json_valid("[\"a\nb\"]"));
	assert_false(json_valid("[\"\xff\"]"));
	assert_false(json_valid("[1,]"));
	assert_false(json_valid("[01]"));
	assert_false(json_valid("{\"a\": nan}"));
	assert_false(json_valid("[] []"));
	assert_false(json_valid("[\"\xed\xa0\x80\"]"));      /* a surrogate */
	assert_false(json_valid("[\"\xe0\x80\xaf\"]"));      /* overlong '/' */
	assert_true(json_valid("[\"\xf0\x9f\x98\x80\"]"));
}

/* ---- fixtures ---- */

struct fixture {
	char dir[64], db[128];
	struct store *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/test_query.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->db, sizeof(f->db), "%s/memprofd.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char p[160];
	const char *sfx[] = { "", "-wal", "-shm" };

	store_close(f->s);
	for (unsigned i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", f->db, sfx[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/junk", f->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/out", f->dir);
	unlink(p);
	rmdir(f->dir);
	free(f);
	return 0;
}

#define OK(expr) do { int _r = (expr); if (_r < 0) fail_msg("%s: %d", #expr, _r); } while (0)

static const char hostile[] = "we\"ird\\ \n\t\x01 \xff\xfe caf\xc3\xa9 \xed\xa0\x80 end";

/* DESIGN.md's example context, plus a hot one and a cold one, plus hostile names. */
static void build(struct fixture *f)
{
	struct store *s;
	char err[256];

	if (store_open(&s, f->db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);

	struct store_proc app = { .pid = 7, .start_ns = 1, .exe = "/srv/app", .build_id = "abcd01",
				  .comm = "app" };
	struct store_proc odd = { .pid = 8, .start_ns = 2, .exe = "/srv/o,d\"d", .build_id = "",
				  .comm = "o\x1b[31md" };
	struct store_frame ex[] = {
		{ "abcd01", "/srv/app", 0x1234, "cold_path", "_Z9cold_pathv" },
		{ "abcd01", "/srv/app", 0x1300, NULL, NULL },
		{ "abcd01", "/srv/app", 0x1400, "main", NULL },
	};
	struct store_frame hot[] = {
		{ "abcd01", "/srv/app", 0x2000, "hot_loop", NULL },
	};
	struct store_frame cold[] = {
		{ "abcd01", "/srv/app", 0x3000, "cache_fill", NULL },
	};
	char longname[600];

	memset(longname, 'N', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memcpy(longname, "std::vector<std::pair<int, std::string>>::", 42);
	memcpy(longname + sizeof(longname) - 24, "_M_realloc_insert(int&)", 24);

	struct store_frame weird[] = {
		{ "", "/srv/o,d\"d", 0x10, hostile, NULL },
		{ "", "/srv/o,d\"d", 0x20, longname, NULL },
		{ "", "/srv/o,d\"d", 0x30, "a,b", NULL },
		{ "", "/srv/o,d\"d", 0x40, "ns::f(int, char) const", NULL },
	};
	struct mib mex = { .alloc_count = 7, .total_size = 7340032, .min_size = 1048576,
			   .max_size = 1048576, .total_lifetime_ns = 21000000000ull + 999999,
			   .min_lifetime_ns = 2900000000ull, .max_lifetime_ns = 3100000000ull,
			   .access_samples = 3, .total_access_count = 30000,
			   .min_access_count = 1, .max_access_count = 20000 };
	struct mib mhot = { .alloc_count = 1, .total_size = 64, .min_size = 64, .max_size = 64,
			    .total_lifetime_ns = 1000000, .min_lifetime_ns = 1000000,
			    .max_lifetime_ns = 1000000, .access_samples = 5,
			    .total_access_count = 100000, .total_access_bytes = 400000 };
	struct mib mcold = { .alloc_count = 2, .total_size = 2048, .min_size = 1024,
			     .max_size = 1024, .total_lifetime_ns = 1000000000000ull,
			     .min_lifetime_ns = 500000000000ull, .max_lifetime_ns = 500000000000ull };
	struct mib mweird = mhot;

	mweird.total_access_count = 10;
	OK(store_begin(s));
	OK(store_put_mib(s, &app, 1, ex, 3, 0, &mex));
	OK(store_put_mib(s, &app, 2, hot, 1, 0, &mhot));
	OK(store_put_mib(s, &app, 3, cold, 1, 0, &mcold));
	OK(store_put_mib(s, &odd, 4, weird, 4, 0, &mweird));
	struct store_frame longleaf[] = {
		{ "", "/srv/o,d\"d", 0x50, longname, NULL },
		{ "", "/srv/o,d\"d", 0x60, "main", NULL },
	};

	OK(store_put_mib(s, &odd, 5, longleaf, 2, 0, &mweird));
	struct store_frame tmpl[] = {
		{ "", "/srv/o,d\"d", 0x70, "void std::vector<std::pair<int, long> >::push_back("
		  "std::pair<int, long>&&)", NULL },
		{ "", "/srv/o,d\"d", 0x60, "main", NULL },
	};

	OK(store_put_mib(s, &odd, 6, tmpl, 2, 0, &mweird));
	OK(store_commit(s));

	int64_t run;
	struct store_run rd = { .command = "app \"quoted\", arg", .alloc_mode = "exact",
				.access_mode = "soft", .settings = "{\"freq\": 99}",
				.started_ns = 1700000000000000000ll };
	struct store_run_stats st = { .events = 123456, .drops_ringbuf = 1, .status = "ok",
				      .ended_ns = 1700000003000000000ll };

	OK(store_run_begin(s, &rd, &run));
	OK(store_run_update(s, run, &st));
	/* 1e4 accesses per sample: every context has the evidence for a class. */
	OK(store_put_access_class(s, run, "heap", 10, 100000));
	store_close(s);
	if (store_open(&f->s, f->db, STORE_RDONLY, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

/* Runs a printer into memory. */
#define CAPTURE(buf, call) do { \
	size_t _len; FILE *fp = open_memstream(&(buf), &_len); \
	assert_non_null(fp); OK(call); fclose(fp); } while (0)

static const char *after(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	if (!p)
		fail_msg("missing %s in %s", needle, hay);
	return p + strlen(needle);
}

static void test_contexts_json(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	struct store_ctx_filter cf = { .binary = "abcd01" };

	CAPTURE(out, query_print_contexts(fp, f->s, &cf, QUERY_JSON));
	assert_true(json_valid(out));
	assert_int_equal(out[0], '[');

	/* The first element (most bytes) is DESIGN.md's example, fields in contract order. */
	const char *p = out;
	const char *keys[] = { "{\"build_id\": \"abcd01\"", "\"binary\": \"/srv/app\"",
		"\"frames\": [{\"function\": \"cold_path\", \"file\": null, \"line\": null, "
		"\"column\": null, \"inlined\": false, \"address\": \"0x1234\", "
		"\"module\": \"/srv/app\", \"build_id\": \"abcd01\"}, "
		"{\"function\": null, \"file\": null, \"line\": null, \"column\": null, "
		"\"inlined\": false, \"address\": \"0x1300\", \"module\": \"/srv/app\", "
		"\"build_id\": \"abcd01\"}, {\"function\": \"main\"",
		"\"truncated\": false,", "\"alloc_count\": 7,", "\"total_size\": 7340032,", "\"min_size\": 1048576,",
		"\"max_size\": 1048576,", "\"total_lifetime_ms\": 21000,",
		"\"min_lifetime_ms\": 2900,", "\"max_lifetime_ms\": 3100,",
		"\"access_samples\": 3,", "\"est_accesses\": 30000,",
		"\"lifetime_access_density\": ", "\"class\": \"notcold\"",
		/* issue 17: accesses estimated without widths (the example's row, as before
		 * schema 17): bytes unknown */
		"\"est_access_bytes\": null,",
		/* Issue 21's additive fields: nothing lived at exit; no allocation samples on
		 * record (the fixture's rows, as schema < 9): null intervals; 3 access samples
		 * of 30000: Garwood's [0.619, 8.767] x 10000, marked as few. */
		"\"live_at_exit_count\": 0,", "\"live_at_exit_bytes\": 0,",
		"\"alloc_samples\": null,", "\"total_size_hi\": null,",
		"\"est_accesses_lo\": 6186,", "\"est_accesses_hi\": 87673,",
		"\"few_samples\": true}" };

	for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		p = after(p, keys[i]);

	double d = strtod(strstr(out, "\"lifetime_access_density\": ") + 28, NULL);
	struct mib m = { .alloc_count = 7, .total_size = 7340032,
			 .total_lifetime_ns = 21000000000ull + 999999, .total_access_count = 30000 };

	assert_true(fabs(d / store_lifetime_access_density(&m) - 1) < 1e-8);
	assert_true(fabs(d - 0.0014) < 0.0001);
	assert_non_null(strstr(out, "\"function\": \"hot_loop\""));
	assert_non_null(strstr(out, "\"class\": \"hot\", \"est_access_bytes\": 400000"));
	assert_non_null(strstr(out, "\"function\": \"cache_fill\""));
	assert_non_null(strstr(out, "\"class\": \"cold\", \"est_access_bytes\": 0"));
	assert_non_null(strstr(out, "\"class\": \"cold\""));
	assert_null(strstr(out, "o,d"));       /* the other binary is filtered out */
	free(out);

	/* All of it, hostile names included, is still valid JSON with exact escapes. */
	CAPTURE(out, query_print_contexts(fp, f->s, NULL, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"function\": \"we\\\"ird\\\\ \\n\\t\\u0001 \\ufffd\\ufffd "
				    "caf\xc3\xa9 \\ufffd\\ufffd\\ufffd end\""));
	assert_non_null(strstr(out, "\"binary\": \"/srv/o,d\\\"d\""));
	assert_non_null(strstr(out, "\"build_id\": \"\""));
	free(out);

	/* Limit and sort apply; an empty result is an empty array. */
	cf = (struct store_ctx_filter){ .sort = STORE_SORT_DENSITY, .limit = 1 };
	CAPTURE(out, query_print_contexts(fp, f->s, &cf, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "hot_loop"));
	assert_null(strstr(out, "cold_path"));
	free(out);
	cf = (struct store_ctx_filter){ .pid = 12345 };
	CAPTURE(out, query_print_contexts(fp, f->s, &cf, QUERY_JSON));
	assert_string_equal(out, "[]\n");
	free(out);
}

static void test_other_reports_json(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	CAPTURE(out, query_print_binaries(fp, f->s, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"build_id\": \"abcd01\", \"binary\": \"/srv/app\", "
				    "\"processes\": 1, \"contexts\": 3"));
	free(out);
	CAPTURE(out, query_print_processes(fp, f->s, NULL, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"pid\": 7, \"start_ns\": 1"));
	assert_non_null(strstr(out, "\"comm\": \"o\\u001b[31md\""));
	assert_non_null(strstr(out, "\"exit_ns\": null"));
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"command\": \"app \\\"quoted\\\", arg\""));
	assert_non_null(strstr(out, "\"settings\": \"{\\\"freq\\\": 99}\""));
	assert_non_null(strstr(out, "\"events\": 123456, \"drops_ringbuf\": 1"));
	free(out);
}

static void test_classification(void **state)
{
	/* density = accesses / size / avg lifetime s; size 1000, one object. */
	struct mib m = { .alloc_count = 1, .total_size = 1000 };
	/* One access per sample: every context here expects thousands at the hot threshold. */
	const struct classify_evidence ev = { .access_weight = 1 };

	m.total_lifetime_ns = CLASSIFY_COLD_MIN_AVG_LIFETIME_NS;          /* exactly 200 s */
	m.total_access_count = 0;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_COLD);                /* never accessed */
	m.total_access_count = 9999;                                      /* 0.049995 */
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_COLD);
	m.total_access_count = 10000;                                     /* 0.05: not < */
	assert_true(classify_density(&m) == 0.05);
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_NOTCOLD);
	m.total_access_count = 0;
	m.total_lifetime_ns = CLASSIFY_COLD_MIN_AVG_LIFETIME_NS - 1;      /* just short */
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_NOTCOLD);
	/* Average, not total: two objects of 150 s each are not cold. */
	m.alloc_count = 2;
	m.total_size = 2000;
	m.total_lifetime_ns = 300000000000ull;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_NOTCOLD);
	m.total_lifetime_ns = 400000000000ull;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_COLD);
	/* Hot: strictly above 1000 per byte per second. */
	m = (struct mib){ .alloc_count = 1, .total_size = 1, .total_lifetime_ns = 1000000000 };
	m.total_access_count = 1000;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_NOTCOLD);
	m.total_access_count = 1001;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_HOT);
	/* Sub-millisecond lifetimes count as 1 ms: 2 accesses of 1 byte -> 2000. */
	m = (struct mib){ .alloc_count = 1, .total_size = 1, .total_lifetime_ns = 10,
			  .total_access_count = 2 };
	assert_true(classify_density(&m) == 2000.0);
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_HOT);
	m = (struct mib){0};
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_UNKNOWN);     /* nothing expected */
	assert_string_equal(classify_name(CLASSIFY_COLD), "cold");
	assert_string_equal(classify_name(CLASSIFY_NOTCOLD), "notcold");
	assert_string_equal(classify_name(CLASSIFY_HOT), "hot");
	assert_string_equal(classify_name(CLASSIFY_UNKNOWN), "unknown");
}

/* Cold needs evidence: at 1e7 accesses per sample, 1000 B living 200 s would have given
 * 1000 * 1000 * 200 / 1e7 = 20 samples at the hot threshold; 64 B only 1.28. */
static void test_classification_evidence(void **state)
{
	struct classify_evidence ev = { .access_weight = 1e7 };

	assert_int_equal(CLASSIFY_SAMPLER_MEAN, SAMPLER_DEFAULT_MEAN);
	struct mib big = { .alloc_count = 1, .total_size = 1000,
			   .total_lifetime_ns = CLASSIFY_COLD_MIN_AVG_LIFETIME_NS };
	struct mib small = big;

	small.total_size = 64;
	assert_true(fabs(classify_expected_hot_samples(&big, &ev) - 20) < 1e-9);
	assert_int_equal(classify_mib(&big, &ev), CLASSIFY_COLD);
	assert_int_equal(classify_mib(&small, &ev), CLASSIFY_UNKNOWN);
	/* Just below and at the minimum: 3 samples expected is enough. */
	big.total_size = 149;   /* 2.98 */
	assert_int_equal(classify_mib(&big, &ev), CLASSIFY_UNKNOWN);
	big.total_size = 150;   /* 3.0 */
	assert_int_equal(classify_mib(&big, &ev), CLASSIFY_COLD);
	/* Seen accesses decide what missing ones cannot: n samples at density d would have
	 * been n * 1000 / d at the hot threshold. Notcold at >= the cold density... */
	small.access_samples = 1;
	small.total_access_count = 1000;          /* 1000 / 64 / 200 = 0.078 */
	assert_int_equal(classify_mib(&small, &ev), CLASSIFY_NOTCOLD);
	small.total_access_count = 100;           /* ...cold below it (0.0078, 200 s) */
	assert_int_equal(classify_mib(&small, &ev), CLASSIFY_COLD);
	small.total_lifetime_ns = 1000000;        /* 1e5 / 64 B / 1 ms: hot on what was seen */
	small.total_access_count = 100000;
	assert_int_equal(classify_mib(&small, &ev), CLASSIFY_HOT);
	/* No access source: no decision but hot. */
	assert_int_equal(classify_mib(&big, NULL), CLASSIFY_UNKNOWN);
	ev.access_weight = 0;
	assert_int_equal(classify_mib(&big, &ev), CLASSIFY_UNKNOWN);
	/* Sampled mode: 1000 objects of 64 B stand for 64000 B, of which the sampler watched
	 * 64000 * (1 - exp(-64 / 512 KiB)) ~ 7.8 B. */
	struct mib w = { .alloc_count = 1000, .total_size = 64000,
			 .total_lifetime_ns = 1000 * CLASSIFY_COLD_MIN_AVG_LIFETIME_NS };

	ev = (struct classify_evidence){ .access_weight = 1e4 };
	assert_int_equal(classify_mib(&w, &ev), CLASSIFY_COLD);      /* exact: 1.28e6 expected */
	ev.sampler_mean = 512 << 10;
	assert_true(fabs(classify_expected_hot_samples(&w, &ev) - 156.25) < 0.1);
	ev.access_weight = 1e6;                                      /* 1.56 expected */
	assert_int_equal(classify_mib(&w, &ev), CLASSIFY_UNKNOWN);
}

/* A context's own watches are evidence (issue 15): at the hot threshold a watched 8-byte
 * granule takes 8000 traps a second, so 0.375 ms watched with no trap is 3 expected and
 * none seen, whatever the store's soft samples say. */
static void test_classification_watch_evidence(void **state)
{
	struct classify_evidence ev = { .access_weight = 1e6, .sampler_mean = 512 << 10 };
	struct mib m = { .alloc_count = 100, .total_size = 100 * 4096,
			 .total_lifetime_ns = 100 * 20000 };      /* 20 us each */

	(void)state;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_UNKNOWN);   /* no watch */
	m.watch_ns = 374000;                                         /* 2.99 expected */
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_UNKNOWN);
	m.watch_ns = 375000;
	assert_true(classify_expected_hot_samples(&m, &ev) >= 3.0);
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_NOTCOLD);   /* short-lived */
	assert_int_equal(classify_mib(&m, NULL), CLASSIFY_NOTCOLD);  /* its own, without ev */
	m.total_lifetime_ns = 100 * CLASSIFY_COLD_MIN_AVG_LIFETIME_NS;
	assert_int_equal(classify_mib(&m, &ev), CLASSIFY_COLD);
	double lo, hi;

	classify_density_interval(&m, &ev, &lo, &hi);
	assert_true(hi < INFINITY && hi > 0);
}

static int run_cmd(struct fixture *f, char **out, char **err, int argc, ...);

/* The watch evidence goes through the store: written, read back, summed per context. */
static void test_watch_evidence_store(void **state)
{
	struct fixture *f = *state;
	struct store *w;
	char e[256], *out = NULL, *err = NULL;

	if (store_open(&w, f->db, STORE_RDWR, e, sizeof(e)) < 0)
		fail_msg("%s", e);
	struct store_proc p = { .pid = 98, .start_ns = 8, .exe = "/srv/w", .build_id = "beef" };
	struct store_frame seen = { "beef", "/srv/w", 0x10, "watched_leaf", NULL };
	struct store_frame unseen = { "beef", "/srv/w", 0x20, "unwatched_leaf", NULL };
	struct mib m = { .alloc_count = 1, .total_size = 8, .min_size = 8, .max_size = 8,
			 .total_lifetime_ns = 1000000, .min_lifetime_ns = 1000000,
			 .max_lifetime_ns = 1000000 };

	OK(store_put_mib(w, &p, 91, &unseen, 1, 0, &m));
	m.watch_ns = 200000;      /* two rows: 0.4 ms together, 3.2 traps expected */
	OK(store_put_mib(w, &p, 92, &seen, 1, 0, &m));
	OK(store_put_mib(w, &p, 92, &seen, 1, 1, &m));
	store_close(w);
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "contexts", "--db", f->db,
				 "--format", "json"), 0);
	const char *a = strstr(out, "\"watched_leaf\""), *b = strstr(out, "\"unwatched_leaf\"");

	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(strstr(a, "\"class\": \""));
	assert_true(!strncmp(strstr(a, "\"class\": \"") + 10, "notcold\"", 8));
	assert_true(!strncmp(strstr(b, "\"class\": \"") + 10, "unknown\"", 8));
	free(out); free(err);
}

static void test_csv(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;
	struct { const char *in, *want; } cases[] = {
		{ "plain", "plain" }, { "a,b", "\"a,b\"" }, { "say \"hi\"", "\"say \"\"hi\"\"\"" },
		{ "two\nlines", "\"two\nlines\"" }, { "cr\r", "\"cr\r\"" }, { "", "" },
		{ NULL, "" }, { " spaced ", " spaced " },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CAPTURE(out, (fmt_csv_field(fp, cases[i].in), 0));
		assert_string_equal(out, cases[i].want);
		free(out);
	}
	build(f);
	CAPTURE(out, query_print_contexts(fp, f->s, NULL, QUERY_CSV));
	static const char header[] = "build_id,binary,frames,alloc_count,total_size,min_size,"
		"max_size,total_lifetime_ms,min_lifetime_ms,max_lifetime_ms,"
		"access_samples,est_accesses,lifetime_access_density,class,live_at_exit_count,"
		"live_at_exit_bytes,alloc_samples,alloc_count_lo,alloc_count_hi,total_size_lo,"
		"total_size_hi,est_accesses_lo,est_accesses_hi,few_samples\r\n";

	assert_true(!strncmp(out, header, strlen(header)));
	assert_non_null(strstr(out, "\r\nabcd01,/srv/app,cold_path;0x1300;main,7,7340032,1048576,"
				    "1048576,21000,2900,3100,3,30000,"));
	assert_non_null(strstr(out, ",/srv/app,hot_loop,1,64,64,64,1,1,1,5,100000,"));
	assert_non_null(strstr(out, ",hot,0,0,,,,,,"));   /* unknown bounds are empty */
	/* A binary path with a comma and a quote, frames with a comma: quoted, quotes doubled. */
	assert_non_null(strstr(out, "\r\n,\"/srv/o,d\"\"d\",\"we\"\"ird"));
	assert_non_null(strstr(out, ";a,b;ns::f(int, char) const\","));
	free(out);
}

static void assert_width(const char *text, size_t max)
{
	size_t lines = 0;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		/* One column per byte, but for U+00B1 (the legend's and cells' "±": two bytes,
		 * one column). */
		size_t cols = len;

		for (size_t i = 0; i < len; i++) {
			if ((unsigned char)p[i] == 0xc2 && i + 1 < len && (unsigned char)p[i + 1] == 0xb1) {
				i++;
				cols--;
				continue;
			}
			assert_true(p[i] >= 0x20 && p[i] < 0x7f);
		}
		if (cols > max)
			fail_msg("line of %zu columns: %.*s", cols, (int)len, p);
		lines++;
		p += len + (nl ? 1 : 0);
	}
	assert_true(lines > 0);
}

static void test_table_width(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	CAPTURE(out, query_print_contexts(fp, f->s, NULL, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	/* 100 columns: too narrow for a stack column beside the fixed ones, so each stack
	 * goes under its row, whole (issue 21); no allocation samples on record: "?"; 3
	 * access samples: a "±" interval and the few-samples '*'. */
	assert_non_null(strstr(out, "\n  7.0 MiB     ?      7    3.0 s         -    30.0k \u00b1136%"
				    "  0.00136 notcold* app\n    cold_path < app+0x1300 < main\n"));
	/* Control and non-ASCII bytes become '?'; a stack too long wraps, each continued
	 * line starting "< ". */
	assert_non_null(strstr(out, "\n    we\"ird\\ ??? ?? caf?? ??? end\n    < std::vector<...>::"));
	assert_non_null(strstr(out, "\n    < a,b < ns::f\n"));
	/* A name too long alone keeps both ends, without its parameter list. */
	assert_non_null(strstr(out, "NNN...NNN"));
	assert_non_null(strstr(out, "NNN_M_realloc_insert\n"));
	/* The density's unit is said once. */
	assert_non_null(strstr(out, "ACC/B/s: lifetime access\ndensity, estimated accesses per byte"));
	assert_null(strstr(out, "(int&)"));
	assert_non_null(strstr(out, "\n    std::vector<std::pair<int, long> >::push_back < main\n"));
	free(out);
	CAPTURE(out, query_print_binaries(fp, f->s, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	free(out);
	CAPTURE(out, query_print_processes(fp, f->s, NULL, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	assert_non_null(strstr(out, "o?[31md"));     /* no terminal escapes get through */
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	assert_non_null(strstr(out, "2023-11-14T22:13:20Z    3.0 s ok"));
	free(out);
	/* Empty store tables say so. */
	struct store_ctx_filter none = { .pid = 999 };

	CAPTURE(out, query_print_contexts(fp, f->s, &none, QUERY_TABLE));
	assert_non_null(strstr(out, "(no allocation contexts)"));
	free(out);
}

static void test_units(void **state)
{
	char b[FMT_BUF];
	uint64_t vals[] = { 0, 1, 999, 1000, 1023, 1024, 1048575, 1048576, 7340032,
			    999949, 999950, 1000000, 123456789012ull, UINT64_MAX };

	assert_string_equal(fmt_bytes(b, 0), "0 B");
	assert_string_equal(fmt_bytes(b, 999), "999 B");
	assert_string_equal(fmt_bytes(b, 1536), "1.5 KiB");
	assert_string_equal(fmt_bytes(b, 7340032), "7.0 MiB");
	assert_string_equal(fmt_bytes(b, UINT64_MAX), "16.0 EiB");
	assert_string_equal(fmt_count(b, 9999), "9999");
	assert_string_equal(fmt_count(b, 30000), "30.0k");
	assert_string_equal(fmt_count(b, 999950), "1.0M");
	assert_string_equal(fmt_duration_ns(b, 500000), "0.5 ms");
	assert_string_equal(fmt_duration_ns(b, 3000000000ull), "3.0 s");
	assert_string_equal(fmt_duration_ns(b, 100000000000000ull), "27.8 h");
	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		assert_true(strlen(fmt_bytes(b, vals[i])) <= FMT_BYTES_MAX);
		assert_true(strlen(fmt_count(b, vals[i])) <= FMT_COUNT_MAX);
		assert_true(strlen(fmt_duration_ns(b, vals[i])) <= FMT_DURATION_MAX);
		assert_true(strlen(fmt_duration_ns(b, vals[i] * 1000)) <= FMT_DURATION_MAX);
	}
	double ds[] = { 0, 1e-9, 0.00136, 1, 999.5, 12345.678, 1e22 };

	for (unsigned i = 0; i < sizeof(ds) / sizeof(ds[0]); i++)
		assert_true(strlen(fmt_density(b, ds[i])) <= FMT_DENSITY_MAX);

	char cell[16];

	assert_int_equal(fmt_cell(cell, 10, "short"), 5);
	assert_string_equal(cell, "short");
	assert_int_equal(fmt_cell(cell, 10, "much too long for it"), 10);
	assert_string_equal(cell, "much to...");
	fmt_cell(cell, 10, "a\tb\x80");
	assert_string_equal(cell, "a?b?");
	fmt_cell(cell, 10, NULL);
	assert_string_equal(cell, "");

	char fn[64];

	fmt_func_short(fn, sizeof(fn), "ns::C::f(int, std::pair<a, b>) const");
	assert_string_equal(fn, "ns::C::f");
	fmt_func_short(fn, sizeof(fn), "(anonymous namespace)::g(char*)");
	assert_string_equal(fn, "(anonymous namespace)::g");
	fmt_func_short(fn, sizeof(fn), "operator()(int) &&");
	assert_string_equal(fn, "operator()");
	fmt_func_short(fn, sizeof(fn), "plain_c");
	assert_string_equal(fn, "plain_c");
	fmt_func_short(fn, sizeof(fn), "(weird)");
	assert_string_equal(fn, "(weird)");
	/* Return types go with the parameter list; an operator's own spaces stay. */
	fmt_func_short(fn, sizeof(fn), "void std::vector<int>::f<a::b<c> >(int) const");
	assert_string_equal(fn, "std::vector<int>::f<a::b<c> >");
	fmt_func_short(fn, sizeof(fn), "unsigned long (anonymous namespace)::g(char*)");
	assert_string_equal(fn, "(anonymous namespace)::g");
	fmt_func_short(fn, sizeof(fn), "void* ns::C::operator new[](unsigned long)");
	assert_string_equal(fn, "ns::C::operator new[]");
	fmt_func_short(fn, sizeof(fn), "odd name without parameters");
	assert_string_equal(fn, "odd name without parameters");

	/* Compact: template argument lists collapsed, an operator's brackets kept. */
	struct { const char *in, *want; } compact[] = {
		{ "void std::vector<std::pair<int, long>, std::allocator<std::pair<int, long> > >::"
		  "_M_realloc_insert<int&>(int&)", "std::vector<...>::_M_realloc_insert<...>" },
		{ "std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char)",
		  "std::operator<< <...>" },
		{ "a<b>::operator<=>(x) const", "a<...>::operator<=>" },
		{ "ns::C::operator->() const", "ns::C::operator->" },
		{ "f<>()", "f<>" },
		{ "plain_c", "plain_c" },
	};

	for (unsigned i = 0; i < sizeof(compact) / sizeof(compact[0]); i++) {
		fmt_func_compact(fn, sizeof(fn), compact[i].in);
		assert_string_equal(fn, compact[i].want);
	}
	fmt_func_compact(fn, 8, compact[0].in);
	assert_string_equal(fn, "std::ve");
}

static void test_parse_time(void **state)
{
	const int64_t now = 1700000000ll * 1000000000;
	int64_t t;

	assert_int_equal(query_parse_time("1700000000", now, &t), 0);
	assert_true(t == now);
	assert_int_equal(query_parse_time("1500ms", now, &t), 0);
	assert_true(t == 1500000000);
	assert_int_equal(query_parse_time("42ns", now, &t), 0);
	assert_true(t == 42);
	assert_int_equal(query_parse_time("-10m", now, &t), 0);
	assert_true(t == now - 600ll * 1000000000);
	assert_int_equal(query_parse_time("-2h", now, &t), 0);
	assert_true(t == now - 7200ll * 1000000000);
	assert_int_equal(query_parse_time("-1d", now, &t), 0);
	assert_true(t == now - 86400ll * 1000000000);
	assert_int_equal(query_parse_time("2023-11-14T22:13:20Z", now, &t), 0);
	assert_true(t == now);
	assert_int_equal(query_parse_time("2023-11-14 22:13:20", now, &t), 0);
	assert_true(t == now);
	assert_int_equal(query_parse_time("2023-11-14", now, &t), 0);
	assert_true(t == now - (22 * 3600 + 13 * 60 + 20) * 1000000000ll);
	assert_int_equal(query_parse_time("", now, &t), -EINVAL);
	assert_int_equal(query_parse_time("yesterday", now, &t), -EINVAL);
	assert_int_equal(query_parse_time("10parsecs", now, &t), -EINVAL);
	assert_int_equal(query_parse_time("5h", now, &t), -EINVAL);   /* absolute hours: no */
	assert_int_equal(query_parse_time("2023-13-45", now, &t), -EINVAL);
	assert_int_equal(query_parse_time("99999999999999999999", now, &t), -ERANGE);
	assert_int_equal(query_parse_time("99999999999", now, &t), -ERANGE);
}

/* Runs cmd_query with stdout and stderr sent to files; returns the exit code. */
static int run_cmd(struct fixture *f, char **out, char **err, int argc, ...)
{
	char *argv[16], opath[160], epath[160];
	va_list ap;

	va_start(ap, argc);
	for (int i = 0; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[argc] = NULL;
	snprintf(opath, sizeof(opath), "%s/out", f->dir);
	snprintf(epath, sizeof(epath), "%s/err", f->dir);
	fflush(stdout);
	fflush(stderr);

	int so = dup(1), se = dup(2);
	int fo = open(opath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	int fe = open(epath, O_RDWR | O_CREAT | O_TRUNC, 0600);

	dup2(fo, 1);
	dup2(fe, 2);

	int rc = cmd_query(argc, argv);

	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	for (int k = 0; k < 2; k++) {
		int fd = k ? fe : fo;
		off_t n = lseek(fd, 0, SEEK_END);
		char *buf = calloc(1, (size_t)n + 1);

		assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
		close(fd);
		*(k ? err : out) = buf;
	}
	unlink(opath);
	unlink(epath);
	return rc;
}

static void assert_one_line_error(const char *err, const char *want)
{
	assert_true(!strncmp(err, "memprofd: ", 10));
	assert_non_null(strstr(err, want));
	assert_non_null(strchr(err, '\n'));
	assert_int_equal(strchr(err, '\n')[1], '\0');
}

static void test_cmd_query(void **state)
{
	struct fixture *f = *state;
	char *out, *err, junk[160];

	build(f);
	/* Success: JSON on stdout, nothing on stderr; options before or after the report. */
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "contexts", "--db", f->db,
				 "--format", "json"), 0);
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "cold_path"));
	assert_string_equal(err, "");
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 8, "query", "--db", f->db, "--sort=density",
				 "--limit", "1", "contexts", "--format=csv"), 0);
	assert_non_null(strstr(out, "hot_loop"));
	assert_null(strstr(out, "cold_path"));
	free(out); free(err);
	const char *reports[] = { "binaries", "processes", "status" };

	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(run_cmd(f, &out, &err, 6, "query", reports[i], "--db", f->db,
					 "--format", "json"), 0);
		assert_true(json_valid(out));
		free(out); free(err);
		assert_int_equal(run_cmd(f, &out, &err, 4, "query", reports[i], "--db", f->db), 0);
		assert_width(out, FMT_TABLE_WIDTH);
		free(out); free(err);
	}
	/* Help. */
	assert_int_equal(run_cmd(f, &out, &err, 2, "query", "--help"), 0);
	assert_non_null(strstr(out, "usage: memprofd query"));
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 3, "query", "contexts", "-h"), 0);
	assert_non_null(strstr(out, "--sort"));
	free(out); free(err);
	/* Bad usage: exit 2, one line. */
	struct { int argc; char *argv[6]; const char *want; } bad[] = {
		{ 3, { "query", "contexts", "--bogus" }, "query contexts: unknown option '--bogus'" },
		{ 4, { "query", "contexts", "--sort", "size" }, "--sort: unknown key 'size'" },
		{ 4, { "query", "contexts", "--limit", "-3" }, "--limit: invalid number '-3'" },
		{ 4, { "query", "contexts", "--pid", "0" }, "--pid: invalid process id '0'" },
		{ 4, { "query", "contexts", "--format", "xml" }, "--format: unknown format 'xml'" },
		{ 4, { "query", "contexts", "--since", "soon" }, "--since: invalid time 'soon'" },
		{ 3, { "query", "contexts", "--db" }, "option '--db' needs a value" },
		{ 2, { "query", "everything" }, "query: unknown report 'everything'" },
		{ 4, { "query", "status", "--sort", "bytes" }, "query status: --sort does not apply" },
		{ 3, { "query", "contexts", "extra" }, "unexpected argument 'extra'" },
		{ 6, { "query", "contexts", "--since", "20", "--until", "10" }, "--since must be" },
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char **a = bad[i].argv;
		int rc = bad[i].argc == 2 ? run_cmd(f, &out, &err, 2, a[0], a[1]) :
			 bad[i].argc == 3 ? run_cmd(f, &out, &err, 3, a[0], a[1], a[2]) :
			 bad[i].argc == 4 ? run_cmd(f, &out, &err, 4, a[0], a[1], a[2], a[3]) :
			 run_cmd(f, &out, &err, 6, a[0], a[1], a[2], a[3], a[4], a[5]);

		if (rc != 2)
			fail_msg("%s %s: exit %d, stderr %s", a[1], a[2] ? a[2] : "", rc, err);
		assert_one_line_error(err, bad[i].want);
		assert_string_equal(out, "");
		free(out); free(err);
	}
	assert_int_equal(run_cmd(f, &out, &err, 1, "query"), 2);
	assert_non_null(strstr(err, "usage:"));
	free(out); free(err);
	/* Runtime failures: exit 1, one line naming the file. */
	snprintf(junk, sizeof(junk), "%s/junk", f->dir);
	assert_int_equal(run_cmd(f, &out, &err, 4, "query", "contexts", "--db", junk), 1);
	assert_one_line_error(err, "No such file or directory");
	assert_non_null(strstr(err, junk));
	free(out); free(err);
	FILE *j = fopen(junk, "w");

	fputs("SQLite format 2? no, just text, long enough to have a header........"
	      "..................................................................", j);
	fclose(j);
	assert_int_equal(run_cmd(f, &out, &err, 4, "query", "contexts", "--db", junk), 1);
	assert_one_line_error(err, "memprofd: query contexts: ");
	assert_non_null(strstr(err, "file is not a database"));
	free(out); free(err);
	/* --binary PATH is resolved the way the daemon records executables. */
	char exe[160], spelled[200], e2[256];
	struct store *w;

	snprintf(exe, sizeof(exe), "%s/bin", f->dir);
	snprintf(spelled, sizeof(spelled), "%s/./../%s/bin", f->dir, strrchr(f->dir, '/') + 1);
	fclose(fopen(exe, "w"));
	if (store_open(&w, f->db, STORE_RDWR, e2, sizeof(e2)) < 0)
		fail_msg("%s", e2);
	struct store_proc bp = { .pid = 99, .start_ns = 9, .exe = exe, .build_id = "feed" };
	struct store_frame bf = { "feed", exe, 0x42, "in_bin", NULL };
	struct mib bm = { .alloc_count = 1, .total_size = 1, .min_size = 1, .max_size = 1 };

	OK(store_put_mib(w, &bp, 77, &bf, 1, 0, &bm));
	store_close(w);
	assert_int_equal(run_cmd(f, &out, &err, 8, "query", "contexts", "--db", f->db,
				 "--binary", spelled, "--format", "csv"), 0);
	assert_non_null(strstr(out, ",in_bin,"));
	assert_null(strstr(out, "cold_path"));
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "processes", "--db", f->db,
				 "--binary", "feed"), 0);
	assert_non_null(strstr(out, "      99 "));
	free(out); free(err);
	unlink(exe);
	assert_int_equal(run_cmd(f, &out, &err, 4, "query", "data", "--db", f->db), 0);
	assert_non_null(strstr(out, "(no static data accesses)"));
	assert_string_equal(err, "");
	free(out); free(err);
}

/* ---- data symbols and access classes (schema 4) ---- */

#define SEC 1000000000ll

/* Two more runs (10 s and 5 s) with static data and access classes, on build()'s store. */
static void build_data(struct fixture *f)
{
	struct store *w;
	char err[256];
	int64_t r2, r3;

	if (store_open(&w, f->db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);

	struct store_run rd = { .command = "app", .alloc_mode = "sampled", .access_mode = "auto",
				.started_ns = 1700000100 * SEC };
	struct store_run_stats st = { .ended_ns = 1700000110 * SEC, .status = "ok" };

	OK(store_run_begin(w, &rd, &r2));
	OK(store_run_update(w, r2, &st));
	rd.started_ns = 1700000200 * SEC;
	st.ended_ns = 1700000205 * SEC;
	OK(store_run_begin(w, &rd, &r3));
	OK(store_run_update(w, r3, &st));

	/* hot: 6e6 / 8 B / 15 s; mid: 1e4 / 100 B / 10 s = 10; cold: 100 / 4 KiB / 10 s;
	 * warm: 700 / 1000 B / 15 s = 0.047 is cold only with both runs' durations summed
	 * (10 s alone: 0.07, notcold). */
	struct store_data hot = { "abcd01", "/srv/app", "hot_global", ".data", 0x4020, 8,
				  500, 5000000 };
	struct store_data mid = { "abcd01", "/srv/app", "mid_table", ".rodata", 0x6000, 100,
				  20, 10000 };
	struct store_data cold = { "abcd01", "/srv/app", "cold_global", ".bss", 0x8000, 4096,
				   1, 100 };
	struct store_data warm = { "abcd01", "/srv/app", "warm", ".data", 0x9000, 1000, 6, 400 };
	struct store_data odd = { "", "/srv/o,d\"d", hostile, NULL, 0xa000, 0, 2, 2 };
	struct store_data nosym = { "", "/srv/o,d\"d", "", ".data", 0x4010, 16, 1, 1 };

	OK(store_begin(w));
	OK(store_put_data(w, r2, &hot));
	OK(store_put_data(w, r2, &mid));
	OK(store_put_data(w, r2, &cold));
	OK(store_put_data(w, r2, &warm));
	OK(store_put_data(w, r2, &odd));
	OK(store_put_data(w, r2, &nosym));
	hot.access_samples = 100;
	hot.est_accesses = 1000000;
	warm.access_samples = 4;
	warm.est_accesses = 300;
	OK(store_put_data(w, r3, &hot));
	OK(store_put_data(w, r3, &warm));
	OK(store_put_access_class(w, r3, "heap", 5, 50));
	OK(store_put_access_class(w, r3, "tls", 7, 70));
	OK(store_put_access_class(w, r3, "static", 1234, 12340));
	OK(store_put_access_class(w, r3, "unknown", 1, 10));
	OK(store_put_access_class(w, r3, "vdso", 2, 20));     /* a class newer than the reader */
	OK(store_run_access(w, r3, "soft", "pebs: no PMU (perf_event_open: ENOENT)\n"
			    "ibs: not an AMD CPU\nspe: not an Arm CPU\n"));
	OK(store_commit(w));
	store_close(w);
}

#define STARTS_WITH(text, lit) assert_true(!strncmp((text), lit, sizeof(lit) - 1))

static void test_data_json(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	build_data(f);
	CAPTURE(out, query_print_data(fp, f->s, NULL, QUERY_JSON));
	assert_true(json_valid(out));
	/* DESIGN.md's fields in its order, address a hex string, counts summed over runs. */
	const char *p = after(out, "[\n{\"build_id\": \"abcd01\", \"binary\": \"/srv/app\", "
			      "\"symbol\": \"hot_global\", \"section\": \".data\", \"address\": \"0x4020\", "
			      "\"size\": 8, \"access_samples\": 600, \"est_accesses\": 6000000, "
			      "\"est_accesses_lo\": 5529449, \"est_accesses_hi\": 6499891, "
			      "\"class\": \"hot\"},\n");
	/* By access samples, descending. */
	const char *order[] = { "\"symbol\": \"mid_table\"", "\"symbol\": \"warm\"",
				"\"symbol\": \"we\\\"ird", "\"symbol\": \"cold_global\"" };
	/* An address no symbol covers is no data row (query status counts it). */
	assert_null(strstr(out, "\"symbol\": \"\""));

	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		p = after(p, order[i]);
	assert_non_null(strstr(out, "\"symbol\": \"mid_table\", \"section\": \".rodata\", "
				    "\"address\": \"0x6000\", \"size\": 100, \"access_samples\": 20, "
				    "\"est_accesses\": 10000, \"est_accesses_lo\": 6108, "
				    "\"est_accesses_hi\": 15444, \"class\": \"notcold\"}"));
	assert_non_null(strstr(out, "\"symbol\": \"warm\", \"section\": \".data\", "
				    "\"address\": \"0x9000\", \"size\": 1000, \"access_samples\": 10, "
				    "\"est_accesses\": 700, \"est_accesses_lo\": 335, "
				    "\"est_accesses_hi\": 1287, \"class\": \"cold\"}"));
	assert_non_null(strstr(out, "\"address\": \"0x8000\", \"size\": 4096, \"access_samples\": 1, "
				    "\"est_accesses\": 100, \"est_accesses_lo\": 2, "
				    "\"est_accesses_hi\": 557, \"class\": \"cold\"}"));
	/* No section: "", never null (every field keeps its type); hostile names escaped. */
	assert_non_null(strstr(out, "\"build_id\": \"\", \"binary\": \"/srv/o,d\\\"d\", "
				    "\"symbol\": \"we\\\"ird\\\\ \\n\\t\\u0001 \\ufffd\\ufffd caf\xc3\xa9 "
				    "\\ufffd\\ufffd\\ufffd end\", \"section\": \"\", \"address\": "
				    "\"0xa000\", \"size\": 0,"));
	assert_null(strstr(out, "null"));
	free(out);

	/* Filter, sort and limit. */
	struct store_data_filter df = { .binary = "/srv/o,d\"d" };

	CAPTURE(out, query_print_data(fp, f->s, &df, QUERY_JSON));
	assert_true(json_valid(out));
	assert_null(strstr(out, "abcd01"));
	assert_non_null(strstr(out, "\"address\": \"0xa000\""));
	assert_null(strstr(out, "\"address\": \"0x4010\""));
	free(out);
	df = (struct store_data_filter){ .sort = STORE_DATA_SORT_SIZE, .limit = 1 };
	CAPTURE(out, query_print_data(fp, f->s, &df, QUERY_JSON));
	assert_non_null(strstr(out, "cold_global"));
	assert_null(strstr(out, "hot_global"));
	free(out);
	df = (struct store_data_filter){ .sort = STORE_DATA_SORT_DENSITY, .limit = 2 };
	CAPTURE(out, query_print_data(fp, f->s, &df, QUERY_JSON));
	p = after(out, "hot_global");
	after(p, "mid_table");
	free(out);
	df = (struct store_data_filter){ .since_ns = 1700000150 * SEC };
	CAPTURE(out, query_print_data(fp, f->s, &df, QUERY_JSON));
	assert_non_null(strstr(out, "\"access_samples\": 100, \"est_accesses\": 1000000"));
	assert_null(strstr(out, "mid_table"));
	free(out);
	df = (struct store_data_filter){ .binary = "nothing" };
	CAPTURE(out, query_print_data(fp, f->s, &df, QUERY_JSON));
	assert_string_equal(out, "[]\n");
	free(out);
}

static void test_data_csv_table(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	build_data(f);
	CAPTURE(out, query_print_data(fp, f->s, NULL, QUERY_CSV));
	STARTS_WITH(out, "build_id,binary,symbol,section,address,size,access_samples,"
		    "est_accesses,class,est_accesses_lo,est_accesses_hi\r\n"
		    "abcd01,/srv/app,hot_global,.data,0x4020,8,600,6000000,hot,5529449,6499891\r\n"
		    "abcd01,/srv/app,mid_table,.rodata,0x6000,100,20,10000,notcold,6108,15444\r\n");
	assert_non_null(strstr(out, "\r\n,\"/srv/o,d\"\"d\",\"we\"\"ird"));
	assert_null(strstr(out, "0x4010"));   /* no symbol: no row */
	free(out);
	CAPTURE(out, query_print_data(fp, f->s, NULL, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	STARTS_WITH(out, " SAMPLES ACCESSES      SIZE  DENSITY CLASS   SECTION  BINARY"
		    "       SYMBOL\n");
	assert_non_null(strstr(out, "\n     600     6.0M       8 B    5e+04 hot     .data    app"
				    "          hot_global\n"));
	assert_non_null(strstr(out, " we\"ird\\ ??? ?? caf?? ??? end\n"));
	assert_null(strstr(out, "(0x4010)"));   /* no symbol: no row */
	free(out);
	/* An empty report says so. */
	struct store_data_filter none = { .binary = "nothing" };

	CAPTURE(out, query_print_data(fp, f->s, &none, QUERY_TABLE));
	assert_non_null(strstr(out, "(no static data accesses)"));
	free(out);
}

static void test_status_access(void **state)
{
	struct fixture *f = *state;
	char *out = NULL;

	build(f);
	build_data(f);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_JSON));
	assert_true(json_valid(out));
	/* The newest run first: its source, reasons one per element, every class. */
	after(out, "[\n{\"run_id\": 3, ");
	assert_non_null(strstr(out, "\"unresolved_frames\": 0, \"access_source\": \"soft\", "
		"\"access_reasons\": [\"pebs: no PMU (perf_event_open: ENOENT)\", "
		"\"ibs: not an AMD CPU\", \"spe: not an Arm CPU\"], \"access_classes\": {"
		"\"heap\": {\"samples\": 5, \"est_accesses\": 50}, "
		"\"heap_untracked\": {\"samples\": 0, \"est_accesses\": 0}, "
		"\"static\": {\"samples\": 1234, \"est_accesses\": 12340}, "
		"\"stack\": {\"samples\": 0, \"est_accesses\": 0}, "
		"\"tls\": {\"samples\": 7, \"est_accesses\": 70}, "
		"\"anon\": {\"samples\": 0, \"est_accesses\": 0}, "
		"\"file\": {\"samples\": 0, \"est_accesses\": 0}, "
		"\"unknown\": {\"samples\": 1, \"est_accesses\": 10}, "
		"\"vdso\": {\"samples\": 2, \"est_accesses\": 20}}, "
		"\"missed\": {\"exec\": 0, \"late\": 0, \"unknown\": 0}, \"flushed_ns\": null, "
		"\"unsymbolized\": [], \"memory_limit_drops\": null, \"stop_drops\": null}"));
	/* Run 2's static samples that no symbol covers, per binary. */
	assert_non_null(strstr(out, "\"unsymbolized\": [{\"build_id\": \"\", \"binary\": "
				    "\"/srv/o,d\\\"d\", \"samples\": 1, \"est_accesses\": 1}], \"memory_limit_drops\": null, \"stop_drops\": null}"));
	/* A run without access sampling. */
	assert_non_null(strstr(out, "\"access_source\": null, \"access_reasons\": [], "
				    "\"access_classes\": {\"heap\": {\"samples\": 0,"));
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	assert_non_null(strstr(out, "\n      access source: soft\n"
				    "        pebs: no PMU (perf_event_open: ENOENT)\n"
				    "        ibs: not an AMD CPU\n        spe: not an Arm CPU\n"
				    "      samples: heap 5, heap_untracked 0, static 1234, stack 0, tls 7,"
				    " anon 0, file 0, unknown 1,\n               vdso 2\n"));
	assert_non_null(strstr(out, "\n      unsymbolized data: 1 samples in /srv/o,d\"d\n"));
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_CSV));
	assert_non_null(strstr(out, ",unresolved_frames,access_source,access_reasons,samples_heap,"
				    "samples_heap_untracked,samples_static,samples_stack,samples_tls,"
				    "samples_anon,samples_file,samples_unknown,missed_exec,missed_late,"
				    "missed_unknown\r\n3,"));
	assert_non_null(strstr(out, ",soft,\"pebs: no PMU (perf_event_open: ENOENT)\nibs: not an AMD"
				    " CPU\nspe: not an Arm CPU\n\",5,0,1234,0,7,0,0,1,0,0,0\r\n"));
	free(out);
}

/* The governor block: a daemon run's last tick in the table (within the width) and as
 * the run's "governor" object; runs without one say null. */
static void test_status_governor(void **state)
{
	struct fixture *f = *state;
	struct store *w;
	char err[256], *out = NULL;
	int64_t run;

	build(f);
	if (store_open(&w, f->db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	struct store_run rd = { .command = "daemon", .alloc_mode = "exact", .access_mode = "soft",
				.started_ns = 1700000100000000000ll };
	struct store_governor g = {
		.at_ns = 1700000160000000000ll, .budget = 0.01, .cpu = 0.0523, .min_scale = 0.015625,
		.ticks = 6, .lowered = 2, .raised = 0, .action = "lower",
		.changed_ns = 1700000160000000000ll,
		.decision = "tick 6: cpu 5.230% of one CPU, budget 1.000%: over budget, lowering; "
			    "access scale 0.5 -> 0.125 (90000 events)",
		.history = "tick 6: over budget, lowering; access scale 0.5 -> 0.125\n"
			   "tick 2: over budget, lowering; access scale 1 -> 0.5",
		.rss_bytes = 52 << 20, .cache_bytes = 256 << 10, .procs_held = 3, .aggs_held = 9,
		.src = { { "access", 0.125, 125, "Hz", 90000 } }, .nsrc = 1,
		.targets = { .traced = 4, .unsampled = 2, .skipped = 1,
			     .unsampled_list = "4242 /usr/bin/bare\n77 /opt/a \"quoted\"" },
	};
	OK(store_begin(w));
	OK(store_run_begin(w, &rd, &run));
	OK(store_put_governor(w, run, &g));
	OK(store_commit(w));
	store_close(w);

	CAPTURE(out, query_print_status(fp, f->s, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	assert_non_null(strstr(out, " daemon\n      governor: budget 1.000% of one CPU, used 5.230% at "
				    "tick 6 (2023-11-14T22:16:00Z): lower\n"
				    "        over budget, lowering; access scale 0.5 -> 0.125 (90000 events)\n"
				    "        rates lowered 2, raised 0 times, last at 2023-11-14T22:16:00Z;"
				    " floor 0.01562\n"
				    "        access: scale 0.125 of the configured rate, 125 Hz, 90000 events"
				    " last tick\n"
				    "        memory: RSS 52.0 MiB, page cache 256.0 KiB, 3 processes and 9"
				    " aggregates held\n"
				    "        targets: 4 traced, 2 without the sampler (not profiled), 1 over"
				    " max_processes\n"
				    "          no sampler: pid 4242 /usr/bin/bare\n"
				    "          no sampler: pid 77 /opt/a \"quoted\"\n"
				    "        change: tick 6: over budget, lowering; access scale 0.5 -> 0.125\n"
				    "        change: tick 2: over budget"));
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"status\": \"running\", \"governor\": {\"at_ns\": "
				    "1700000160000000000, \"budget\": 0.01, \"cpu\": 0.0523, "
				    "\"min_scale\": 0.015625, \"ticks\": 6, \"lowered\": 2, "
				    "\"raised\": 0, \"action\": \"lower\", \"changed_ns\": "
				    "1700000160000000000, \"decision\": \"tick 6: cpu 5.230%"));
	assert_non_null(strstr(out, "\"history\": [\"tick 6: over budget, lowering; access scale "
				    "0.5 -> 0.125\", \"tick 2: over budget, lowering; access scale 1 ->"
				    " 0.5\"], \"sources\": [{\"name\": \"access\", \"scale\": 0.125,"
				    " \"rate\": 125, \"unit\": \"Hz\", \"events\": 90000}], "
				    "\"memory\": {\"rss_bytes\": 54525952, \"cache_bytes\": 262144, "
				    "\"processes\": 3, \"aggregates\": 9}, \"targets\": {\"traced\": 4, "
				    "\"unsampled\": 2, \"skipped\": 1, \"unsampled_list\": [{\"pid\": 4242, "
				    "\"exe\": \"/usr/bin/bare\"}, {\"pid\": 77, \"exe\": \"/opt/a "
				    "\\\"quoted\\\"\"}]}}, \"events\": 0"));
	/* The recording of build() has no governor. */
	assert_non_null(strstr(out, "\"status\": \"ok\", \"governor\": null, \"events\": 123456"));
	free(out);
}

/* issue 22: what a daemon run dropped over memory_limit (with the peak) and at its stop, as
 * table lines and as the run's "memory_limit_drops" and "stop_drops" objects; runs without
 * a record say null and print nothing. */
static void test_status_mem_drops(void **state)
{
	struct fixture *f = *state;
	struct store *w;
	char err[256], *out = NULL;
	int64_t run;

	build(f);
	if (store_open(&w, f->db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	struct store_run rd = { .command = "daemon", .alloc_mode = "exact", .access_mode = "off",
				.started_ns = 1700000100000000000ll };
	struct store_mem_drops md = { .aggregates = 90126, .objects = 90304,
				      .limit_bytes = 2 << 20, .peak_bytes = 3 << 20,
				      .stop_records = 5, .stop_aggregates = 6, .stop_objects = 7,
				      .stop_budget_ms = 2000 }, back;
	OK(store_begin(w));
	OK(store_run_begin(w, &rd, &run));
	OK(store_put_mem_drops(w, run, &md));
	md.aggregates++;   /* a later flush's running total replaces it */
	OK(store_put_mem_drops(w, run, &md));
	OK(store_commit(w));
	assert_int_equal(store_get_mem_drops(w, run, &back), 1);
	assert_int_equal(back.aggregates, 90127);
	assert_int_equal(back.peak_bytes, 3 << 20);
	assert_int_equal(back.stop_objects, 7);
	assert_int_equal(store_get_mem_drops(w, run + 100, &back), 0);
	store_close(w);

	CAPTURE(out, query_print_status(fp, f->s, QUERY_TABLE));
	assert_width(out, FMT_TABLE_WIDTH);
	assert_non_null(strstr(out, "dropped over memory_limit 2.0 MiB, store unwritable: "
				    "90127 aggregates, 90304 objects\n"));
	assert_non_null(strstr(out, "aggregates held while the store was unwritable: at most 3.0 MiB\n"));
	assert_non_null(strstr(out, "dropped to stop within 2000 ms: 5 ring records, 6 aggregates, "
				    "7 objects\n"));
	assert_ptr_equal(strstr(strstr(out, "dropped over memory_limit") + 1,
				"dropped over memory_limit"), NULL);   /* the other runs: nothing */
	free(out);
	CAPTURE(out, query_print_status(fp, f->s, QUERY_JSON));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"memory_limit_drops\": {\"aggregates\": 90127, "
				    "\"objects\": 90304, \"memory_limit\": 2097152, \"peak_bytes\": 3145728}, "
				    "\"stop_drops\": {\"records\": 5, \"aggregates\": 6, \"objects\": 7, "
				    "\"budget_ms\": 2000}}"));
	assert_non_null(strstr(out, "\"memory_limit_drops\": null, \"stop_drops\": null}"));
	free(out);
}

static void test_classify_data(void **state)
{
	/* classify_data()'s rule: est / size / observed s (>= 1 ms), no lifetime floor. */
	assert_int_equal(classify_data(0, 8, 10 * SEC), CLASSIFY_COLD);           /* never hit */
	assert_int_equal(classify_data(0, 8, 0), CLASSIFY_COLD);
	assert_int_equal(classify_data(4999, 1000, 100 * SEC), CLASSIFY_COLD);    /* 0.04999 */
	assert_int_equal(classify_data(5000, 1000, 100 * SEC), CLASSIFY_NOTCOLD); /* 0.05: not < */
	assert_int_equal(classify_data(1, 1000, 1 * SEC), CLASSIFY_COLD);         /* short run too */
	assert_int_equal(classify_data(1000, 1, 1 * SEC), CLASSIFY_NOTCOLD);      /* 1000: not > */
	assert_int_equal(classify_data(1001, 1, 1 * SEC), CLASSIFY_HOT);
	assert_int_equal(classify_data(2, 1, 10), CLASSIFY_HOT);                  /* 1 ms: 2000 */
	assert_int_equal(classify_data(2000, 0, 1 * SEC), CLASSIFY_HOT);          /* size 0 as 1 */
	assert_int_equal(classify_data(700, 1000, 15 * SEC), CLASSIFY_COLD);
	assert_int_equal(classify_data(700, 1000, 10 * SEC), CLASSIFY_NOTCOLD);
}

static void test_cmd_query_data(void **state)
{
	struct fixture *f = *state;
	char *out, *err;

	build(f);
	build_data(f);
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "data", "--db", f->db,
				 "--format", "json"), 0);
	assert_true(json_valid(out));
	STARTS_WITH(out, "[\n{\"build_id\": \"abcd01\", \"binary\": \"/srv/app\", "
		    "\"symbol\": \"hot_global\"");
	assert_string_equal(err, "");
	free(out); free(err);
	/* Not a terminal: nothing is cut unless COLUMNS says how wide (issue 21). */
	setenv("COLUMNS", "100", 1);
	assert_int_equal(run_cmd(f, &out, &err, 4, "query", "data", "--db", f->db), 0);
	unsetenv("COLUMNS");
	assert_width(out, FMT_TABLE_WIDTH);
	free(out); free(err);
	/* --class with --limit: the limit counts the rows of that class. */
	assert_int_equal(run_cmd(f, &out, &err, 10, "query", "data", "--db", f->db, "--class",
				 "cold", "--limit", "2", "--format", "csv"), 0);
	assert_non_null(strstr(out, "\r\nabcd01,/srv/app,warm,"));
	assert_non_null(strstr(out, ",cold,"));
	assert_null(strstr(out, "hot_global"));
	assert_null(strstr(out, "mid_table"));
	assert_non_null(strstr(out, "\r\nabcd01,/srv/app,cold_global,"));
	assert_null(strstr(out, "0x4010"));           /* third cold row: past the limit */
	assert_null(strstr(out, "0xa000"));           /* 2 / 1 B / 10 s: notcold */
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 8, "query", "data", "--db", f->db, "--sort",
				 "size", "--format", "csv"), 0);
	assert_non_null(strstr(out, "est_accesses_hi\r\nabcd01,/srv/app,cold_global,"));
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 7, "query", "data", "--db", f->db, "--binary",
				 "abcd01", "--sort=density"), 0);
	assert_non_null(strstr(out, "hot_global\n"));
	assert_null(strstr(out, "o,d"));
	free(out); free(err);
	/* Contexts still sort by their own keys; data by its own. */
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "data", "--db", f->db, "--sort",
				 "bytes"), 2);
	assert_one_line_error(err, "query data: --sort: unknown key 'bytes' (accesses|density|size)");
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "data", "--db", f->db, "--pid", "7"), 2);
	assert_one_line_error(err, "query data: --pid does not apply");
	free(out); free(err);
	assert_int_equal(run_cmd(f, &out, &err, 6, "query", "contexts", "--db", f->db, "--sort",
				 "accesses"), 0);
	free(out); free(err);
}

/* ---- filters: every path of store_query_contexts() against a reference ----
 * A store with two binaries, a reused pid, ten buckets and 60 contexts (ties, empty
 * MIBs, cold, hot and notcold ones); for each filter the contexts and their combined
 * MIBs must equal what this test computes from the rows it wrote, with mib_combine(),
 * ordered by the key descending then context id. */

#define F_CTX 60
#define F_ROWS_MAX 8
#define F_T0 (1700000000ll * SEC)
#define F_MIN (60 * SEC)

struct f_row { int proc; int64_t bucket; struct mib m; };
struct f_ctx { int bin; unsigned nrows; struct f_row rows[F_ROWS_MAX]; };

static const struct { int32_t pid; uint64_t start; int bin; } f_procs[] = {
	{ 10, 1, 0 }, { 10, 2, 0 }, { 11, 3, 0 }, { 20, 4, 1 },   /* pid 10 reused */
};
static const char *const f_bins[2][2] = { { "aa01", "/srv/one" }, { "bb02", "/srv/two" } };

static uint64_t f_rng = 0x9e3779b97f4a7c15ull;

static uint64_t f_next(void)
{
	f_rng ^= f_rng << 13;
	f_rng ^= f_rng >> 7;
	f_rng ^= f_rng << 17;
	return f_rng;
}

static struct mib f_mib(unsigned kind)
{
	uint64_t n = 1 + f_next() % 50, size = 8u << (f_next() % 10), life, acc;

	switch (kind) {
	case 0: life = 300 * SEC; acc = 0; break;                         /* cold */
	case 1: life = 1000000; acc = n * size * 3; break;                /* hot */
	default: life = (1 + f_next() % 5000) * 1000000; acc = f_next() % 2 ? 0 : n * 100;
	}
	return (struct mib){ .alloc_count = n, .total_size = n * size, .min_size = size,
		.max_size = size * 2, .total_lifetime_ns = n * life, .min_lifetime_ns = life / 2,
		.max_lifetime_ns = life * 3, .alloc_ts_ns = F_T0 + f_next() % (10 * F_MIN),
		.dealloc_ts_ns = F_T0 + 10 * F_MIN + f_next() % 1000, .alloc_cpu = f_next() % 4,
		.dealloc_cpu = f_next() % 4, .num_migrated_cpu = f_next() % 2,
		.access_samples = acc / 1000, .total_access_count = acc, .min_access_count = 1,
		.max_access_count = acc };
}

static void f_build(const char *db, struct f_ctx *c)
{
	struct store *w;
	char err[256], name[F_CTX][16];

	if (store_open(&w, db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	for (int k = 0; k < F_CTX; k++) {
		c[k].bin = k % 5 == 4;
		c[k].nrows = 1 + f_next() % (F_ROWS_MAX - 1);
		for (unsigned j = 0; j < c[k].nrows; j++) {
			int p = c[k].bin ? 3 : (int)(f_next() % 3);

			/* distinct (process, bucket) per row: the bucket index is j */
			c[k].rows[j] = (struct f_row){ p, F_T0 + (int64_t)j * F_MIN, f_mib(k % 3) };
		}
	}
	c[7] = c[6];                                   /* a full tie in every key */
	for (unsigned j = c[0].nrows; j < F_ROWS_MAX - 1; j++)   /* the last bucket: +6 min */
		c[0].rows[c[0].nrows++] = (struct f_row){ 0, F_T0 + (int64_t)j * F_MIN, f_mib(0) };
	c[11].rows[c[11].nrows++] = (struct f_row){ 0, F_T0 + 5 * F_MIN + 30 * SEC }; /* empty */
	c[12].nrows = 1;
	c[12].rows[0] = (struct f_row){ 0, F_T0 };                         /* only empty */
	/* After an exec: a context of /srv/one with rows of pid 20, whose process row says
	 * /srv/two (the process was first seen running it). */
	c[F_CTX - 1].bin = 0;
	for (unsigned j = 0; j < c[F_CTX - 1].nrows; j++)
		c[F_CTX - 1].rows[j].proc = 3;
	OK(store_begin(w));
	/* Contexts first in index order, so that context k has id k + 1. */
	for (unsigned j = 0; j < F_ROWS_MAX; j++)
		for (int k = 0; k < F_CTX; k++) {
			if (j >= c[k].nrows)
				continue;
			const struct f_row *r = &c[k].rows[j];
			struct store_proc p = { .pid = f_procs[r->proc].pid,
				.start_ns = f_procs[r->proc].start, .exe = f_bins[c[k].bin][1],
				.build_id = f_bins[c[k].bin][0] };
			struct store_frame fr = { f_bins[c[k].bin][0], f_bins[c[k].bin][1],
						  0x100 + (uint64_t)k, name[k], NULL };

			snprintf(name[k], sizeof(name[k]), "ctx_%d", k);
			OK(store_put_mib(w, &p, (uint64_t)k + 1, &fr, 1, r->bucket, &r->m));
		}
	OK(store_commit(w));
	store_close(w);
}

struct f_want { int64_t id; struct mib m; };

static double f_key(const struct mib *m, enum store_sort k)
{
	switch (k) {
	case STORE_SORT_COUNT: return (double)m->alloc_count;
	case STORE_SORT_LIFETIME: return (double)m->total_lifetime_ns;
	case STORE_SORT_DENSITY: return store_lifetime_access_density(m);
	case STORE_SORT_ACCESSES: return (double)m->total_access_count;
	default: return (double)m->total_size;
	}
}

static enum store_sort f_sort;

static int f_cmp(const void *a, const void *b)
{
	const struct f_want *x = a, *y = b;
	double kx = f_key(&x->m, f_sort), ky = f_key(&y->m, f_sort);

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Enough evidence for some contexts and not for others: every class occurs. */
static const struct classify_evidence f_ev = { .access_weight = 1e6 };

static bool f_accept(const struct mib *sums, void *arg)
{
	return (int)classify_mib(sums, &f_ev) == *(int *)arg;
}

static unsigned f_reference(const struct f_ctx *c, const struct store_ctx_filter *f, int cls,
			    struct f_want *out)
{
	unsigned n = 0;

	for (int k = 0; k < F_CTX; k++) {
		struct mib m = {0};

		if (f->binary && strcmp(f->binary, f_bins[c[k].bin][0]) &&
		    strcmp(f->binary, f_bins[c[k].bin][1]))
			continue;
		for (unsigned j = 0; j < c[k].nrows; j++) {
			const struct f_row *r = &c[k].rows[j];

			if ((f->pid && f_procs[r->proc].pid != f->pid) ||
			    (f->since_ns && r->bucket < f->since_ns) ||
			    (f->until_ns && r->bucket >= f->until_ns))
				continue;
			mib_combine(&m, &r->m);
		}
		if (!m.alloc_count || (cls >= 0 && (int)classify_mib(&m, &f_ev) != cls))
			continue;
		out[n++] = (struct f_want){ k + 1, m };
	}
	f_sort = f->sort;
	qsort(out, n, sizeof(*out), f_cmp);
	return f->limit && n > f->limit ? f->limit : n;
}

struct f_got { unsigned n; struct f_want v[F_CTX]; };

static int f_collect(const struct store_ctx_row *r, void *arg)
{
	struct f_got *g = arg;

	assert_true(g->n < F_CTX);
	assert_int_equal(r->nframes, 1);
	char want[16];

	snprintf(want, sizeof(want), "ctx_%d", (int)r->context_id - 1);
	assert_string_equal(r->frames[0].function, want);
	g->v[g->n++] = (struct f_want){ r->context_id, r->mib };
	return 0;
}

static void f_check(struct store *s, const struct f_ctx *c, struct store_ctx_filter f, int cls)
{
	struct f_want want[F_CTX];
	unsigned n = f_reference(c, &f, cls, want);

	if (cls >= 0) {
		f.accept = f_accept;
		f.accept_arg = &cls;
	}
	/* Every plan, forced, and the automatic choice. */
	for (int plan = STORE_PLAN_AUTO; plan <= STORE_PLAN_GROUP_BY_TIME; plan++) {
		struct f_got got = {0};

		f.plan = (enum store_plan)plan;
		OK(store_query_contexts(s, &f, f_collect, &got));
		if (got.n != n)
			fail_msg("plan %d binary %s pid %d since %lld until %lld sort %d limit %u "
				 "class %d: %u contexts, want %u", plan, f.binary ? f.binary : "-",
				 f.pid, (long long)(f.since_ns ? f.since_ns - F_T0 : -1),
				 (long long)(f.until_ns ? f.until_ns - F_T0 : -1), f.sort, f.limit,
				 cls, got.n, n);
		for (unsigned i = 0; i < n; i++) {
			if (got.v[i].id != want[i].id)
				fail_msg("plan %d sort %d pid %d since %lld: row %u is context "
					 "%lld, want %lld", plan, f.sort, f.pid,
					 (long long)f.since_ns, i, (long long)got.v[i].id,
					 (long long)want[i].id);
			assert_memory_equal(&got.v[i].m, &want[i].m, sizeof(struct mib));
		}
	}
}

static void test_filters_match_reference(void **state)
{
	struct fixture *f = *state;
	static struct f_ctx c[F_CTX];
	char err[256];

	f_build(f->db, c);
	if (store_open(&f->s, f->db, STORE_RDONLY, err, sizeof(err)) < 0)
		fail_msg("%s", err);

	const char *bins[] = { NULL, "aa01", "/srv/two" };
	const int32_t pids[] = { 0, 10, 11, 20 };
	/* 0: open; F_T0: the first bucket (moot); one ns later; +3 min. Until the last
	 * bucket (+6 min) leaves it out, one ns later is moot. */
	const int64_t sinces[] = { 0, F_T0, F_T0 + 1, F_T0 + 3 * F_MIN };
	const int64_t untils[] = { 0, F_T0 + 5 * F_MIN, F_T0 + 6 * F_MIN, F_T0 + 6 * F_MIN + 1 };

	for (unsigned b = 0; b < 3; b++)
		for (unsigned p = 0; p < 4; p++)
			for (unsigned si = 0; si < 4; si++)
				for (unsigned u = 0; u < 4; u++) {
					struct store_ctx_filter q = { .binary = bins[b],
						.pid = pids[p], .since_ns = sinces[si],
						.until_ns = untils[u] };

					f_check(f->s, c, q, -1);
				}
	/* Every key, limit and class, on the ranking paths: ctx_totals (no row filter, a
	 * moot one), and grouping the rows (pid, time, both, with a binary). */
	const struct store_ctx_filter rows[] = {
		{ 0 }, { .since_ns = F_T0 }, { .pid = 10 }, { .since_ns = F_T0 + 3 * F_MIN },
		{ .until_ns = F_T0 + 2 * F_MIN }, { .pid = 20, .binary = "bb02" }, { .pid = 20 },
		{ .binary = "aa01", .until_ns = F_T0 + 5 * F_MIN },
		{ .pid = 10, .since_ns = F_T0 + F_MIN, .until_ns = F_T0 + 5 * F_MIN },
		{ .binary = "/srv/one" },
	};

	for (unsigned i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		for (int k = 0; k <= STORE_SORT_ACCESSES; k++)
			for (unsigned lim = 0; lim <= 10; lim += 5)
				for (int cls = -1; cls < CLASSIFY_NCLASSES; cls++) {
					struct store_ctx_filter q = rows[i];

					q.sort = (enum store_sort)k;
					q.limit = lim;
					f_check(f->s, c, q, cls);
				}
	/* The tie (contexts 7 and 8: ids 7, 8) comes in id order; the empty context never. */
	struct f_got all = {0};

	OK(store_query_contexts(f->s, NULL, f_collect, &all));
	assert_int_equal(all.n, F_CTX - 1);
	for (unsigned i = 0; i + 1 < all.n; i++)
		if (all.v[i].id == 7)
			assert_int_equal(all.v[i + 1].id, 8);
	for (unsigned i = 0; i < all.n; i++)
		assert_true(all.v[i].id != 13);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validator_itself),
		cmocka_unit_test_setup_teardown(test_contexts_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_reports_json, setup, teardown),
		cmocka_unit_test(test_classification),
		cmocka_unit_test(test_classification_evidence),
		cmocka_unit_test(test_classification_watch_evidence),
		cmocka_unit_test_setup_teardown(test_watch_evidence_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_width, setup, teardown),
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_parse_time),
		cmocka_unit_test_setup_teardown(test_cmd_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_csv_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_access, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_governor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_mem_drops, setup, teardown),
		cmocka_unit_test(test_classify_data),
		cmocka_unit_test_setup_teardown(test_cmd_query_data, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filters_match_reference, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
