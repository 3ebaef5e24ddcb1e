/* The people-facing exports against a small store built here with store_put_mib():
 * folded stacks (root first, each --weight, zero weights left out, ';' never inside a
 * frame), pprof decoded back with zlib + protobuf-c (sample types, values equal to the
 * store's, leaf-first locations, build-id mappings with the executable first, functions,
 * class labels), the HTML report (escaping, the top context in the first row, data for
 * the flame graph and the heap map) and cmd_export()'s exit codes and output file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "tests/unit/mpd_cmocka.h"

#include "cli/cmds.h"
#include "reporter/export.h"
#include "reporter/strtab.h"
#include "reporter/profile.pb-c.h"
#include "store/store.h"

#define OK(expr) do { int _r = (expr); if (_r < 0) fail_msg("%s: %d", #expr, _r); } while (0)

struct fixture {
	char dir[64], db[96];
	struct store *s;
};

static const struct store_frame ctx_a[] = {        /* 7 MiB, cold-ish, 3 frames */
	{ "abcd01", "/srv/app", 0x1234, "cold_path", "_Z9cold_pathv" },
	{ "abcd01", "/srv/app", 0x1300, NULL, NULL },
	{ "abcd01", "/srv/app", 0x1400, "main", NULL },
};
static const struct store_frame ctx_b[] = {        /* hot, in a library, two buckets */
	{ "11aa22", "/usr/lib/libfoo.so", 0x500, "foo;bar(int)", "_Z7foo_barI" },
	{ "abcd01", "/srv/app", 0x1400, "main", NULL },
};
static const struct store_frame ctx_c[] = {        /* hostile name, no accesses */
	{ "abcd01", "/srv/app", 0x2000, "</script><b id=\"x\">&evil", NULL },
	{ "abcd01", "/srv/app", 0x1400, "main", NULL },
};
static const struct store_frame ctx_other[] = {    /* another executable: never exported */
	{ "ffee02", "/srv/other", 0x10, "other_fn", NULL },
};

static const struct mib mib_a = { .alloc_count = 7, .total_size = 7340032, .min_size = 1048576,
	.max_size = 1048576, .total_lifetime_ns = 21000000000ull, .min_lifetime_ns = 2900000000ull,
	.max_lifetime_ns = 3100000000ull, .access_samples = 3, .total_access_count = 30000 };
static const struct mib mib_b1 = { .alloc_count = 100, .total_size = 6400, .min_size = 64,
	.max_size = 64, .total_lifetime_ns = 100000000, .min_lifetime_ns = 1000000,
	.max_lifetime_ns = 1000000, .access_samples = 50, .total_access_count = 5000000 };
static const struct mib mib_b2 = { .alloc_count = 20, .total_size = 1280, .min_size = 64,
	.max_size = 64, .total_lifetime_ns = 20000000, .min_lifetime_ns = 1000000,
	.max_lifetime_ns = 1000000, .access_samples = 10, .total_access_count = 1000000 };
static const struct mib mib_c = { .alloc_count = 3, .total_size = 300, .min_size = 100,
	.max_size = 100, .total_lifetime_ns = 3000000, .min_lifetime_ns = 1000000,
	.max_lifetime_ns = 1000000 };

#define BUCKET0 1700000000000000000ll
#define BUCKET1 (BUCKET0 + 10000000000ll)

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct store *w;
	char err[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_export.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->db, sizeof(f->db), "%s/m.db", f->dir);
	if (store_open(&w, f->db, STORE_RDWR, err, sizeof(err)) < 0)
		fail_msg("%s", err);

	struct store_proc app = { .pid = 7, .start_ns = 1, .exe = "/srv/app", .build_id = "abcd01" };
	struct store_proc other = { .pid = 9, .start_ns = 2, .exe = "/srv/other", .build_id = "ffee02" };
	struct mib big = mib_a;

	big.total_size *= 10;
	OK(store_begin(w));
	OK(store_put_mib(w, &app, 1, ctx_a, 3, BUCKET0, &mib_a));
	OK(store_put_mib(w, &app, 2, ctx_b, 2, BUCKET0, &mib_b1));
	OK(store_put_mib(w, &app, 2, ctx_b, 2, BUCKET1, &mib_b2));
	OK(store_put_mib(w, &app, 3, ctx_c, 2, BUCKET1, &mib_c));
	OK(store_put_mib(w, &other, 4, ctx_other, 1, BUCKET0, &big));
	OK(store_commit(w));

	/* Static data of a 10 s run: hot (1e6 / 8 B / 10 s), cold (never sampled, and
	 * 100 / 4 KiB / 10 s), notcold (10 / 1 B / 10 s = 1), and another binary's. */
	int64_t run;
	struct store_run rd = { .command = "app", .started_ns = BUCKET0 };
	struct store_run_stats rs = { .ended_ns = BUCKET0 + 10000000000ll, .status = "ok" };
	const struct store_data data[] = {
		{ "abcd01", "/srv/app", "hot_counter", ".data", 0x4000, 8, 100, 1000000 },
		{ "abcd01", "/srv/app", "big_cold_table", ".bss", 0x5000, 65536, 0, 0 },
		{ "abcd01", "/srv/app", "<cold&odd>", ".rodata", 0x9000, 4096, 1, 100 },
		{ "abcd01", "/srv/app", "lukewarm", ".data", 0x8000, 1, 1, 10 },
		{ "ffee02", "/srv/other", "other_hot", ".data", 0x4000, 8, 100, 1000000 },
	};

	OK(store_run_begin(w, &rd, &run));
	OK(store_run_update(w, run, &rs));
	OK(store_begin(w));
	for (unsigned i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		OK(store_put_data(w, run, &data[i]));
	/* 1e4 accesses per sample: the contexts have the evidence for a class. */
	OK(store_put_access_class(w, run, "heap", 10, 100000));
	OK(store_commit(w));
	store_close(w);
	if (store_open(&f->s, f->db, STORE_RDONLY, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[160];

	store_close(f->s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static const struct export_opts app_opts = { .binary = "abcd01", .build_id = "abcd01",
	.path = "/srv/app", .contexts = 3, .now_ns = BUCKET1 };

#define CAPTURE(buf, len, call) do { \
	FILE *_m = open_memstream(&(buf), &(len)); \
	assert_non_null(_m); \
	assert_int_equal((call), 0); \
	fclose(_m); \
} while (0)
#define M _m

/* ---- folded ---- */

static void test_folded_weights(void **state)
{
	struct fixture *f = *state;
	struct export_opts o = app_opts;
	char *buf = NULL;
	size_t len = 0;

	CAPTURE(buf, len, export_folded(M, f->s, &o));
	/* Root first; sorted by bytes; unknown frame by binary+offset; ';' replaced. */
	assert_string_equal(buf,
		"main;app+0x1300;cold_path 7340032\n"
		"main;foo?bar 7680\n"
		"main;</script><b id=\"x\">&evil 300\n");
	free(buf);

	o.weight = EXPORT_WEIGHT_OBJECTS;
	CAPTURE(buf, len, export_folded(M, f->s, &o));
	assert_non_null(strstr(buf, "main;foo?bar 120\n"));
	assert_non_null(strstr(buf, "main;app+0x1300;cold_path 7\n"));
	free(buf);

	/* ctx_c has no accesses: left out. */
	o.weight = EXPORT_WEIGHT_ACCESSES;
	CAPTURE(buf, len, export_folded(M, f->s, &o));
	assert_string_equal(buf, "main;app+0x1300;cold_path 30000\nmain;foo?bar 6000000\n");
	free(buf);

	/* Another binary's contexts only. */
	o = app_opts;
	o.binary = "/srv/other";
	CAPTURE(buf, len, export_folded(M, f->s, &o));
	assert_string_equal(buf, "other_fn 73400320\n");
	free(buf);
}

/* ---- pprof ---- */

static uint8_t *gunzip(const char *in, size_t inlen, size_t *outlen)
{
	z_stream z = {0};
	size_t cap = 1 << 16;
	uint8_t *out = malloc(cap);

	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)inlen;
	for (;;) {
		z.next_out = out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);

		int r = inflate(&z, Z_NO_FLUSH);

		if (r == Z_STREAM_END)
			break;
		assert_true(r == Z_OK || r == Z_BUF_ERROR);
		if (z.avail_out == 0) {
			cap *= 2;
			out = realloc(out, cap);
		} else {
			assert_true(z.avail_in > 0);   /* truncated stream otherwise */
		}
	}
	*outlen = z.total_out;
	inflateEnd(&z);
	return out;
}

typedef Perftools__Profiles__Profile Profile;

static const char *S(const Profile *p, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

static const Perftools__Profiles__Location *loc(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const char *fn_name(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return S(p, p->function[i]->name);
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Mapping *map(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id == id)
			return p->mapping[i];
	fail_msg("no mapping %llu", (unsigned long long)id);
	return NULL;
}

static void test_pprof_decodes(void **state)
{
	struct fixture *f = *state;
	char *buf = NULL;
	size_t len = 0, rawlen;

	CAPTURE(buf, len, export_pprof(M, f->s, &app_opts));
	assert_true(len > 20);
	assert_int_equal((unsigned char)buf[0], 0x1f);    /* gzip magic */
	assert_int_equal((unsigned char)buf[1], 0x8b);

	uint8_t *raw = gunzip(buf, len, &rawlen);
	Profile *p = perftools__profiles__profile__unpack(NULL, rawlen, raw);

	assert_non_null(p);
	assert_string_equal(S(p, 0), "");
	assert_int_equal(p->n_sample_type, 4);
	static const char *const want[4][2] = { { "alloc_objects", "count" },
		{ "alloc_space", "bytes" }, { "accesses", "count" }, { "lifetime", "milliseconds" } };
	for (int i = 0; i < 4; i++) {
		assert_string_equal(S(p, p->sample_type[i]->type), want[i][0]);
		assert_string_equal(S(p, p->sample_type[i]->unit), want[i][1]);
	}
	assert_string_equal(S(p, p->default_sample_type), "alloc_space");
	assert_int_equal(p->time_nanos, BUCKET1);

	/* Main mapping first, with its build-id; the library has its own. */
	assert_string_equal(S(p, map(p, 1)->build_id), "abcd01");
	assert_string_equal(S(p, map(p, 1)->filename), "/srv/app");
	assert_true(map(p, 1)->has_functions);
	assert_int_equal(p->n_mapping, 2);
	assert_string_equal(S(p, map(p, 2)->build_id), "11aa22");
	assert_string_equal(S(p, map(p, 2)->filename), "/usr/lib/libfoo.so");

	/* Samples by bytes, values equal to the store's combined MIBs. */
	assert_int_equal(p->n_sample, 3);
	const Perftools__Profiles__Sample *a = p->sample[0], *b = p->sample[1], *c = p->sample[2];

	assert_int_equal(a->n_value, 4);
	assert_int_equal(a->value[0], 7);
	assert_int_equal(a->value[1], 7340032);
	assert_int_equal(a->value[2], 30000);
	assert_int_equal(a->value[3], 21000);
	assert_int_equal(b->value[0], 120);
	assert_int_equal(b->value[1], 7680);
	assert_int_equal(b->value[2], 6000000);
	assert_int_equal(b->value[3], 120);
	assert_int_equal(c->value[1], 300);
	assert_int_equal(c->value[2], 0);

	/* Leaf first; the unsymbolized frame is an address without lines. */
	assert_int_equal(a->n_location_id, 3);
	const Perftools__Profiles__Location *l0 = loc(p, a->location_id[0]),
		*l1 = loc(p, a->location_id[1]), *l2 = loc(p, a->location_id[2]);

	assert_int_equal(l0->address, 0x1234);
	assert_int_equal(l0->mapping_id, 1);
	assert_int_equal(l0->n_line, 1);
	assert_string_equal(fn_name(p, l0->line[0]->function_id), "cold_path");
	assert_int_equal(l1->address, 0x1300);
	assert_int_equal(l1->n_line, 0);
	assert_string_equal(fn_name(p, l2->line[0]->function_id), "main");
	/* main's location is shared between the samples. */
	assert_int_equal(b->location_id[1], a->location_id[2]);
	assert_int_equal(loc(p, b->location_id[0])->mapping_id, 2);
	assert_string_equal(fn_name(p, loc(p, b->location_id[0])->line[0]->function_id),
			    "foo;bar(int)");
	for (size_t i = 0; i < p->n_function; i++)
		if (!strcmp(S(p, p->function[i]->name), "cold_path"))
			assert_string_equal(S(p, p->function[i]->system_name), "_Z9cold_pathv");

	/* Class labels. */
	assert_int_equal(b->n_label, 1);
	assert_string_equal(S(p, b->label[0]->key), "class");
	assert_string_equal(S(p, b->label[0]->str), "hot");
	assert_string_equal(S(p, a->label[0]->str), "notcold");

	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	free(buf);
}

/* ---- html ---- */

static void test_html_report(void **state)
{
	struct fixture *f = *state;
	char *buf = NULL;
	size_t len = 0;

	CAPTURE(buf, len, export_html(M, f->s, &app_opts));
	assert_non_null(strstr(buf, "<!DOCTYPE html>"));
	/* Self-contained: nothing fetched at view time. */
	assert_null(strstr(buf, "src=\"http"));
	assert_null(strstr(buf, "href=\"http"));
	/* The top context is the first row. */
	char *row = strstr(buf, "<tbody>");

	assert_non_null(row);
	assert_true(strstr(row, "cold_path") <
		    strstr(row, "foo;bar <span class=\"sep\">&lt;</span> main"));
	assert_non_null(strstr(row, "<td data-v=\"7340032\">7.0 MiB</td>"));
	/* The hostile name is escaped everywhere: as HTML text and inside the JSON. */
	assert_null(strstr(buf, "<b id=\"x\">"));
	assert_non_null(strstr(buf, "&lt;/script&gt;&lt;b id=&quot;x&quot;&gt;&amp;evil"));
	assert_non_null(strstr(buf, "\\u003c/script\\u003e\\u003cb id=\\\"x\\\"\\u003e\\u0026evil"));
	/* Exactly two </script> end tags: the data block's and the viewer's. */
	int n = 0;

	for (char *p = buf; (p = strstr(p, "</script>")); p++)
		n++;
	assert_int_equal(n, 2);
	/* Heap chart: bytes live by class (hot, notcold, cold), averaged over 60 s bars that
	 * end with the last bucket (BUCKET1 + 60 s). mib_a's 7 MiB lived 3 s each, ending mid-
	 * bucket: 7340032 x 3 / 60 = 367002 B on average; the 1 ms objects add < 1 B. */
	char want[160];

	snprintf(want, sizeof(want), "\"bucket_s\": 60,");
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "\"buckets\": [[%lld,0,367002,0]]", BUCKET1);
	assert_non_null(strstr(buf, want));
	assert_non_null(strstr(buf, "id=\"data\""));
	assert_non_null(strstr(buf, "id=\"flame-graph\""));
	/* Hot and cold data symbols: hot by density, cold biggest first, names escaped;
	 * notcold ones and other binaries' stay out. */
	char *hot = strstr(buf, "<table id=\"data-hot\""), *cold = strstr(buf, "<table id=\"data-cold\"");

	assert_non_null(hot);
	assert_non_null(cold);
	assert_true(hot < cold);
	assert_non_null(strstr(hot, "<td class=\"sym\">hot_counter</td>"));
	assert_true(strstr(hot, "hot_counter") < cold);
	assert_true(strstr(cold, "big_cold_table") < strstr(cold, "&lt;cold&amp;odd&gt;"));
	assert_non_null(strstr(buf, "<h3>hot (1)</h3>"));
	assert_non_null(strstr(buf, "<h3>cold (2)</h3>"));
	assert_null(strstr(buf, "lukewarm"));
	assert_null(strstr(buf, "other_hot"));
	/* The summary, and a view link sorts a table on load. */
	assert_non_null(strstr(buf, "<section id=\"summary\">"));
	assert_non_null(strstr(buf, "location.hash"));
	/* Other binaries stay out. */
	assert_null(strstr(buf, "other_fn"));
	free(buf);
}

/* ---- the subcommand ---- */

static int run_export(const char *a0, ...)
{
	char *argv[16];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"export";
	va_start(ap, a0);
	for (const char *a = a0; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return cmd_export(argc, argv);
}

static void test_cmd_export(void **state)
{
	struct fixture *f = *state;
	char out[128], buf[4096];
	struct stat st;

	snprintf(out, sizeof(out), "%s/out.folded", f->dir);
	assert_int_equal(run_export("folded", "--db", f->db, "--binary", "abcd01", "-o", out,
				    "--weight", "objects", NULL), 0);

	int fd = open(out, O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "main;foo?bar 120\n"));
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);

	/* By path, after the format or before it. */
	snprintf(out, sizeof(out), "%s/out.pb.gz", f->dir);
	assert_int_equal(run_export("--db", f->db, "pprof", "--binary", "/srv/app", "-o", out,
				    NULL), 0);
	assert_int_equal(stat(out, &st), 0);
	assert_true(st.st_size > 20);

	/* Usage errors: 2; runtime failures and absent formats: 1, and no file left. */
	assert_int_equal(run_export("folded", "--db", f->db, NULL), 2);
	assert_int_equal(run_export("flames", "--db", f->db, "--binary", "abcd01", NULL), 2);
	assert_int_equal(run_export("folded", "--db", f->db, "--binary", "abcd01", "--weight",
				    "kg", NULL), 2);
	assert_int_equal(run_export("folded", "--db", f->db, "--binary", "abcd01", "extra", NULL), 2);
	assert_int_equal(run_export("memprof-raw", "--db", f->db, "--binary", "abcd01", NULL), 1);
	/* The linker exports (linker_script_gen/): bad options are usage errors. */
	assert_int_equal(run_export("symbol-order", "--db", f->db, "--binary", "abcd01",
				    "--hot-share", "2", NULL), 2);
	assert_int_equal(run_export("ld-script", "--db", f->db, "--binary", "abcd01",
				    "--cold-min-samples", "-1", NULL), 2);
	snprintf(out, sizeof(out), "%s/none.html", f->dir);
	assert_int_equal(run_export("html", "--db", f->db, "--binary", "nosuchid", "-o", out,
				    NULL), 1);
	assert_int_equal(stat(out, &st), -1);
	assert_int_equal(run_export("html", "--db", "/nonexistent/x.db", "--binary", "abcd01",
				    NULL), 1);
	assert_int_equal(run_export("--help", NULL), 0);
}

static void test_strtab(void **state)
{
	struct strtab t = {0};
	size_t idx;
	char key[16];

	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(strtab_intern(&t, key, strlen(key), &idx), 1);
		assert_int_equal(idx, i);
	}
	for (int i = 0; i < 5000; i += 7) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(strtab_intern(&t, key, strlen(key), &idx), 0);
		assert_int_equal(idx, i);
		assert_string_equal(strtab_key(&t, idx), key);
	}
	/* Embedded NULs are part of the key. */
	assert_int_equal(strtab_intern(&t, "a\0b", 3, &idx), 1);
	assert_int_equal(strtab_intern(&t, "a\0c", 3, &idx), 1);
	assert_int_equal(strtab_intern(&t, "a", 1, &idx), 1);
	strtab_free(&t);
}


/* ---- the store's ctx_totals (schema 2) against grouping every MIB row ---- */

struct ctx_list {
	int64_t id[16];
	struct mib m[16];
	unsigned n;
};

static int list_cb(const struct store_ctx_row *r, void *arg)
{
	struct ctx_list *l = arg;

	if (l->n < 16) {
		l->id[l->n] = r->context_id;
		l->m[l->n++] = r->mib;
	}
	return 0;
}

static void test_totals_match_grouping(void **state)
{
	struct fixture *f = *state;
	struct store *w;
	char err[256];

	/* Rewrite one key (UPDATE trigger) and empty another (alloc_count 0 leaves). */
	assert_int_equal(store_open(&w, f->db, STORE_RDWR, err, sizeof(err)), 0);

	struct store_proc app = { .pid = 7, .start_ns = 1, .exe = "/srv/app", .build_id = "abcd01" };
	struct mib bigger = mib_b2, empty = {0};

	bigger.total_size = 99999999;
	OK(store_begin(w));
	OK(store_put_mib(w, &app, 2, ctx_b, 2, BUCKET1, &bigger));
	OK(store_put_mib(w, &app, 3, ctx_c, 2, BUCKET1, &empty));
	OK(store_commit(w));
	store_close(w);

	for (int k = 0; k <= STORE_SORT_ACCESSES; k++) {
		struct store_ctx_filter fast = { .sort = (enum store_sort)k };
		struct store_ctx_filter slow = { .sort = (enum store_sort)k, .since_ns = 1 };
		struct ctx_list a = {0}, b = {0};

		OK(store_query_contexts(f->s, &fast, list_cb, &a));
		OK(store_query_contexts(f->s, &slow, list_cb, &b));
		assert_int_equal(a.n, 3);      /* ctx_c has no allocations left */
		assert_int_equal(a.n, b.n);
		assert_memory_equal(a.id, b.id, sizeof(a.id));
		assert_memory_equal(a.m, b.m, sizeof(a.m));
		if (k == STORE_SORT_BYTES)
			assert_int_equal(a.m[0].total_size, 99999999 + 6400);
	}
}

/* A schema-1 store (no ctx_totals) is read, not refused. */
static void test_older_schema_read(void **state)
{
	struct fixture *f = *state;
	char cmd[256], err[256];
	struct store *r;
	struct ctx_list l = {0};

	store_close(f->s);
	f->s = NULL;
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'DROP TABLE ctx_totals; PRAGMA user_version = 1'",
		 f->db);
	if (system(cmd) != 0)
		skip();
	assert_int_equal(store_open(&r, f->db, STORE_RDONLY, err, sizeof(err)), 0);
	assert_int_equal(store_schema_version(r), 1);
	OK(store_query_contexts(r, NULL, list_cb, &l));
	assert_int_equal(l.n, 4);
	assert_int_equal(l.m[0].total_size, 7340032 * 10);
	store_close(r);
	f->s = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_folded_weights, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pprof_decodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_html_report, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cmd_export, setup, teardown),
		cmocka_unit_test(test_strtab),
		cmocka_unit_test_setup_teardown(test_totals_match_grouping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_older_schema_read, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
