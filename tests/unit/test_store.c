/* The store on real SQLite files in a temp dir: exact round trips over flushes, rollback
 * dropping cached ids, PID reuse, migrations and refusals (newer schema, not a database,
 * missing file), a reader beside a writer's open transaction (another process), a
 * kill -9 in the middle of a flush, and the query filters, sort orders and limit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include "tests/unit/mpd_cmocka.h"

#include "store/store.h"

struct fixture {
	char dir[64];
	char db[128];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/test_store.XXXXXX");
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
	const char *sfx[] = { "", "-wal", "-shm", "-journal" };

	for (unsigned i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", f->db, sfx[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/other", f->dir);
	unlink(p);
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct store *open_rw(const char *path)
{
	struct store *s;
	char err[256];
	int r = store_open(&s, path, STORE_RDWR, err, sizeof(err));

	if (r < 0)
		fail_msg("store_open %s: %s", path, err);
	return s;
}

static struct store *open_ro(const char *path)
{
	struct store *s;
	char err[256];
	int r = store_open(&s, path, STORE_RDONLY, err, sizeof(err));

	if (r < 0)
		fail_msg("store_open ro %s: %s", path, err);
	return s;
}

#define OK(expr) do { int _r = (expr); if (_r < 0) fail_msg("%s: %d", #expr, _r); } while (0)

/* ---- sample data ---- */

static const struct store_frame frames_a[] = {
	{ "aaaa", "/usr/bin/app", 0x1234, "cold_path", "_Z9cold_pathv" },
	{ "libc", "/usr/lib/libc.so.6", 0x29d90, NULL, NULL },
	{ "aaaa", "/usr/bin/app", 0x1100, "main", NULL },
};
static const struct store_frame frames_b[] = {
	{ "aaaa", "/usr/bin/app", 0x2000, "hot_path", NULL },
	{ "", NULL, 0x7fff0000, NULL, NULL },
};

static struct store_proc proc(int32_t pid, uint64_t start, const char *exe, const char *bid)
{
	return (struct store_proc){ .pid = pid, .start_ns = start, .ppid = 1, .exe = exe,
				    .build_id = bid, .comm = "app" };
}

/* A MIB with every field distinct, so a swapped column shows. */
static struct mib mib_n(uint64_t n)
{
	return (struct mib){
		.alloc_count = n, .total_size = 1000 * n, .min_size = 10 + n, .max_size = 900 + n,
		.total_lifetime_ns = 5000000 * n, .min_lifetime_ns = 100 + n,
		.max_lifetime_ns = 4000000 + n, .alloc_ts_ns = 7000 + n, .dealloc_ts_ns = 8000 + n,
		.alloc_cpu = (uint32_t)(3 + n), .dealloc_cpu = (uint32_t)(5 + n),
		.num_migrated_cpu = 11 + n, .num_lifetime_overlaps = 13 + n,
		.num_same_alloc_cpu = 17 + n, .num_same_dealloc_cpu = 19 + n,
		.access_samples = 23 + n, .total_access_count = 29 * n, .min_access_count = 31 + n,
		.max_access_count = 37 + n,
	};
}

/* ---- collecting query results ---- */

struct got_ctx {
	struct store_ctx_row row;
	char build_id[64], binary[64];
	unsigned nframes;
	struct { char function[64], build_id[64], path[64], mangled[64]; uint64_t offset;
		 bool has_function, has_mangled; } f[8];
};

struct got {
	struct got_ctx c[16];
	unsigned n;
};

static int collect(const struct store_ctx_row *r, void *arg)
{
	struct got *g = arg;
	struct got_ctx *c = &g->c[g->n++];

	assert_true(g->n <= 16);
	c->row = *r;
	snprintf(c->build_id, sizeof(c->build_id), "%s", r->build_id ? r->build_id : "(null)");
	snprintf(c->binary, sizeof(c->binary), "%s", r->binary ? r->binary : "(null)");
	c->nframes = r->nframes;
	for (unsigned i = 0; i < r->nframes && i < 8; i++) {
		const struct store_frame *fr = &r->frames[i];

		c->f[i].offset = fr->offset;
		c->f[i].has_function = fr->function != NULL;
		c->f[i].has_mangled = fr->mangled != NULL;
		snprintf(c->f[i].function, 64, "%s", fr->function ? fr->function : "");
		snprintf(c->f[i].mangled, 64, "%s", fr->mangled ? fr->mangled : "");
		snprintf(c->f[i].build_id, 64, "%s", fr->build_id ? fr->build_id : "");
		snprintf(c->f[i].path, 64, "%s", fr->path ? fr->path : "");
	}
	c->row.frames = NULL;
	return 0;
}

static struct got query(struct store *s, const struct store_ctx_filter *f)
{
	struct got g = {0};

	OK(store_query_contexts(s, f, collect, &g));
	return g;
}

static void assert_mib_equal(const struct mib *a, const struct mib *b)
{
#define EQ(fld, agg) assert_int_equal(a->fld, b->fld);
	STORE__MIB_FIELDS(EQ)
#undef EQ
}

/* ---- tests ---- */

static void test_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct mib m1 = mib_n(1), m1b = mib_n(4), m2 = mib_n(2), m3 = mib_n(3);

	assert_int_equal(store_schema_version(s), STORE_SCHEMA_VERSION);
	/* Flush 1: context A in bucket 1000, context B. */
	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xa, frames_a, 3, 1000, &m1));
	OK(store_put_mib(s, &p, 0xb, frames_b, 2, 1000, &m3));
	OK(store_commit(s));
	/* Flush 2: A's bucket 1000 rewritten (running aggregate), A in bucket 2000. */
	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xa, frames_a, 3, 1000, &m1b));
	OK(store_put_mib(s, &p, 0xa, NULL, 0, 2000, &m2));   /* frames only read once */
	OK(store_commit(s));

	struct mib want = m1b;

	mib_combine(&want, &m2);
	for (int pass = 0; pass < 2; pass++) {
		struct got g = query(s, NULL);

		assert_int_equal(g.n, 2);
		/* bytes: A = 4000 + 2000 > B = 3000 */
		assert_mib_equal(&g.c[0].row.mib, &want);
		assert_mib_equal(&g.c[1].row.mib, &m3);
		assert_string_equal(g.c[0].build_id, "aaaa");
		assert_string_equal(g.c[0].binary, "/usr/bin/app");
		assert_int_equal(g.c[0].nframes, 3);
		assert_string_equal(g.c[0].f[0].function, "cold_path");
		assert_string_equal(g.c[0].f[0].mangled, "_Z9cold_pathv");
		assert_int_equal(g.c[0].f[0].offset, 0x1234);
		assert_string_equal(g.c[0].f[1].build_id, "libc");
		assert_string_equal(g.c[0].f[1].path, "/usr/lib/libc.so.6");
		assert_false(g.c[0].f[1].has_function);
		assert_false(g.c[0].f[1].has_mangled);
		assert_int_equal(g.c[0].f[1].offset, 0x29d90);
		assert_string_equal(g.c[0].f[2].function, "main");
		assert_int_equal(g.c[1].nframes, 2);
		assert_string_equal(g.c[1].f[1].build_id, "");
		assert_int_equal(g.c[1].f[1].offset, 0x7fff0000);
		/* Again from a fresh reader. */
		if (pass == 0) {
			store_close(s);
			s = open_ro(fx->db);
		}
	}
	store_close(s);
}

/* issue 16 (schema 9): a stack cut before its outermost frame is marked truncated, the
 * others are not; a library first stored without a path is named by a later frame. */
static void test_truncated_and_library_path(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct mib m1 = mib_n(1), m2 = mib_n(2);
	struct store_frame unnamed[1] = { { .build_id = "11bb", .offset = 0x10 } };
	struct store_frame named[2] = { { .build_id = "11bb", .path = "/usr/lib/libz.so.1",
					  .offset = 0x20 }, { .build_id = "aaaa", .offset = 0x30 } };

	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xc1, unnamed, 1, 0, &m1));
	OK(store_mark_truncated(s, 0xc1));
	OK(store_put_mib(s, &p, 0xc2, named, 2, 0, &m2));
	OK(store_commit(s));

	struct got g = query(s, NULL);

	assert_int_equal(g.n, 2);
	assert_int_equal(g.c[0].nframes, 2);          /* m2: more bytes */
	assert_false(g.c[0].row.truncated);
	assert_int_equal(g.c[1].nframes, 1);
	assert_true(g.c[1].row.truncated);
	assert_string_equal(g.c[1].f[0].path, "/usr/lib/libz.so.1");
	store_close(s);
}

static int list_bare(void *arg, int64_t id, const char *build_id, const char *path,
		     uint64_t off)
{
	char *out = arg;
	size_t len = strlen(out);

	(void)id;
	snprintf(out + len, 256 - len, "%s:%s:%llx|", build_id, path, (unsigned long long)off);
	return 0;
}

/* issue 22: bare frames (no name, no lines, a build-id) listed oldest first from an id
 * on, for the daemon's namer; a frame named later (a name or lines) is no longer listed. */
static void test_bare_frames(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct mib m = mib_n(1);
	struct store_line l = { .function = "inl", .file = "a.c", .line = 3 };
	struct store_frame fr[3] = { { .build_id = "11bb", .path = "/lib/z.so", .offset = 0x10 },
				     { .build_id = "aaaa", .path = "/usr/bin/app", .offset = 0x20,
				       .function = "main" },
				     { .build_id = "", .path = "[anon]", .offset = 0x30 } };
	char out[256] = "";

	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xd1, fr, 3, 0, &m));
	OK(store_commit(s));
	assert_int_equal(store_bare_frames(s, 0, 10, list_bare, out), 1);
	assert_string_equal(out, "11bb:/lib/z.so:10|");
	assert_int_equal(store_bare_frames(s, 1 << 20, 10, list_bare, out), 0);
	fr[0].lines = &l;
	fr[0].nlines = 1;
	OK(store_begin(s));
	OK(store_put_frame_symbols(s, &fr[0]));
	OK(store_commit(s));
	out[0] = 0;
	assert_int_equal(store_bare_frames(s, 0, 10, list_bare, out), 0);
	store_close(s);
}

static int collect_lines(const struct store_ctx_row *r, void *arg)
{
	char *out = arg;
	size_t len = strlen(out);

	for (unsigned i = 0; i < r->nframes; i++)
		for (unsigned j = 0; j < r->frames[i].nlines; j++) {
			const struct store_line *l = &r->frames[i].lines[j];
			len += snprintf(out + len, 512 - len, "%u.%u %s %s:%u:%u d%u%s|", i, j,
					l->function, l->file ? l->file : "-", l->line, l->column,
					l->decl_line, l->inlined ? " inl" : "");
		}
	return 0;
}

/* DWARF lines (schema 3): an inline chain per frame survives a round trip in order, and
 * a frame written without lines first keeps the lines written later. */
static void test_frame_lines_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct mib m = mib_n(1);
	const struct store_line chain[] = {
		{ "helper", "_Z6helperv", "app.c", 9, 12, 7, true },
		{ "site", "_Z4sitev", "app.c", 14, 5, 12, false },
	};
	struct store_frame fr[2] = {
		{ .build_id = "aaaa", .offset = 0x1162, .function = "site", .lines = chain, .nlines = 2 },
		{ .build_id = "aaaa", .offset = 0x1200, .function = "main" },
	};
	char got[512] = "";

	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0x51, fr, 2, 0, &m));
	OK(store_commit(s));
	store_close(s);
	s = open_ro(fx->db);
	OK(store_query_contexts(s, NULL, collect_lines, got));
	assert_string_equal(got, "0.0 helper app.c:9:12 d7 inl|0.1 site app.c:14:5 d12|");
	store_close(s);
}

/* ---- AccessHistograms (schema >= 6) ---- */

static int count_rows(const char *db, const char *sql);
static void assert_integrity(const char *db);

struct hist_got {
	unsigned n;
	int64_t ctx[4];
	uint32_t len[4];
	uint64_t v[4][8];
};

static int collect_hist(const struct store_ctx_row *r, void *arg)
{
	struct hist_got *g = arg;

	assert_true(g->n < 4);
	g->ctx[g->n] = r->context_id;
	g->len[g->n] = r->hist.len;
	for (uint32_t i = 0; i < r->hist.len && i < 8; i++)
		g->v[g->n][i] = r->hist.v[i];
	g->n++;
	return 0;
}

static void test_hist_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p1 = proc(100, 1, "/usr/bin/app", "aaaa");
	struct store_proc p2 = proc(200, 2, "/usr/bin/app", "aaaa");
	struct mib m = mib_n(1);
	uint64_t v1[] = { 7, 0, 1 }, v2[] = { 1, 1, 1, 1, 9 }, v3[] = { 100 };
	struct mib_hist h1 = { v1, 3 }, h2 = { v2, 5 }, h3 = { v3, 1 };

	OK(store_begin(s));
	OK(store_put_mib_hist(s, &p1, 0xa, frames_a, 3, 0, &m, &h3));
	OK(store_put_mib_hist(s, &p1, 0xa, frames_a, 3, 0, &m, &h1));   /* replaces h3 */
	OK(store_put_mib_hist(s, &p2, 0xa, frames_a, 3, 0, &m, &h2));
	OK(store_put_mib_hist(s, &p2, 0xa, frames_a, 3, 60, &m, NULL));
	/* A put without one after a put with one: that row has none (statements are reused). */
	OK(store_put_mib(s, &p1, 0xb, frames_b, 2, 0, &m));
	OK(store_commit(s));
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM mib WHERE access_hist IS NULL"), 2);
	assert_int_equal(count_rows(fx->db, "SELECT length(access_hist) FROM mib m JOIN processes p"
				    " ON p.id = m.process_id WHERE p.pid = 100 AND access_hist IS NOT NULL"),
			 3 * 8);

	s = open_ro(fx->db);
	struct hist_got g = {0};
	struct store_ctx_filter f = { .hist = true };

	OK(store_query_contexts(s, &f, collect_hist, &g));
	assert_int_equal(g.n, 2);
	/* Context a: h1 + h2 as MemInfoBlock::Merge adds them (the longer one kept). */
	unsigned a = g.len[0] == 5 ? 0 : 1;

	assert_int_equal(g.len[a], 5);
	assert_int_equal(g.v[a][0], 8);
	assert_int_equal(g.v[a][1], 1);
	assert_int_equal(g.v[a][2], 2);
	assert_int_equal(g.v[a][3], 1);
	assert_int_equal(g.v[a][4], 9);
	assert_int_equal(g.len[1 - a], 0);             /* context b: none */
	/* Filters apply: pid 100 alone has h1. */
	g = (struct hist_got){0};
	f.pid = 100;
	OK(store_query_contexts(s, &f, collect_hist, &g));
	assert_int_equal(g.len[g.len[0] == 3 ? 0 : 1], 3);
	/* Without .hist nothing is read. */
	g = (struct hist_got){0};
	OK(store_query_contexts(s, NULL, collect_hist, &g));
	assert_int_equal(g.len[0] + g.len[1], 0);
	store_close(s);
}

static int count_rows(const char *db, const char *sql);

/* Schema 5: a second recording of the same process (record --pid twice, a daemon
 * restart) in the same bucket adds its own row instead of overwriting the first's. */
static void test_second_run_keeps_first_runs_rows(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct mib m1 = mib_n(1), m2 = mib_n(2);
	struct store_run run = { .command = "pid 100", .alloc_mode = "exact", .access_mode = "off",
				 .settings = "{}", .started_ns = 1 };
	int64_t r1, r2;

	OK(store_begin(s));
	OK(store_run_begin(s, &run, &r1));
	p.run_id = r1;
	OK(store_put_mib(s, &p, 0xa, frames_a, 3, 1000, &m1));
	OK(store_commit(s));
	store_close(s);
	s = open_rw(fx->db);                     /* the recorder restarts */
	OK(store_begin(s));
	OK(store_run_begin(s, &run, &r2));
	p.run_id = r2;
	OK(store_put_mib(s, &p, 0xa, frames_a, 3, 1000, &m2));
	OK(store_commit(s));

	struct mib want = m1;
	mib_combine(&want, &m2);
	struct got g = query(s, NULL);
	assert_int_equal(g.n, 1);
	assert_mib_equal(&g.c[0].row.mib, &want);
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM mib"), 2);
}

static void test_combine_across_processes(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p1 = proc(100, 1, "/usr/bin/app", "aaaa");
	struct store_proc p2 = proc(200, 2, "/usr/bin/app", "aaaa");
	struct mib a = {0}, b = {0}, o;

	mib_from_object(&o, 100, 10, 5000, 0, 0, 3);
	mib_merge(&a, &o);
	mib_from_object(&o, 50, 20, 30, 1, 1, 0);
	mib_merge(&a, &o);
	mib_from_object(&o, 10, 40, 9000, 2, 1, 8);
	mib_merge(&b, &o);
	OK(store_begin(s));
	OK(store_put_mib(s, &p1, 0xa, frames_a, 3, 0, &a));
	OK(store_put_mib(s, &p2, 0xa, frames_a, 3, 0, &b));
	/* An empty MIB is stored but changes nothing, as for mib_combine(). */
	struct mib empty = {0};

	OK(store_put_mib(s, &p2, 0xa, frames_a, 3, 60, &empty));
	OK(store_commit(s));

	struct mib want = a;

	mib_combine(&want, &b);

	struct got g = query(s, NULL);

	assert_int_equal(g.n, 1);
	assert_mib_equal(&g.c[0].row.mib, &want);
	assert_int_equal(g.c[0].row.mib.dealloc_ts_ns, 9000);   /* b's object died last */
	store_close(s);
}

/* Per-object density extremes (issue 17) survive the store: rows of two processes combine
 * to the extremes of their objects; a row without them (has_density false, stored NULL)
 * makes the context's unknown. */
static void test_density_extremes_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p1 = proc(100, 1, "/usr/bin/app", "aaaa");
	struct store_proc p2 = proc(200, 2, "/usr/bin/app", "aaaa");
	struct mib a, b, c = { .alloc_count = 1, .total_size = 8, .min_size = 8, .max_size = 8 };

	mib_from_object(&a, 100, 0, 1000000000ull, 0, 0, 1000);
	mib_from_object(&b, 10000, 0, 2000000, 0, 0, 2000);
	OK(store_begin(s));
	OK(store_put_mib(s, &p1, 0xa, frames_a, 3, 0, &a));
	OK(store_put_mib(s, &p2, 0xa, frames_a, 3, 0, &b));
	OK(store_put_mib(s, &p1, 0xb, frames_b, 2, 0, &a));
	OK(store_put_mib(s, &p1, 0xb, frames_b, 2, 60, &c));
	OK(store_commit(s));

	struct got g = query(s, NULL);

	assert_int_equal(g.n, 2);
	for (unsigned i = 0; i < g.n; i++) {
		const struct mib *m = &g.c[i].row.mib;

		if (m->alloc_count == 2 && m->max_size == 10000) {
			assert_true(m->has_density);
			assert_true(m->min_access_density == 0.2);
			assert_true(m->max_access_density == 10.0);
			assert_true(m->min_lifetime_access_density == 10.0);
			assert_true(m->max_lifetime_access_density == 100.0);
		} else {
			assert_false(m->has_density);
		}
	}
	store_close(s);
}

/* The stall factor's error of an access estimate (schema 15) survives the store and
 * combines in quadrature over the rows of a context. */
static void test_access_est_err_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p1 = proc(100, 1, "/usr/bin/app", "aaaa");
	struct store_proc p2 = proc(200, 2, "/usr/bin/app", "aaaa");
	struct mib a, b;

	mib_from_object(&a, 100, 0, 1000000000ull, 0, 0, 1000);
	mib_from_object(&b, 100, 0, 1000000000ull, 0, 0, 3000);
	a.access_est_err = 120;
	b.access_est_err = 300;
	a.total_access_bytes = 8000;   /* schema 17: bytes accessed, rows add */
	b.total_access_bytes = 12000;
	OK(store_begin(s));
	OK(store_put_mib(s, &p1, 0xa, frames_a, 3, 0, &a));
	OK(store_put_mib(s, &p2, 0xa, frames_a, 3, 0, &b));
	OK(store_commit(s));

	struct got g = query(s, NULL);

	assert_int_equal(g.n, 1);
	assert_int_equal(g.c[0].row.mib.total_access_count, 4000);
	assert_int_equal(g.c[0].row.mib.access_est_err, 420);   /* rows add: 120 + 300 */
	assert_int_equal(g.c[0].row.mib.total_access_bytes, 20000);
	store_close(s);
}

/* A schema-5 file with one MIB row: a reader of it gets no histograms; a writer adds the
 * column (v6) and keeps the row. */
static void test_migrate_v5_hist(void **state)
{
	struct fixture *fx = *state;
	sqlite3 *h;

	assert_int_equal(sqlite3_open(fx->db, &h), SQLITE_OK);
	for (int v = 0; v < 5; v++)
		if (sqlite3_exec(h, store__migration_sql(v), NULL, NULL, NULL) != SQLITE_OK)
			fail_msg("step %d: %s", v, sqlite3_errmsg(h));
	assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 5;"
		"INSERT INTO binaries(build_id, path) VALUES ('aaaa', '/usr/bin/app');"
		"INSERT INTO frames(binary_id, offset, function) VALUES (1, 16, 'f');"
		"INSERT INTO stacks(hash, nframes, frames) VALUES (9, 1, x'0100000000000000');"
		"INSERT INTO contexts(stack_id, binary_id) VALUES (1, 1);"
		"INSERT INTO processes(pid, start_ns, binary_id) VALUES (5, 6, 1);"
		"INSERT INTO mib VALUES (1, 1, 0, 0, 2, 64, 32, 32, 10, 5, 5, 1, 2, 0, 0, 0, 0,"
		" 0, 0, 1, 10, 5, 5);", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	struct store *s = open_ro(fx->db);
	struct hist_got g = {0};
	struct store_ctx_filter f = { .hist = true };

	OK(store_query_contexts(s, &f, collect_hist, &g));
	assert_int_equal(g.n, 1);
	assert_int_equal(g.len[0], 0);
	store_close(s);
	s = open_rw(fx->db);
	store_close(s);
	assert_int_equal(count_rows(fx->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM mib WHERE alloc_count = 2"
				    " AND total_access_count = 10 AND access_hist IS NULL"), 1);
	assert_integrity(fx->db);
}

static int count_rows(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int n = -1;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

static void assert_integrity(const char *db)
{
	sqlite3 *h;
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA foreign_key_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);   /* no dangling references */
	sqlite3_finalize(st);
	sqlite3_close(h);
}

static void test_rollback_discards_ids(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(100, 555, "/usr/bin/app", "aaaa");
	struct store_proc q = proc(101, 556, "/usr/bin/other", "bbbb");
	struct mib m1 = mib_n(1), m2 = mib_n(2);

	/* Something committed first, so the caches hold both kinds of entries. */
	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xb, frames_b, 2, 0, &m1));
	OK(store_commit(s));
	/* New process, binaries, frames, stack and context, then a rollback. */
	OK(store_begin(s));
	OK(store_put_mib(s, &q, 0xa, frames_a, 3, 0, &m2));
	OK(store_put_mib(s, &p, 0xa, frames_a, 3, 0, &m2));
	OK(store_rollback(s));
	/* The same again: with stale cached ids this would hit FOREIGN KEY failures. */
	OK(store_begin(s));
	OK(store_put_mib(s, &q, 0xa, frames_a, 3, 0, &m2));
	OK(store_commit(s));

	struct got g = query(s, NULL);

	assert_int_equal(g.n, 2);
	assert_string_equal(g.c[0].binary, "/usr/bin/other");  /* 2000 bytes */
	assert_mib_equal(&g.c[0].row.mib, &m2);
	assert_int_equal(g.c[0].nframes, 3);
	assert_string_equal(g.c[0].f[0].function, "cold_path");
	assert_mib_equal(&g.c[1].row.mib, &m1);
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM processes"), 2);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM contexts"), 2);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM stacks"), 2);
	assert_integrity(fx->db);
}

static void test_errors_keep_store_usable(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = proc(1, 1, "/bin/x", "cc");
	struct mib m = mib_n(1);

	OK(store_begin(s));
	assert_int_equal(store_begin(s), -EBUSY);
	assert_non_null(strstr(store_errmsg(s), "already open"));
	assert_int_equal(store_put_mib(s, &p, 1, NULL, 2, 0, &m), -EINVAL);
	OK(store_rollback(s));
	assert_int_equal(store_commit(s), -EINVAL);
	/* Outside a transaction writes autocommit. */
	OK(store_put_mib(s, &p, 1, frames_b, 2, 0, &m));
	struct store_frame big = { "cc", "/bin/x", 1, "f", NULL };
	struct store_frame *many = calloc(STORE_MAX_FRAMES + 1, sizeof(*many));

	for (unsigned i = 0; i <= STORE_MAX_FRAMES; i++)
		many[i] = big;
	assert_int_equal(store_put_mib(s, &p, 2, many, STORE_MAX_FRAMES + 1, 0, &m), -E2BIG);
	free(many);
	store_close(s);

	s = open_ro(fx->db);
	assert_int_equal(store_put_mib(s, &p, 1, frames_b, 2, 0, &m), -EROFS);
	assert_int_equal(store_begin(s), -EROFS);
	assert_int_equal(query(s, NULL).n, 1);
	store_close(s);
}

struct procs_got { struct store_proc_row r[8]; char exe[8][64]; unsigned n; };

static int collect_proc(const struct store_proc_row *r, void *arg)
{
	struct procs_got *g = arg;

	g->r[g->n] = *r;
	snprintf(g->exe[g->n], 64, "%s", r->exe ? r->exe : "");
	g->n++;
	return 0;
}

static void test_pid_reuse(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc old = proc(4242, 1000, "/usr/bin/app", "aaaa");
	struct store_proc reused = proc(4242, 99000, "/usr/bin/app", "aaaa");
	struct mib m1 = mib_n(1), m2 = mib_n(2);
	int64_t run;
	struct store_run run_desc = { .command = "app --x", .alloc_mode = "exact",
				      .access_mode = "off", .settings = "{}", .started_ns = 5 };

	OK(store_run_begin(s, &run_desc, &run));
	old.run_id = run;
	reused.run_id = run;
	OK(store_begin(s));
	OK(store_put_mib(s, &old, 0xa, frames_a, 3, 0, &m1));
	OK(store_proc_exit(s, &old, 123456789));
	OK(store_put_mib(s, &reused, 0xa, frames_a, 3, 0, &m2));
	OK(store_commit(s));

	struct procs_got pg = {0};
	struct store_proc_filter pf = { .pid = 4242 };

	OK(store_query_processes(s, &pf, collect_proc, &pg));
	assert_int_equal(pg.n, 2);
	/* Most recent first. */
	assert_int_equal(pg.r[0].start_ns, 99000);
	assert_int_equal(pg.r[0].exit_ns, 0);
	assert_int_equal(pg.r[0].alloc_count, 2);
	assert_int_equal(pg.r[1].start_ns, 1000);
	assert_int_equal(pg.r[1].exit_ns, 123456789);
	assert_int_equal(pg.r[1].run_id, run);
	assert_int_equal(pg.r[1].contexts, 1);
	assert_string_equal(pg.exe[1], "/usr/bin/app");

	/* Both instances belong to the same context, combined. */
	struct store_ctx_filter cf = { .pid = 4242 };
	struct got g = query(s, &cf);
	struct mib want = m1;

	mib_combine(&want, &m2);
	assert_int_equal(g.n, 1);
	assert_mib_equal(&g.c[0].row.mib, &want);
	store_close(s);
}

struct runs_got {
	struct store_run_row r[4];
	char status[4][32], source[4][32], reasons[4][128];
	bool source_null[4], reasons_null[4];
	unsigned n;
};

static int collect_run(const struct store_run_row *r, void *arg)
{
	struct runs_got *g = arg;

	g->r[g->n] = *r;
	snprintf(g->status[g->n], 32, "%s", r->stats.status ? r->stats.status : "");
	snprintf(g->source[g->n], 32, "%s", r->access_source ? r->access_source : "");
	snprintf(g->reasons[g->n], 128, "%s", r->access_reasons ? r->access_reasons : "");
	g->source_null[g->n] = !r->access_source;
	g->reasons_null[g->n] = !r->access_reasons;
	g->n++;
	return 0;
}

static void test_runs(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_run rd = { .command = "pid 7", .alloc_mode = "sampled",
				.access_mode = "soft", .settings = "{\"freq\":99}", .started_ns = 10 };
	struct store_run_stats st = { .events = 1, .drops_ringbuf = 2, .drops_live_full = 3,
				      .drops_state_full = 4, .drops_stack = 5, .unmatched_frees = 6,
				      .overwritten = 7, .unresolved_frames = 8, .status = "running" };
	int64_t id;

	OK(store_run_begin(s, &rd, &id));
	OK(store_run_update(s, id, &st));
	st.ended_ns = 99;
	st.status = "ok";
	st.events = 1000;
	OK(store_run_update(s, id, &st));
	assert_int_equal(store_run_update(s, id + 100, &st), -ENOENT);
	store_close(s);

	s = open_ro(fx->db);

	struct runs_got g = {0};

	OK(store_query_runs(s, collect_run, &g));
	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].id, id);
	assert_int_equal(g.r[0].run.started_ns, 10);
	assert_int_equal(g.r[0].stats.ended_ns, 99);
	assert_int_equal(g.r[0].stats.events, 1000);
	assert_int_equal(g.r[0].stats.drops_ringbuf, 2);
	assert_int_equal(g.r[0].stats.drops_live_full, 3);
	assert_int_equal(g.r[0].stats.drops_state_full, 4);
	assert_int_equal(g.r[0].stats.drops_stack, 5);
	assert_int_equal(g.r[0].stats.unmatched_frees, 6);
	assert_int_equal(g.r[0].stats.overwritten, 7);
	assert_int_equal(g.r[0].stats.unresolved_frames, 8);
	assert_string_equal(g.status[0], "ok");
	store_close(s);
}

/* issue 18: a run whose writer died is ended as `crashed` at its last flush by the next
 * writer; a run whose writer lives is left running; the missed counters round-trip. */
static void test_crashed_run(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_run rd = { .command = "daemon", .started_ns = 10 };
	struct store_run_stats st = { .status = "running", .missed_exec = 1, .missed_late = 2,
				      .missed_unknown = 3, .flushed_ns = 500 };
	int64_t dead, live;
	pid_t child = (pid_t)mpd_reaped_pid();

	OK(store_begin(s));
	OK(store_run_begin(s, &rd, &dead));
	OK(store_run_update(s, dead, &st));
	OK(store_run_begin(s, &rd, &live));
	OK(store_commit(s));
	sqlite3 *db;
	char sql[128];
	assert_int_equal(sqlite3_open(fx->db, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql), "UPDATE runs SET writer_pid = %d WHERE id = %lld", (int)child,
		 (long long)dead);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	OK(store_begin(s));
	assert_int_equal(store_end_crashed_runs(s), 1);
	OK(store_commit(s));
	store_close(s);

	s = open_ro(fx->db);
	struct runs_got g = {0};
	OK(store_query_runs(s, collect_run, &g));
	assert_int_equal(g.n, 2);
	assert_int_equal(g.r[1].id, dead);            /* most recent first */
	assert_string_equal(g.status[1], "crashed");
	assert_int_equal(g.r[1].stats.ended_ns, 500);
	assert_int_equal(g.r[1].stats.missed_exec, 1);
	assert_int_equal(g.r[1].stats.missed_late, 2);
	assert_int_equal(g.r[1].stats.missed_unknown, 3);
	assert_string_equal(g.status[0], "running");
	assert_int_equal(g.r[0].stats.ended_ns, 0);
	store_close(s);
}

/* issue 16 item 6: a binary first stored without a path (a frame of a process gone
 * before its maps were read) is named by the first later writer that knows its path. */
static void test_binary_named_later(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	static const struct store_frame nameless[] = { { "cccc", NULL, 0x10, NULL, NULL } };
	struct store_proc p = proc(300, 1, "", "cccc");
	struct store_proc q = proc(301, 2, "/usr/bin/named", "cccc");
	struct mib m = mib_n(1);

	OK(store_begin(s));
	OK(store_put_mib(s, &p, 0xc, nameless, 1, 1000, &m));
	OK(store_commit(s));
	OK(store_begin(s));
	OK(store_put_mib(s, &q, 0xc, nameless, 1, 1000, &m));
	OK(store_commit(s));
	store_close(s);
	s = open_ro(fx->db);
	struct got g = query(s, NULL);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.c[0].binary, "/usr/bin/named");
	store_close(s);
}

static void test_migrate_empty_file(void **state)
{
	struct fixture *fx = *state;
	FILE *f = fopen(fx->db, "w");

	fclose(f);       /* a zero-length file is an empty SQLite database (version 0) */

	struct store *s;
	char err[256];

	/* A reader refuses a database without the schema... */
	assert_int_equal(store_open(&s, fx->db, STORE_RDONLY, err, sizeof(err)), -ENOMSG);
	assert_null(s);
	assert_non_null(strstr(err, "not a memprofd database"));
	/* ...a writer migrates it. */
	s = open_rw(fx->db);
	assert_int_equal(store_schema_version(s), STORE_SCHEMA_VERSION);
	store_close(s);
	assert_int_equal(count_rows(fx->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
				    " AND name IN ('binaries','processes','frames','stacks',"
				    "'contexts','mib','runs')"), 7);
	/* Reopening does not migrate twice. */
	s = open_rw(fx->db);
	store_close(s);
	assert_integrity(fx->db);

	sqlite3 *h;
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_open(fx->db, &h), SQLITE_OK);
	sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(h);
}

static void test_newer_schema_refused(void **state)
{
	struct fixture *fx = *state;
	sqlite3 *h;
	struct store *s;
	char err[256];

	assert_int_equal(sqlite3_open(fx->db, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "CREATE TABLE future(x); PRAGMA user_version = 99",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	char want[128];

	snprintf(want, sizeof(want), "database schema version 99 is newer than this memprofd "
		 "supports (%d)", STORE_SCHEMA_VERSION);
	assert_int_equal(store_open(&s, fx->db, STORE_RDWR, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_null(s);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, fx->db));
	assert_int_equal(store_open(&s, fx->db, STORE_RDONLY, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, want));
	/* Untouched. */
	assert_int_equal(count_rows(fx->db, "PRAGMA user_version"), 99);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM sqlite_schema"), 1);
}

static void test_not_a_database(void **state)
{
	struct fixture *fx = *state;
	FILE *f = fopen(fx->db, "w");
	char text[4096], back[4096], err[256];
	struct store *s;

	memset(text, 'x', sizeof(text));
	memcpy(text, "this is a text file, not SQLite\n", 32);
	fwrite(text, 1, sizeof(text), f);
	fclose(f);
	for (int ro = 0; ro < 2; ro++) {
		int r = store_open(&s, fx->db, ro ? STORE_RDONLY : STORE_RDWR, err, sizeof(err));

		assert_true(r < 0);
		assert_null(s);
		assert_non_null(strstr(err, "file is not a database"));
		assert_non_null(strstr(err, fx->db));
		assert_null(strchr(err, '\n'));
	}
	f = fopen(fx->db, "r");
	assert_int_equal(fread(back, 1, sizeof(back), f), sizeof(back));
	fclose(f);
	assert_memory_equal(text, back, sizeof(text));   /* the writer did not touch it */
}

static void test_missing_file(void **state)
{
	struct fixture *fx = *state;
	struct store *s;
	char err[256];

	assert_int_equal(store_open(&s, fx->db, STORE_RDONLY, err, sizeof(err)), -ENOENT);
	assert_null(s);
	assert_non_null(strstr(err, fx->db));
	assert_non_null(strstr(err, "No such file"));
	assert_int_equal(access(fx->db, F_OK), -1);   /* a reader never creates it */
	assert_int_equal(store_open(&s, fx->dir, STORE_RDONLY, err, sizeof(err)), -EISDIR);
	assert_int_equal(store_open(&s, "", STORE_RDONLY, err, sizeof(err)), -EINVAL);
}

static void write_flush(const char *db, uint64_t hash, const struct store_frame *fr,
			unsigned n, uint64_t v)
{
	struct store *s = open_rw(db);
	struct store_proc p = proc(1, 1, "/usr/bin/app", "aaaa");
	struct mib m = mib_n(v);

	OK(store_begin(s));
	OK(store_put_mib(s, &p, hash, fr, n, 0, &m));
	OK(store_commit(s));
	store_close(s);
}

static void test_reader_beside_open_writer(void **state)
{
	struct fixture *fx = *state;
	int go[2], ack[2];
	char c;

	write_flush(fx->db, 0xa, frames_a, 3, 1);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ack), 0);

	pid_t pid = fork();

	if (pid == 0) {
		struct store *s;
		struct store_proc p = proc(2, 2, "/usr/bin/app", "aaaa");
		struct mib m = mib_n(5);

		if (store_open(&s, fx->db, STORE_RDWR, NULL, 0) < 0 || store_begin(s) < 0 ||
		    store_put_mib(s, &p, 0xb, frames_b, 2, 0, &m) < 0)
			_exit(1);
		if (write(ack[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		if (store_commit(s) < 0)
			_exit(3);
		store_close(s);
		if (write(ack[1], "y", 1) != 1)
			_exit(4);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(read(ack[0], &c, 1), 1);

	/* The writer holds its transaction (and the write lock): open and read anyway. */
	struct store *r = open_ro(fx->db);

	assert_int_equal(query(r, NULL).n, 1);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(ack[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(query(r, NULL).n, 2);    /* the next query sees the commit */
	store_close(r);

	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(go[0]); close(go[1]); close(ack[0]); close(ack[1]);
}

static void test_kill9_mid_flush(void **state)
{
	struct fixture *fx = *state;

	write_flush(fx->db, 0xa, frames_a, 3, 1);

	pid_t pid = fork();

	if (pid == 0) {
		struct store *s;
		struct store_proc p = proc(3, 3, "/usr/bin/app", "aaaa");
		struct mib m = mib_n(9);
		struct store_frame fr[2] = { frames_b[0], frames_b[1] };

		if (store_open(&s, fx->db, STORE_RDWR, NULL, 0) < 0 || store_begin(s) < 0)
			_exit(1);
		for (unsigned i = 0; i < 5000; i++) {
			fr[0].offset = 0x100000 + i;
			if (store_put_mib(s, &p, 0x1000 + i, fr, 2, 0, &m) < 0)
				_exit(2);
		}
		kill(getpid(), SIGKILL);   /* no commit, no close */
		_exit(3);
	}
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));

	struct store *r = open_ro(fx->db);
	struct got g = query(r, NULL);
	struct mib want = mib_n(1);

	assert_int_equal(g.n, 1);                  /* the last committed flush, intact */
	assert_mib_equal(&g.c[0].row.mib, &want);
	store_close(r);
	assert_integrity(fx->db);
	/* And a writer carries on from there. */
	write_flush(fx->db, 0xb, frames_b, 2, 2);
	r = open_ro(fx->db);
	assert_int_equal(query(r, NULL).n, 2);
	store_close(r);
}

/* Four contexts over two binaries, two pids and two buckets, each ranking differently. */
static void build_query_store(const char *db)
{
	struct store *s = open_rw(db);
	struct store_proc app = proc(10, 1, "/usr/bin/app", "aaaa");
	struct store_proc tool = proc(20, 2, "/usr/bin/tool", "tttt");
	struct store_frame fr = { "aaaa", "/usr/bin/app", 0, "f", NULL };
	/* id: bytes, count, lifetime, accesses; density = accesses/bytes/avg-life */
	struct { uint64_t size, count, life_ns, acc; struct store_proc *p; int64_t bucket; } c[] = {
		{ 4000, 1, 9000000000ull, 10, &app, 1000 },       /* 0: bytes */
		{ 1000, 50, 1000000000ull, 20, &app, 2000 },      /* 1: count */
		{ 2000, 2, 900000000000ull, 30, &tool, 1000 },    /* 2: lifetime */
		{ 100, 3, 3000000000ull, 5000, &tool, 2000 },     /* 3: accesses, density */
	};

	OK(store_begin(s));
	for (unsigned i = 0; i < 4; i++) {
		struct mib m = { .alloc_count = c[i].count, .total_size = c[i].size,
				 .min_size = 1, .max_size = c[i].size, .total_lifetime_ns = c[i].life_ns,
				 .min_lifetime_ns = 1, .max_lifetime_ns = c[i].life_ns,
				 .total_access_count = c[i].acc, .access_samples = 1 };

		fr.offset = 0x100 * (i + 1);
		OK(store_put_mib(s, c[i].p, 0x77 + i, &fr, 1, c[i].bucket, &m));
	}
	OK(store_commit(s));
	store_close(s);
}

static void order_is(struct store *s, struct store_ctx_filter f, const char *want)
{
	struct got g = query(s, &f);
	char got[16] = "";

	for (unsigned i = 0; i < g.n; i++)
		got[i] = (char)('0' + g.c[i].f[0].offset / 0x100 - 1);
	assert_string_equal(got, want);
}

static void test_query_filters_sort_limit(void **state)
{
	struct fixture *fx = *state;

	build_query_store(fx->db);

	struct store *s = open_ro(fx->db);

	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_BYTES }, "0213");
	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_COUNT }, "1320");
	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_LIFETIME }, "2031");
	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_ACCESSES }, "3210");
	/* density: 3 = 5000/100/1 = 50; 1 = 20/1000/0.02... ; see store_lifetime_access_density */
	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_DENSITY }, "3102");
	order_is(s, (struct store_ctx_filter){ .sort = STORE_SORT_BYTES, .limit = 2 }, "02");
	order_is(s, (struct store_ctx_filter){ .binary = "tttt" }, "23");
	order_is(s, (struct store_ctx_filter){ .binary = "/usr/bin/app" }, "01");
	order_is(s, (struct store_ctx_filter){ .binary = "nope" }, "");
	order_is(s, (struct store_ctx_filter){ .pid = 10 }, "01");
	order_is(s, (struct store_ctx_filter){ .pid = 20, .sort = STORE_SORT_ACCESSES }, "32");
	order_is(s, (struct store_ctx_filter){ .since_ns = 1500 }, "13");
	order_is(s, (struct store_ctx_filter){ .until_ns = 1500 }, "02");
	order_is(s, (struct store_ctx_filter){ .since_ns = 1000, .until_ns = 2000 }, "02");
	order_is(s, (struct store_ctx_filter){ .since_ns = 2000, .pid = 20, .limit = 5 }, "3");

	/* The SQL density ordering agrees with the C formula. */
	struct store_ctx_filter df = { .sort = STORE_SORT_DENSITY };
	struct got g = query(s, &df);

	for (unsigned i = 1; i < g.n; i++)
		assert_true(store_lifetime_access_density(&g.c[i - 1].row.mib) >=
			    store_lifetime_access_density(&g.c[i].row.mib));
	assert_true(store_lifetime_access_density(&g.c[0].row.mib) == 50.0);
	store_close(s);
}

static int stop_at_two(const struct store_ctx_row *r, void *arg)
{
	return ++*(int *)arg == 2 ? 42 : 0;
}

static void test_query_callback_stops(void **state)
{
	struct fixture *fx = *state;

	build_query_store(fx->db);

	struct store *s = open_ro(fx->db);
	int n = 0;

	assert_int_equal(store_query_contexts(s, NULL, stop_at_two, &n), 42);
	assert_int_equal(n, 2);
	/* And the store still answers afterwards. */
	assert_int_equal(query(s, NULL).n, 4);
	struct store_ctx_filter bad = { .sort = (enum store_sort)99 };

	assert_int_equal(store_query_contexts(s, &bad, stop_at_two, &n), -EINVAL);
	store_close(s);
}

static void test_density(void **state)
{
	struct mib m = { .alloc_count = 7, .total_size = 7340032, .total_lifetime_ns = 21000000000ull,
			 .total_access_count = 30000 };

	/* DESIGN.md's example: 30000 / 7340032 / 3 s. */
	assert_true(store_lifetime_access_density(&m) == 30000.0 / 7340032.0 / 3.0);
	m.total_lifetime_ns = 7;                    /* under 1 ms on average: 1 ms is used */
	assert_true(store_lifetime_access_density(&m) == 30000.0 / 7340032.0 / 0.001);
	m.total_access_count = 0;
	assert_true(store_lifetime_access_density(&m) == 0.0);
	m = (struct mib){0};
	assert_true(store_lifetime_access_density(&m) == 0.0);
}

/* ---- data-access sampling (schema 4) ---- */

struct data_got {
	unsigned n;
	struct store_data_row r[8];
	char build_id[8][32], binary[8][64], symbol[8][64], section[8][16];
	bool section_null[8];
};

static int collect_data(const struct store_data_row *r, void *arg)
{
	struct data_got *g = arg;
	unsigned i = g->n++;

	assert_true(i < 8);
	g->r[i] = *r;
	snprintf(g->build_id[i], 32, "%s", r->build_id);
	snprintf(g->binary[i], 64, "%s", r->binary);
	snprintf(g->symbol[i], 64, "%s", r->symbol);
	snprintf(g->section[i], 16, "%s", r->section ? r->section : "");
	g->section_null[i] = !r->section;
	return 0;
}

static struct data_got query_data(struct store *s, const struct store_data_filter *f)
{
	struct data_got g = {0};

	OK(store_query_data(s, f, collect_data, &g));
	return g;
}

/* "sym,sym,..." in the order returned. */
static void data_order_is(struct store *s, struct store_data_filter f, const char *want)
{
	struct data_got g = query_data(s, &f);
	char got[256] = "";

	for (unsigned i = 0; i < g.n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "," : "",
			 g.symbol[i]);
	assert_string_equal(got, want);
}

struct class_got { unsigned n; int64_t run[16]; char cls[16][24]; uint64_t samples[16], est[16]; };

static int collect_class(const struct store_access_class_row *r, void *arg)
{
	struct class_got *g = arg;

	assert_true(g->n < 16);
	g->run[g->n] = r->run_id;
	snprintf(g->cls[g->n], 24, "%s", r->cls);
	g->samples[g->n] = r->samples;
	g->est[g->n] = r->est_accesses;
	g->n++;
	return 0;
}

static int64_t new_run(struct store *s, int64_t started_ns, int64_t ended_ns)
{
	struct store_run rd = { .command = "t", .access_mode = "soft", .started_ns = started_ns };
	struct store_run_stats st = { .ended_ns = ended_ns, .status = ended_ns ? "ok" : "running" };
	int64_t id;

	OK(store_run_begin(s, &rd, &id));
	OK(store_run_update(s, id, &st));
	return id;
}

#define SEC 1000000000ll

struct unsym_got { unsigned n; int64_t run_id; char binary[64]; uint64_t samples, est; };
static int unsym_cb(const struct store_unsym_row *r, void *arg)
{
	struct unsym_got *g = arg;

	g->n++;
	g->run_id = r->run_id;
	snprintf(g->binary, sizeof(g->binary), "%s", r->binary ? r->binary : "");
	g->samples = r->samples;
	g->est = r->est_accesses;
	return 0;
}

static void test_data_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	int64_t r1 = new_run(s, 100 * SEC, 110 * SEC), r2 = new_run(s, 200 * SEC, 205 * SEC);
	struct store_data hot = { "aaaa", "/usr/bin/app", "hot_global", ".data", 0x4020, 8,
				  500, 5000000 };
	struct store_data cold = { "aaaa", "/usr/bin/app", "cold_global", ".bss", 0x8000, 4096,
				   1, 100 };
	struct store_data anon = { "", "/usr/lib/noid.so", NULL, NULL, 0x4010, 0, 3, 30 };
	/* Same name, another address: another symbol (a static in another file). */
	struct store_data hot2 = { "aaaa", "/usr/bin/app", "hot_global", ".data", 0x5000, 16,
				   2, 20 };

	OK(store_begin(s));
	OK(store_put_data(s, r1, &hot));
	OK(store_put_data(s, r1, &cold));
	OK(store_put_data(s, r1, &anon));
	OK(store_put_data(s, r1, &hot2));
	hot.access_samples = 100;
	hot.est_accesses = 1000000;
	OK(store_put_data(s, r2, &hot));
	OK(store_commit(s));
	store_close(s);

	s = open_ro(fx->db);
	struct data_got g = query_data(s, NULL);

	assert_int_equal(g.n, 3);
	/* By access samples, summed over the runs; durations summed over the runs with rows. */
	assert_string_equal(g.symbol[0], "hot_global");
	assert_string_equal(g.build_id[0], "aaaa");
	assert_string_equal(g.binary[0], "/usr/bin/app");
	assert_string_equal(g.section[0], ".data");
	assert_int_equal(g.r[0].address, 0x4020);
	assert_int_equal(g.r[0].size, 8);
	assert_int_equal(g.r[0].access_samples, 600);
	assert_int_equal(g.r[0].est_accesses, 6000000);
	assert_int_equal(g.r[0].runs, 2);
	assert_int_equal(g.r[0].observed_ns, 15 * SEC);
	/* no symbol: stored as "", never a data row, counted per binary instead */
	assert_int_equal(g.r[1].address, 0x5000);
	assert_int_equal(g.r[1].access_samples, 2);
	assert_string_equal(g.symbol[2], "cold_global");
	assert_int_equal(g.r[2].runs, 1);
	struct unsym_got u = { 0 };
	OK(store_query_unsymbolized(s, 0, unsym_cb, &u));
	assert_int_equal(u.n, 1);
	assert_int_equal(u.run_id, r1);
	assert_string_equal(u.binary, "/usr/lib/noid.so");
	assert_int_equal(u.samples, 3);
	assert_int_equal(u.est, 30);

	/* Filters: binary by build-id or by path (a binary without one), run start, limit. */
	data_order_is(s, (struct store_data_filter){ .binary = "aaaa" },
		      "hot_global,hot_global,cold_global");
	data_order_is(s, (struct store_data_filter){ .binary = "/usr/lib/noid.so" }, "");
	data_order_is(s, (struct store_data_filter){ .binary = "nope" }, "");
	data_order_is(s, (struct store_data_filter){ .limit = 1 }, "hot_global");
	g = query_data(s, &(struct store_data_filter){ .since_ns = 150 * SEC });
	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].access_samples, 100);
	assert_int_equal(g.r[0].observed_ns, 5 * SEC);
	g = query_data(s, &(struct store_data_filter){ .until_ns = 150 * SEC });
	assert_int_equal(g.n, 3);
	assert_int_equal(g.r[0].access_samples, 500);
	/* Sort keys. Density: hot 6e6/8/15 s, hot2 20/16/10 s, cold 100/4096/10 s. */
	data_order_is(s, (struct store_data_filter){ .sort = STORE_DATA_SORT_SIZE },
		      "cold_global,hot_global,hot_global");
	g = query_data(s, &(struct store_data_filter){ .sort = STORE_DATA_SORT_DENSITY });
	assert_int_equal(g.r[0].address, 0x4020);
	assert_int_equal(g.r[1].address, 0x5000);
	assert_int_equal(g.r[2].address, 0x8000);
	assert_true(store_data_density(6000000, 8, 15 * SEC) == 50000.0);
	assert_true(store_data_density(30, 0, 10 * SEC) == 3.0);
	assert_true(store_data_density(2, 1, 10) == 2000.0);   /* at least 1 ms */
	assert_int_equal(store_query_data(s, &(struct store_data_filter){ .sort = 9 },
					  collect_data, &g), -EINVAL);
	store_close(s);
	assert_integrity(fx->db);
}

static void test_data_absolute_and_running(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	int64_t run = new_run(s, 100 * SEC, 0);        /* still recording */
	struct store_data d = { "aaaa", "/usr/bin/app", "counter", ".data", 0x10, 4, 5, 50 };

	/* Each flush rewrites the running totals: the last one is the value, not a sum. */
	for (uint64_t flush = 1; flush <= 3; flush++) {
		d.access_samples = 10 * flush;
		d.est_accesses = 100 * flush;
		d.section = flush == 3 ? ".bss" : ".data";
		OK(store_begin(s));
		OK(store_put_data(s, run, &d));
		OK(store_put_access_class(s, run, "static", 10 * flush, 100 * flush));
		OK(store_put_access_class(s, run, "heap", flush, 7 * flush));
		OK(store_run_access(s, run, flush == 1 ? "pebs" : "soft",
				    flush == 1 ? NULL : "pebs: no PMU\nibs: not AMD"));
		OK(store_commit(s));
	}
	/* No such run: the reference is checked. */
	assert_int_equal(store_put_data(s, run + 5, &d), -EINVAL);
	assert_int_equal(store_put_access_class(s, run + 5, "heap", 1, 1), -EINVAL);
	assert_int_equal(store_put_access_class(s, run, NULL, 1, 1), -EINVAL);
	assert_int_equal(store_run_access(s, run + 5, "soft", NULL), -ENOENT);
	store_close(s);

	s = open_ro(fx->db);
	struct data_got g = query_data(s, NULL);

	assert_int_equal(g.n, 1);
	assert_int_equal(g.r[0].access_samples, 30);
	assert_int_equal(g.r[0].est_accesses, 300);
	assert_string_equal(g.section[0], ".bss");
	assert_int_equal(g.r[0].observed_ns, 0);        /* running, no now given */
	g = query_data(s, &(struct store_data_filter){ .now_ns = 130 * SEC });
	assert_int_equal(g.r[0].observed_ns, 30 * SEC);  /* running: up to now */

	struct class_got c = {0};

	OK(store_query_access_classes(s, run, collect_class, &c));
	assert_int_equal(c.n, 2);
	assert_string_equal(c.cls[0], "heap");
	assert_int_equal(c.samples[0], 3);
	assert_int_equal(c.est[0], 21);
	assert_string_equal(c.cls[1], "static");
	assert_int_equal(c.samples[1], 30);
	assert_int_equal(c.est[1], 300);
	c = (struct class_got){0};
	OK(store_query_access_classes(s, run + 1, collect_class, &c));
	assert_int_equal(c.n, 0);

	struct runs_got rg = {0};

	OK(store_query_runs(s, collect_run, &rg));
	assert_int_equal(rg.n, 1);
	assert_string_equal(rg.source[0], "soft");
	assert_string_equal(rg.reasons[0], "pebs: no PMU\nibs: not AMD");
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM runs WHERE access_reasons ="
				    " 'pebs: no PMU' || char(10) || 'ibs: not AMD'"), 1);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM data_access"), 1);
}

static void test_data_rollback(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	int64_t run = new_run(s, 100 * SEC, 110 * SEC);
	struct store_data old = { "aaaa", "/usr/bin/app", "kept", ".data", 0x10, 4, 1, 10 };
	struct store_data d = { "cccc", "/usr/lib/new.so", "table", ".rodata", 0x20, 64, 7, 70 };

	OK(store_begin(s));
	OK(store_put_data(s, run, &old));
	OK(store_commit(s));
	/* A new binary interned, then rolled back: its cached id must go with it. */
	OK(store_begin(s));
	OK(store_put_data(s, run, &d));
	old.access_samples = 99;
	OK(store_put_data(s, run, &old));
	OK(store_put_access_class(s, run, "tls", 4, 40));
	OK(store_rollback(s));
	/* With a stale id this fails the FOREIGN KEY to binaries. */
	OK(store_begin(s));
	OK(store_put_data(s, run, &d));
	OK(store_commit(s));
	store_close(s);

	s = open_ro(fx->db);
	data_order_is(s, (struct store_data_filter){0}, "table,kept");
	struct data_got g = query_data(s, &(struct store_data_filter){ .binary = "aaaa" });

	assert_int_equal(g.r[0].access_samples, 1);      /* the rolled-back rewrite is gone */
	struct class_got c = {0};

	OK(store_query_access_classes(s, 0, collect_class, &c));
	assert_int_equal(c.n, 0);
	store_close(s);
	assert_integrity(fx->db);

	/* store_gc keeps a binary that only data symbols refer to. */
	struct store_maint_stats ms = {0};

	s = open_rw(fx->db);
	OK(store_gc(s, &ms));
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM binaries WHERE build_id = 'cccc'"),
			 1);
	assert_integrity(fx->db);
}

/* The schema of a store as text (every object's type, name, table and SQL), with its
 * user_version; *cookie: PRAGMA schema_version, which every DDL statement bumps. */
static char *schema_text(const char *db, int *cookie)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	size_t cap = 1 << 16, len = 0;
	char *out = calloc(1, cap);

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT type || ' ' || name || ' ' || tbl_name || ' ' || "
		"coalesce(sql, '') FROM sqlite_master ORDER BY type, name", -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		len += snprintf(out + len, cap - len, "%s\n", sqlite3_column_text(st, 0));
		assert_true(len < cap);
	}
	sqlite3_finalize(st);
	len += snprintf(out + len, cap - len, "user_version %d\n",
			count_rows(db, "PRAGMA user_version"));
	*cookie = count_rows(db, "PRAGMA schema_version");
	sqlite3_close(h);
	return out;
}

/* A new store is made by one script at the current schema (schema_fresh.h), an old one
 * by its missing steps: both end with the same schema. The fresh one took fewer DDL
 * statements (no ALTER TABLE, no rebuilt mib table): its schema cookie says so. */
static void test_fresh_equals_migrated(void **state)
{
	struct fixture *fx = *state;
	char other[160];
	int fresh_cookie, migrated_cookie;
	sqlite3 *h;

	store_close(open_rw(fx->db));
	snprintf(other, sizeof(other), "%s/other", fx->dir);
	assert_int_equal(sqlite3_open(other, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, store__migration_sql(0), NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 1", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	store_close(open_rw(other));
	char *fresh = schema_text(fx->db, &fresh_cookie), *migrated = schema_text(other, &migrated_cookie);

	assert_string_equal(fresh, migrated);
	char want[32];

	snprintf(want, sizeof(want), "user_version %d\n", STORE_SCHEMA_VERSION);
	assert_non_null(strstr(fresh, want));
	assert_true(fresh_cookie < migrated_cookie);
	free(fresh);
	free(migrated);
}

/* A file as memprofd with schema 3 left it: the first three steps, with a run. */
static void make_v3_file(const char *db)
{
	sqlite3 *h;

	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	for (int v = 0; v < 3; v++) {
		assert_non_null(store__migration_sql(v));
		if (sqlite3_exec(h, store__migration_sql(v), NULL, NULL, NULL) != SQLITE_OK)
			fail_msg("step %d: %s", v, sqlite3_errmsg(h));
	}
	assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 3;"
		"INSERT INTO runs(command, started_ns, ended_ns, status)"
		" VALUES ('old', 10, 20, 'ok');"
		"INSERT INTO binaries(build_id, path) VALUES ('aaaa', '/usr/bin/app');",
		NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static void test_migrate_v3(void **state)
{
	struct fixture *fx = *state;
	struct store *s;
	struct runs_got rg = {0};
	struct data_got g;
	struct class_got c = {0};

	assert_null(store__migration_sql(-1));
	assert_null(store__migration_sql(STORE_SCHEMA_VERSION));
	make_v3_file(fx->db);
	/* A reader reads it as it is: no data, no classes, runs without an access source. */
	s = open_ro(fx->db);
	assert_int_equal(store_schema_version(s), 3);
	OK(store_query_runs(s, collect_run, &rg));
	assert_int_equal(rg.n, 1);
	assert_true(rg.source_null[0]);
	assert_true(rg.reasons_null[0]);
	g = query_data(s, NULL);
	assert_int_equal(g.n, 0);
	OK(store_query_access_classes(s, 0, collect_class, &c));
	assert_int_equal(c.n, 0);
	store_close(s);
	assert_int_equal(count_rows(fx->db, "PRAGMA user_version"), 3);

	/* A writer migrates it to the current version, keeping what was there. */
	s = open_rw(fx->db);
	assert_int_equal(store_schema_version(s), STORE_SCHEMA_VERSION);
	struct store_data d = { "aaaa", "/whatever", "sym", ".data", 0x10, 4, 2, 20 };

	OK(store_begin(s));
	OK(store_put_data(s, 1, &d));                  /* the old run, the old binary */
	OK(store_put_access_class(s, 1, "stack", 5, 50));
	OK(store_run_access(s, 1, "soft", "pebs: no PMU"));
	OK(store_commit(s));
	store_close(s);
	assert_int_equal(count_rows(fx->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM binaries"), 1);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM runs WHERE command = 'old'"
				    " AND access_source = 'soft'"), 1);
	s = open_ro(fx->db);
	g = query_data(s, NULL);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.binary[0], "/usr/bin/app");
	assert_int_equal(g.r[0].observed_ns, 10);
	rg = (struct runs_got){0};
	OK(store_query_runs(s, collect_run, &rg));
	assert_string_equal(rg.source[0], "soft");
	assert_string_equal(rg.reasons[0], "pebs: no PMU");
	store_close(s);
	assert_integrity(fx->db);
}

/* ---- the governor record (schema v7) ---- */

struct gov_got {
	unsigned n;
	int64_t run[4];
	char action[4][16], decision[4][128], history[4][256];
	double cpu[4];
	uint64_t ticks[4], procs[4], cache[4];
	int64_t changed[4];
	unsigned nsrc[4];
	char src_name[4][2][16], src_unit[4][2][8];
	double src_scale[4][2], src_rate[4][2];
	uint64_t traced[4], unsampled[4], skipped[4];
	char unsampled_list[4][64];
};

static int collect_gov(int64_t run_id, const struct store_governor *g, void *arg)
{
	struct gov_got *o = arg;
	unsigned i = o->n++;

	assert_true(i < 4);
	o->run[i] = run_id;
	snprintf(o->action[i], sizeof(o->action[i]), "%s", g->action);
	snprintf(o->decision[i], sizeof(o->decision[i]), "%s", g->decision);
	snprintf(o->history[i], sizeof(o->history[i]), "%s", g->history ? g->history : "(null)");
	o->cpu[i] = g->cpu;
	o->ticks[i] = g->ticks;
	o->procs[i] = g->procs_held;
	o->cache[i] = g->cache_bytes;
	o->changed[i] = g->changed_ns;
	o->nsrc[i] = g->nsrc;
	o->traced[i] = g->targets.traced;
	o->unsampled[i] = g->targets.unsampled;
	o->skipped[i] = g->targets.skipped;
	snprintf(o->unsampled_list[i], sizeof(o->unsampled_list[i]), "%s",
		 g->targets.unsampled_list ? g->targets.unsampled_list : "(null)");
	for (unsigned k = 0; k < g->nsrc && k < 2; k++) {
		snprintf(o->src_name[i][k], sizeof(o->src_name[i][k]), "%s", g->src[k].name);
		snprintf(o->src_unit[i][k], sizeof(o->src_unit[i][k]), "%s",
			 g->src[k].unit ? g->src[k].unit : "(null)");
		o->src_scale[i][k] = g->src[k].scale;
		o->src_rate[i][k] = g->src[k].rate;
	}
	return 0;
}

static void test_governor_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	int64_t r1 = new_run(s, 100 * SEC, 0), r2 = new_run(s, 200 * SEC, 0);
	struct store_governor g = {
		.at_ns = 150 * SEC, .budget = 0.01, .cpu = 0.0234, .min_scale = 1.0 / 64,
		.ticks = 7, .lowered = 2, .raised = 1, .action = "lower", .changed_ns = 149 * SEC,
		.decision = "tick 7: cpu 2.340% of one CPU, budget 1.000%: over budget, lowering",
		.history = "tick 7: lowered\ntick 3: lowered", .rss_bytes = 50 << 20,
		.cache_bytes = 300000, .procs_held = 12, .aggs_held = 40,
		.src = { { "access", 0.25, 250, "Hz", 9000 }, { "alloc", 1, -1, "ignored", 77 } },
		.nsrc = 2,
		.targets = { .traced = 5, .unsampled = 2, .skipped = 1,
			     .unsampled_list = "12 /usr/bin/a\n13 /usr/bin/b" },
	};
	struct gov_got got = {0};

	OK(store_begin(s));
	OK(store_put_governor(s, r1, &g));
	OK(store_commit(s));
	/* A later tick replaces the record, sources included; another run has its own. */
	g.ticks = 8;
	g.action = "hold";
	g.nsrc = 1;
	g.src[0].rate = 500;
	g.history = NULL;
	g.targets.traced = 6;
	g.targets.unsampled_list = NULL;   /* none lacks the sampler now */
	OK(store_begin(s));
	OK(store_put_governor(s, r1, &g));
	g.ticks = 1;
	g.procs_held = 3;
	OK(store_put_governor(s, r2, &g));
	OK(store_commit(s));
	/* A rolled back tick leaves the last committed one. */
	g.ticks = 99;
	OK(store_begin(s));
	OK(store_put_governor(s, r1, &g));
	OK(store_rollback(s));
	/* Bad input is refused, one line, and nothing is written. */
	struct store_governor bad = g;
	bad.action = NULL;
	OK(store_begin(s));
	assert_int_equal(store_put_governor(s, r1, &bad), -EINVAL);
	assert_int_equal(store_put_governor(s, 0, &g), -EINVAL);
	OK(store_rollback(s));
	store_close(s);

	s = open_ro(fx->db);
	OK(store_query_governor(s, r1, collect_gov, &got));
	assert_int_equal(got.n, 1);
	assert_int_equal(got.run[0], r1);
	assert_int_equal(got.ticks[0], 8);
	assert_string_equal(got.action[0], "hold");
	assert_true(got.cpu[0] == 0.0234);
	assert_int_equal(got.changed[0], 149 * SEC);
	assert_int_equal(got.cache[0], 300000);
	assert_string_equal(got.history[0], "(null)");
	assert_int_equal(got.nsrc[0], 1);
	assert_string_equal(got.src_name[0][0], "access");
	assert_true(got.src_scale[0][0] == 0.25);
	assert_true(got.src_rate[0][0] == 500);
	assert_string_equal(got.src_unit[0][0], "Hz");
	assert_int_equal(got.traced[0], 6);        /* the targets of the same tick */
	assert_int_equal(got.unsampled[0], 2);
	assert_int_equal(got.skipped[0], 1);
	assert_string_equal(got.unsampled_list[0], "(null)");
	/* Every run's, newest first. */
	got = (struct gov_got){0};
	OK(store_query_governor(s, 0, collect_gov, &got));
	assert_int_equal(got.n, 2);
	assert_int_equal(got.run[0], r2);
	assert_int_equal(got.procs[0], 3);
	assert_int_equal(got.run[1], r1);
	store_close(s);

	/* Both sources' shapes: a rate with its unit, and none (NULL rate and unit). */
	s = open_rw(fx->db);
	g.nsrc = 2;
	g.src[1] = (struct store_gov_source){ "alloc", 1, -1, "ignored", 77 };
	g.history = "tick 7: lowered\ntick 3: lowered";
	g.targets.unsampled_list = "12 /usr/bin/a\n13 /usr/bin/b";
	OK(store_begin(s));
	OK(store_put_governor(s, r2, &g));
	OK(store_commit(s));
	got = (struct gov_got){0};
	OK(store_query_governor(s, r2, collect_gov, &got));
	assert_string_equal(got.unsampled_list[0], "12 /usr/bin/a\n13 /usr/bin/b");
	assert_int_equal(got.nsrc[0], 2);
	assert_string_equal(got.src_name[0][1], "alloc");      /* by name */
	assert_true(got.src_rate[0][1] < 0);
	assert_string_equal(got.src_unit[0][1], "(null)");
	assert_string_equal(got.history[0], "tick 7: lowered\ntick 3: lowered");
	store_close(s);
	assert_int_equal(count_rows(fx->db, "SELECT count(*) FROM governor_sources WHERE rate IS NULL"), 1);
	assert_integrity(fx->db);

	/* A v7 store (governor, no daemon_targets) reads with zero targets. */
	sqlite3 *h;
	assert_int_equal(sqlite3_open(fx->db, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "DROP TABLE daemon_targets", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	s = open_ro(fx->db);
	got = (struct gov_got){0};
	OK(store_query_governor(s, r2, collect_gov, &got));
	assert_int_equal(got.n, 1);
	assert_int_equal(got.nsrc[0], 2);
	assert_int_equal(got.traced[0], 0);
	assert_string_equal(got.unsampled_list[0], "(null)");
	store_close(s);

	/* A store older than the governor tables has no records, and that is no error. */
	teardown(state);
	setup(state);
	fx = *state;
	make_v3_file(fx->db);
	s = open_ro(fx->db);
	got = (struct gov_got){0};
	OK(store_query_governor(s, 0, collect_gov, &got));
	assert_int_equal(got.n, 0);
	store_close(s);
}

/* store_set_cache bounds the page cache: a 64 KiB cache stays near 64 KiB while many
 * pages are written, where the default one grows far past it. */
static void test_cache_bound(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	uint64_t big = 0, small = 0;
	struct mib m;

	mib_from_object(&m, 64, 1, 2, 0, 0, 0);
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			OK(store_set_cache(s, 64 << 10));
		int64_t run = new_run(s, (pass + 1) * SEC, 0);
		struct store_proc p = { .pid = 100 + pass, .start_ns = 5, .exe = "/bin/app",
					.build_id = "abcd", .comm = "app", .run_id = run };
		OK(store_begin(s));
		for (uint64_t h = 1; h <= 600; h++) {
			struct store_frame fr = { .build_id = "abcd", .offset = h * 16 + pass };
			OK(store_put_mib(s, &p, h * 2 + (uint64_t)pass * 100000, &fr, 1, 60 * SEC, &m));
		}
		OK(store_commit(s));
		if (pass)
			small = store_cache_used(s);
		else
			big = store_cache_used(s);
	}
	store_close(s);
	fprintf(stderr, "page cache: default %llu bytes, bounded %llu bytes\n",
		(unsigned long long)big, (unsigned long long)small);
	assert_true(big > (128 << 10) && big > 2 * small);
	assert_true(small <= (64 << 10) + (16 << 10));   /* a page of slack per the bound */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_frame_lines_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_run_keeps_first_runs_rows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_combine_across_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_access_est_err_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_density_extremes_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback_discards_ids, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_keep_store_usable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pid_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_empty_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_beside_open_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill9_mid_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query_filters_sort_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query_callback_stops, setup, teardown),
		cmocka_unit_test(test_density),
		cmocka_unit_test_setup_teardown(test_data_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_absolute_and_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_v3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hist_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_v5_hist, setup, teardown),
		cmocka_unit_test_setup_teardown(test_governor_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bare_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_and_library_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crashed_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary_named_later, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fresh_equals_migrated, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
