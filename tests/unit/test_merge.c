/* reporter/cmd_merge.c on real SQLite files: two "hosts" with a shared binary and
 * stack, one context only on each, and a colliding (pid, start_ns); the merged
 * database's contexts equal mib_combine() of the inputs, processes stay distinct,
 * binaries/frames/stacks are deduplicated, runs name their source; a newer schema, a
 * non-database and a repeated input are refused without creating the output; the
 * output may be an input; integrity_check is ok and no temp file is left behind; inputs
 * of every older schema version merge without being written, each with what it has;
 * AccessHistograms are copied (none from an input older than schema 6). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include "tests/unit/mpd_cmocka.h"

#include "reporter/merge.h"
#include "store/store.h"

static char dir[64], a[128], b[128], out[128];

static int setup(void **state)
{
	strcpy(dir, "/tmp/test_merge.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(a, sizeof(a), "%s/a.db", dir);
	snprintf(b, sizeof(b), "%s/b.db", dir);
	snprintf(out, sizeof(out), "%s/out.db", dir);
	return 0;
}

static int teardown(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[400];

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
	return 0;
}

static struct mib obj(uint64_t size, uint64_t ats, uint64_t dts, uint32_t cpu)
{
	struct mib m;

	mib_from_object(&m, size, ats, dts, cpu, cpu, 3);
	return m;
}

struct ctx_rec {
	const char *bid;
	uint64_t hash;
	struct mib m;
};

/* Writes one host's DB: process (pid, start), contexts with hashes; the shared stack
 * (hash 1) has frames in libshared (build-id "5a") and the app (build-id "ap"). */
static void host(const char *path, int32_t pid, uint64_t start, const struct ctx_rec *c, int n,
		 const char *fn_name)
{
	struct store *s;
	char err[256];

	assert_int_equal(store_open(&s, path, STORE_RDWR, err, sizeof(err)), 0);
	struct store_run run = { .command = "daemon", .alloc_mode = "exact", .access_mode = "off",
				 .settings = "{\"flush_ms\":500}", .started_ns = 1 };
	int64_t run_id;
	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_run_begin(s, &run, &run_id), 0);
	struct store_proc p = { .pid = pid, .start_ns = start, .exe = "/bin/app", .build_id = "abcd",
				.comm = "app", .run_id = run_id };
	for (int i = 0; i < n; i++) {
		struct store_frame fr[2] = {
			{ .build_id = "5a5a", .path = "/lib/libshared.so", .offset = 0x10 * c[i].hash,
			  .function = fn_name },
			{ .build_id = "abcd", .path = "/bin/app", .offset = 0x99, .function = "main" },
		};
		assert_int_equal(store_put_mib(s, &p, c[i].hash, fr, 2, 60000000000LL * (i + 1), &c[i].m), 0);
	}
	assert_int_equal(store_commit(s), 0);
	store_close(s);
}

static int64_t q(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int64_t v = -1;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

struct got {
	int n;
	struct mib m[8];
	const char *fn0[8];
	char fnbuf[8][32];
};

static int collect(const struct store_ctx_row *r, void *arg)
{
	struct got *g = arg;

	g->m[g->n] = r->mib;
	snprintf(g->fnbuf[g->n], 32, "%s", r->frames[0].function ? r->frames[0].function : "");
	g->n++;
	return 0;
}

static struct got contexts(const char *db)
{
	struct store *s;
	struct got g = {0};
	char err[256];
	struct store_ctx_filter f = { .sort = STORE_SORT_BYTES };

	assert_int_equal(store_open(&s, db, STORE_RDONLY, err, sizeof(err)), 0);
	assert_int_equal(store_query_contexts(s, &f, collect, &g), 0);
	store_close(s);
	return g;
}

static void no_leftovers(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while ((e = readdir(d)))
		assert_null(strstr(e->d_name, ".tmp."));
	closedir(d);
}

static void test_merge_two_hosts(void **state)
{
	struct ctx_rec ca[2] = { { "5a5a", 1, obj(1000, 10, 500, 1) }, { "5a5a", 2, obj(64, 5, 6, 0) } };
	struct ctx_rec cb[2] = { { "5a5a", 1, obj(4000, 100, 200, 3) }, { "5a5a", 3, obj(8, 1, 2, 2) } };
	char err[512];

	host(a, 42, 777, ca, 2, "shared_alloc");
	host(b, 42, 777, cb, 2, NULL);    /* same pid and start: another host */
	{   /* b's stacks were cut before their outermost frame (issue 16) */
		sqlite3 *h;
		assert_int_equal(sqlite3_open(b, &h), SQLITE_OK);
		assert_int_equal(sqlite3_exec(h, "UPDATE stacks SET truncated = 1", NULL, NULL, NULL),
				 SQLITE_OK);
		/* and its run missed processes and was last flushed at 123 (issue 18, v11) */
		assert_int_equal(sqlite3_exec(h, "UPDATE runs SET missed_exec = 3, missed_late = 2,"
					      " missed_unknown = 1, flushed_ns = 123, writer_pid = 99",
					      NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(h);
	}
	const char *in[] = { a, b };
	int r = merge_dbs(out, in, 2, err, sizeof(err));
	if (r)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(r, 0);

	struct got g = contexts(out);
	assert_int_equal(g.n, 3);
	/* Shared stack: one context, counts add, min/max combine, last from the later death. */
	struct mib want = ca[0].m;
	mib_combine(&want, &cb[0].m);
	assert_memory_equal(&g.m[0], &want, sizeof(want));
	assert_int_equal(g.m[0].alloc_count, 2);
	assert_int_equal(g.m[0].total_size, 5000);
	assert_int_equal(g.m[0].min_size, 1000);
	assert_int_equal(g.m[0].max_size, 4000);
	assert_string_equal(g.fnbuf[0], "shared_alloc");   /* the name known on one side kept */
	/* Processes distinct, binaries/frames/stacks shared. */
	assert_int_equal(q(out, "SELECT count(*) FROM processes"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM processes WHERE pid = 42 AND start_ns IN (777, 778)"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM binaries"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM stacks"), 3);
	assert_int_equal(q(out, "SELECT count(*) FROM stacks WHERE truncated = 1"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM frames"), 4);
	assert_int_equal(q(out, "SELECT count(*) FROM contexts"), 3);
	assert_int_equal(q(out, "SELECT count(*) FROM runs"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM runs WHERE missed_exec = 3 AND missed_late = 2"
			   " AND missed_unknown = 1 AND flushed_ns = 123 AND writer_pid = 0"), 1);
	assert_int_equal(q(out, "SELECT count(DISTINCT run_id) FROM processes"), 2);
	char sql[300];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM runs WHERE json_extract(settings, '$.merged_from') = '%s'"
		 " AND json_extract(settings, '$.flush_ms') = 500", b);
	assert_int_equal(q(out, sql), 1);
	assert_int_equal(q(out, "SELECT sum(total_size) FROM mib"), 1000 + 64 + 4000 + 8);
	assert_int_equal(q(out, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
	assert_int_equal(q(out, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	no_leftovers();

	/* Incremental: OUT merged with a fresh copy of a's data (as another host). The output
	 * may be an input, and is replaced atomically. */
	char c[140];
	snprintf(c, sizeof(c), "%s/c.db", dir);
	host(c, 42, 777, ca, 1, NULL);
	const char *in2[] = { out, c };
	assert_int_equal(merge_dbs(out, in2, 2, err, sizeof(err)), 0);
	g = contexts(out);
	assert_int_equal(g.m[0].alloc_count, 3);
	assert_int_equal(q(out, "SELECT count(*) FROM processes"), 3);
	assert_int_equal(q(out, "SELECT count(*) FROM processes WHERE start_ns = 779"), 1);
	no_leftovers();
}

static int collect_hist(const struct store_ctx_row *r, void *arg)
{
	return mib_hist_merge(arg, r->hist.v, r->hist.len);
}

/* One host's context 1 with an AccessHistogram (NULL: none). */
static void host_hist(const char *path, int32_t pid, const uint64_t *v, uint32_t n)
{
	struct ctx_rec c = { "5a5a", 1, obj(1000, 10, 500, 1) };
	struct store *s;
	struct mib_hist h = { (uint64_t *)v, n };
	struct store_proc p = { .pid = pid, .start_ns = 1, .exe = "/bin/app", .build_id = "abcd" };
	struct store_frame fr = { .build_id = "abcd", .path = "/bin/app", .offset = 0x10 };
	char err[256];

	host(path, pid, 1, &c, 0, NULL);       /* schema and run only */
	assert_int_equal(store_open(&s, path, STORE_RDWR, err, sizeof(err)), 0);
	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_put_mib_hist(s, &p, 1, &fr, 1, 0, &c.m, &h), 0);
	assert_int_equal(store_commit(s), 0);
	store_close(s);
}

/* Histograms travel with their rows, and combine in the merged database as
 * MemInfoBlock::Merge combines them; an input older than schema 6 has none. */
static void test_merge_histograms(void **state)
{
	const uint64_t va[] = { 1, 2 }, vb[] = { 3, 0, 5 };
	struct mib_hist got = {0};
	struct store_ctx_filter f = { .hist = true };
	struct store *s;
	char err[512], c[140];

	host_hist(a, 1, va, 2);
	host_hist(b, 2, vb, 3);
	snprintf(c, sizeof(c), "%s/c.db", dir);
	host_hist(c, 3, vb, 3);
	sqlite3 *h;       /* c as schema 5 left it: no access_hist column */
	assert_int_equal(sqlite3_open(c, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "ALTER TABLE mib DROP COLUMN access_hist;"
				      "PRAGMA user_version = 5", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	const char *in[] = { a, b, c };
	int r = merge_dbs(out, in, 3, err, sizeof(err));

	if (r)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(r, 0);
	assert_int_equal(q(out, "SELECT count(*) FROM mib"), 3);
	assert_int_equal(q(out, "SELECT count(*) FROM mib WHERE access_hist IS NULL"), 1);
	assert_int_equal(store_open(&s, out, STORE_RDONLY, err, sizeof(err)), 0);
	assert_int_equal(store_query_contexts(s, &f, collect_hist, &got), 0);
	store_close(s);
	assert_int_equal(got.len, 3);
	assert_int_equal(got.v[0], 4);
	assert_int_equal(got.v[1], 2);
	assert_int_equal(got.v[2], 5);
	mib_hist_free(&got);
}

static void test_refusals(void **state)
{
	struct ctx_rec ca[1] = { { "5a5a", 1, obj(1000, 10, 500, 1) } };
	char err[512], junk[140];

	host(a, 1, 1, ca, 1, NULL);
	host(b, 2, 2, ca, 1, NULL);
	/* Newer schema. */
	sqlite3 *h;
	assert_int_equal(sqlite3_open(b, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	const char *in[] = { a, b };
	assert_int_equal(merge_dbs(out, in, 2, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "newer than this memprofd supports"));
	assert_int_equal(access(out, F_OK), -1);
	/* Not a database. */
	snprintf(junk, sizeof(junk), "%s/junk.db", dir);
	FILE *f = fopen(junk, "w");
	fputs("this is not sqlite, not at all, definitely not a database file......", f);
	fclose(f);
	const char *in2[] = { a, junk };
	assert_true(merge_dbs(out, in2, 2, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "junk.db"));
	/* Missing file, repeated input, none at all. */
	const char *in3[] = { a, "/nonexistent.db" };
	assert_int_equal(merge_dbs(out, in3, 2, err, sizeof(err)), -ENOENT);
	const char *in4[] = { a, a };
	assert_int_equal(merge_dbs(out, in4, 2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "given twice"));
	assert_int_equal(merge_dbs(out, in4, 0, err, sizeof(err)), -EINVAL);
	assert_int_equal(access(out, F_OK), -1);
	no_leftovers();
	/* The command line: usage errors are 2, failures 1. */
	char *argv1[] = { "merge", NULL };
	assert_int_equal(cmd_merge(1, argv1), 2);
	char *argv2[] = { "merge", "-o", out, b, NULL };
	assert_int_equal(cmd_merge(4, argv2), 1);
	char *argv3[] = { "merge", "-o", out, a, NULL };
	assert_int_equal(cmd_merge(4, argv3), 0);
	assert_int_equal(q(out, "SELECT count(*) FROM mib"), 1);
}

/* ---- inputs of every older schema version ---- */

static void exec_ok(sqlite3 *h, const char *sql)
{
	if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(h));
}

#define MIB_NAME(f, agg) ", " #f
#define MIB_PARAM(f, agg) ", ?"
#define MIB_BIND(f, agg) sqlite3_bind_int64(st, i++, (int64_t)m->f);

/* A database exactly as memprofd with schema `version` wrote it: the first `version`
 * migrations and that version's columns, with one shared context (stack hash 777,
 * frames "leaf" <- "main" in /bin/app) holding m, in a run and process of its own. */
static void old_host(const char *path, int version, const struct mib *m)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	char sql[1024];
	unsigned char blob[16] = { 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0 };

	unlink(path);
	assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
	for (int v = 0; v < version; v++)
		exec_ok(h, store__migration_sql(v));
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d;"
		 "INSERT INTO binaries(id, build_id, path) VALUES (1, 'aaaa', '/bin/app');"
		 "INSERT INTO frames(id, binary_id, offset, function) VALUES (1, 1, 256, 'leaf'),"
		 " (2, 1, 512, 'main');"
		 "INSERT INTO contexts(id, stack_id, binary_id) VALUES (1, 1, 1);"
		 "INSERT INTO runs(id, command, started_ns, ended_ns, status)"
		 " VALUES (1, 'v%d', %d, %d, 'ok');"
		 "INSERT INTO processes(id, pid, start_ns, binary_id, run_id, comm)"
		 " VALUES (1, %d, 5, 1, 1, 'app');", version, version, version, version + 1,
		 100 + version);
	exec_ok(h, sql);
	assert_int_equal(sqlite3_prepare_v2(h, "INSERT INTO stacks(id, hash, nframes, frames)"
					    " VALUES (1, 777, 2, ?1)", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_blob(st, 1, blob, sizeof(blob), SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	snprintf(sql, sizeof(sql), "INSERT INTO mib(context_id, process_id,%s bucket_start"
		 STORE__MIB_FIELDS(MIB_NAME) ") VALUES (1, 1,%s 60000000000" STORE__MIB_FIELDS(MIB_PARAM)
		 ")", version >= 5 ? " run_id," : "", version >= 5 ? " 1," : "");
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	int i = 1;
	STORE__MIB_FIELDS(MIB_BIND)
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	if (version >= 3)
		exec_ok(h, "INSERT INTO frame_lines(frame_id, depth, function, file, line, col)"
			   " VALUES (1, 0, 'inl', 'app.h', 3, 1), (1, 1, 'leaf', 'app.c', 42, 7)");
	if (version >= 4) {
		snprintf(sql, sizeof(sql), "UPDATE runs SET access_source = 'soft',"
			 " access_reasons = 'pebs: no PMU';"
			 "INSERT INTO data_access VALUES (1, 1, 'g_var', 16384, '.data', 8, %d, %d);"
			 "INSERT INTO access_classes VALUES (1, 'static', %d, %d);",
			 version, 10 * version, version, 10 * version);
		exec_ok(h, sql);
	}
	if (version >= 14)   /* issue 22: memory_limit drops (v15 adds columns) */
		exec_ok(h, "INSERT INTO mem_drops(run_id, aggregates, objects, limit_bytes)"
			   " VALUES (1, 14, 140, 1048576)");
	sqlite3_close(h);
	assert_int_equal(chmod(path, 0444), 0);
}

static int find_leaf(const struct store_ctx_row *r, void *arg)
{
	if (r->frames[0].function && !strcmp(r->frames[0].function, "leaf"))
		*(struct mib *)arg = r->mib;
	return 0;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	*len = (size_t)ftell(f);
	rewind(f);
	buf = malloc(*len + 1);
	assert_int_equal(fread(buf, 1, *len, f), *len);
	fclose(f);
	return buf;
}

static void test_merge_every_version(void **state)
{
	enum { NOLD = STORE_SCHEMA_VERSION - 1 };
	char paths[NOLD][140], err[512];
	const char *in[NOLD + 1];
	char *before[NOLD];
	size_t blen[NOLD];
	struct mib want = { 0 }, got = { 0 };

	for (int v = 1; v <= NOLD; v++) {
		struct mib m = obj(100 * (uint64_t)v, 10 * (uint64_t)v, 20 * (uint64_t)v, (uint32_t)v);

		m.alloc_samples = 0;   /* schema < 9 rows have no evidence columns: 0, unknown */
		/* old_host writes no density extremes (issue 17): NULL, unknown */
		m.has_density = 0;
		m.min_access_density = m.max_access_density = 0;
		m.min_lifetime_access_density = m.max_lifetime_access_density = 0;

		snprintf(paths[v - 1], sizeof(paths[v - 1]), "%s/v%d.db", dir, v);
		old_host(paths[v - 1], v, &m);
		mib_combine(&want, &m);
		in[v - 1] = paths[v - 1];
		before[v - 1] = slurp(paths[v - 1], &blen[v - 1]);
	}
	/* And one of this version, with a governor record. */
	struct ctx_rec cur[1] = { { "5a5a", 1, obj(4000, 100, 200, 3) } };
	host(a, 42, 777, cur, 1, "now");
	{
		struct store *s;
		struct store_governor g = { .at_ns = 9, .budget = 0.01, .cpu = 0.5, .min_scale = 0.5,
					    .ticks = 3, .action = "at_floor", .decision = "over budget",
					    .src = { { "access", 0.5, 500, "Hz", 7 } }, .nsrc = 1,
					    .targets = { 3, 1, 0, "99 /usr/bin/bare" } };

		assert_int_equal(store_open(&s, a, STORE_RDWR, err, sizeof(err)), 0);
		assert_int_equal(store_begin(s), 0);
		struct store_mem_drops md = { .aggregates = 15, .objects = 150, .limit_bytes = 2 << 20,
					      .peak_bytes = 3 << 20, .stop_records = 4,
					      .stop_aggregates = 5, .stop_objects = 6,
					      .stop_budget_ms = 2000 };

		assert_int_equal(store_put_governor(s, 1, &g), 0);
		assert_int_equal(store_put_mem_drops(s, 1, &md), 0);
		assert_int_equal(store_commit(s), 0);
		store_close(s);
	}
	in[NOLD] = a;
	int r = merge_dbs(out, in, NOLD + 1, err, sizeof(err));
	if (r)
		fail_msg("%s", err);

	/* The shared context: every version's row, combined as one. */
	struct store *s;
	struct store_ctx_filter f = { .sort = STORE_SORT_BYTES };
	assert_int_equal(store_open(&s, out, STORE_RDONLY, err, sizeof(err)), 0);
	assert_int_equal(store_query_contexts(s, &f, find_leaf, &got), 0);
	store_close(s);
	assert_memory_equal(&got, &want, sizeof(want));
	assert_int_equal(got.alloc_count, NOLD);
	assert_int_equal(q(out, "SELECT count(*) FROM contexts"), 2);
	assert_int_equal(q(out, "SELECT count(*) FROM runs"), NOLD + 1);
	assert_int_equal(q(out, "SELECT count(*) FROM processes"), NOLD + 1);
	/* Each row in its own input's run (before v5: its process's run). */
	assert_int_equal(q(out, "SELECT count(*) FROM mib m JOIN processes p ON p.id = m.process_id"
			      " WHERE m.run_id <> p.run_id OR m.run_id = 0"), 0);
	/* What older versions lack is absent, what they have is kept. */
	assert_int_equal(q(out, "SELECT count(*) FROM runs WHERE access_source = 'soft'"
			      " AND access_reasons = 'pebs: no PMU'"), NOLD - 3);
	assert_int_equal(q(out, "SELECT count(*) FROM data_access"), NOLD - 3);
	/* version v's input holds v samples, from v4 on */
	assert_int_equal(q(out, "SELECT sum(access_samples) FROM data_access"),
			 (NOLD * (NOLD + 1) - 3 * 4) / 2);
	assert_int_equal(q(out, "SELECT count(*) FROM access_classes"), NOLD - 3);
	assert_int_equal(q(out, "SELECT count(*) FROM frame_lines"), 2);   /* one frame's, once */
	assert_int_equal(q(out, "SELECT line FROM frame_lines f JOIN frames r ON r.id = f.frame_id"
			      " WHERE r.function = 'leaf' AND f.depth = 1"), 42);
	assert_int_equal(q(out, "SELECT count(*) FROM governor g JOIN runs r ON r.id = g.run_id"
			      " WHERE r.command = 'daemon' AND g.ticks = 3"), 1);
	assert_int_equal(q(out, "SELECT count(*) FROM governor_sources s JOIN governor g"
			      " ON g.run_id = s.run_id WHERE s.rate = 500"), 1);
	assert_int_equal(q(out, "SELECT count(*) FROM daemon_targets t JOIN governor g ON g.run_id ="
			      " t.run_id WHERE t.traced = 3 AND t.unsampled_list = '99 /usr/bin/bare'"), 1);
	/* issue 22: a v14 run's drops without the v15 figures (0), this version's with them. */
	assert_int_equal(q(out, "SELECT count(*) FROM mem_drops d JOIN runs r ON r.id = d.run_id"
			      " WHERE r.command = 'v14' AND d.objects = 140 AND d.peak_bytes = 0"
			      " AND d.stop_budget_ms = 0"), 1);
	assert_int_equal(q(out, "SELECT count(*) FROM mem_drops d JOIN runs r ON r.id = d.run_id"
			      " WHERE r.command = 'daemon' AND d.objects = 150 AND d.peak_bytes = 3145728"
			      " AND d.stop_records = 4 AND d.stop_aggregates = 5 AND d.stop_objects = 6"
			      " AND d.stop_budget_ms = 2000"), 1);
	assert_int_equal(q(out, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(q(out, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
	assert_int_equal(q(out, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	/* The inputs were only read: same bytes, same version, no journal or WAL beside them. */
	for (int v = 1; v <= NOLD; v++) {
		size_t n;
		char *now = slurp(paths[v - 1], &n), side[sizeof(paths[0]) + 16];

		assert_int_equal(n, blen[v - 1]);
		assert_memory_equal(now, before[v - 1], n);
		assert_int_equal(q(paths[v - 1], "PRAGMA user_version"), v);
		for (const char *sfx = "-wal"; sfx; sfx = strcmp(sfx, "-wal") ? NULL : "-journal") {
			snprintf(side, sizeof(side), "%.139s%s", paths[v - 1], sfx);
			assert_int_equal(access(side, F_OK), -1);
		}
		free(now);
		free(before[v - 1]);
	}
	no_leftovers();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_merge_two_hosts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_histograms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_every_version, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
