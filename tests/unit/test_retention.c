/* store/retention.c on real SQLite files: compaction keeps every context's combined
 * MIB identical (sums, min/max, last-object fields) while cutting rows, and is
 * idempotent; retention deletes old buckets and garbage-collects what is left without
 * rows, after which the same writer keeps writing (its id caches were dropped); the size
 * bound deletes oldest first and keeps the newest bucket; checkpoints truncate the WAL;
 * integrity_check and foreign_key_check are clean after every step. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>
#include "tests/unit/mpd_cmocka.h"

#include "store/store.h"

#define BUCKET (60LL * 1000000000LL)
#define T0 (1699920000LL * 1000000000LL)      /* a day boundary (UTC) */
#define NCTX 6
#define NPROC 3
#define NBUCKETS 180                          /* three hours of minute buckets */

struct fixture {
	char dir[64], db[128];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/test_retention.XXXXXX");
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
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct store *open_rw(const char *path)
{
	struct store *s;
	char err[256];
	int r = store_open(&s, path, STORE_RDWR, err, sizeof(err));

	if (r)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(r, 0);
	return s;
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static struct mib rnd_mib(int64_t bucket)
{
	struct mib m = {0};
	unsigned n = 1 + rnd() % 5;

	for (unsigned i = 0; i < n; i++) {
		struct mib o;
		uint64_t a = (uint64_t)(bucket - T0) + rnd() % 1000000, d = a + rnd() % 100000000;

		mib_from_object(&o, 1 + rnd() % 4096, a, d, rnd() % 8, rnd() % 8, rnd() % 50);
		o.access_samples = rnd() % 3;
		mib_merge(&m, &o);
	}
	return m;
}

static const char *const bids[NCTX] = { "aa01", "aa01", "aa02", "aa02", "", "aa03" };

static void put(struct store *s, int ctx, int proc, int64_t bucket, const struct mib *m)
{
	struct store_proc p = { .pid = 100 + proc, .start_ns = 5000 + proc, .exe = "/bin/app",
				.build_id = "ee00", .comm = "app" };
	struct store_frame fr[2] = {
		{ .build_id = bids[ctx], .path = "/lib/x.so", .offset = 0x100 + ctx, .function = "f" },
		{ .build_id = "ee00", .path = "/bin/app", .offset = 0x10 + ctx, .function = "main" },
	};

	assert_int_equal(store_put_mib(s, &p, 1000 + ctx, fr, 2, bucket, m), 0);
}

/* Fills NBUCKETS minutes; some rows empty (alloc_count 0), as the writer may store. */
static void fill(struct store *s)
{
	assert_int_equal(store_begin(s), 0);
	for (int b = 0; b < NBUCKETS; b++)
		for (int c = 0; c < NCTX; c++)
			for (int p = 0; p < NPROC; p++) {
				if (rnd() % 4 == 0)
					continue;
				struct mib m = rnd_mib(T0 + b * BUCKET);

				if (rnd() % 17 == 0)
					m = (struct mib){0};
				put(s, c, p, T0 + b * BUCKET, &m);
			}
	assert_int_equal(store_commit(s), 0);
}

struct snap {
	int n;
	int64_t id[64];
	struct mib m[64];
};

static int collect(const struct store_ctx_row *r, void *arg)
{
	struct snap *sn = arg;

	sn->id[sn->n] = r->context_id;
	sn->m[sn->n++] = r->mib;
	return 0;
}

static struct snap snapshot(struct store *s, int32_t pid)
{
	struct snap sn = {0};
	struct store_ctx_filter f = { .sort = STORE_SORT_BYTES, .pid = pid };

	assert_int_equal(store_query_contexts(s, &f, collect, &sn), 0);
	return sn;
}

static void assert_same(const struct snap *a, const struct snap *b)
{
	assert_int_equal(a->n, b->n);
	for (int i = 0; i < a->n; i++) {
		assert_int_equal(a->id[i], b->id[i]);
		assert_memory_equal(&a->m[i], &b->m[i], sizeof(struct mib));
	}
}

static int64_t count(const char *db, const char *sql)
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

static void assert_clean(struct store *s, const char *db)
{
	char msg[256];

	assert_int_equal(store_integrity_check(s, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "ok");
	assert_int_equal(count(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
}

/* Every MIB row, and the expected coarse rows of a compaction computed in C with
 * mib_combine(): (context, process, aligned bucket) -> combined MIB. */
struct row {
	int64_t ctx, proc, bucket;
	struct mib m;
};

#define F_COL(f, agg) ", " #f
static int read_rows(const char *db, struct row **out)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int n = 0, cap = 0;

	*out = NULL;
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT context_id, process_id, bucket_start"
		STORE__MIB_FIELDS(F_COL) STORE__MIB_V9_FIELDS(F_COL) STORE__MIB_V12_FIELDS(F_COL)
		" FROM mib ORDER BY 1, 2, 3", -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			*out = realloc(*out, cap * sizeof(**out));
		}
		struct row *r = &(*out)[n++];
		int c = 3;

		memset(r, 0, sizeof(*r));

		r->ctx = sqlite3_column_int64(st, 0);
		r->proc = sqlite3_column_int64(st, 1);
		r->bucket = sqlite3_column_int64(st, 2);
#define F_READ(f, agg) r->m.f = (uint64_t)sqlite3_column_int64(st, c++);
		STORE__MIB_FIELDS(F_READ)
		STORE__MIB_V9_FIELDS(F_READ)
		/* issue 17: density extremes, NULL when unknown */
		r->m.has_density = 1;
#define F_READ_D(f, agg) r->m.has_density &= sqlite3_column_type(st, c) != SQLITE_NULL; \
		r->m.f = sqlite3_column_double(st, c++);
		STORE__MIB_V12_FIELDS(F_READ_D)
		if (!r->m.has_density)
			r->m.min_access_density = r->m.max_access_density =
			r->m.min_lifetime_access_density = r->m.max_lifetime_access_density = 0;
	}
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

static int expect_compacted(const struct row *in, int n, int64_t cutoff, int64_t width,
			    struct row **out)
{
	int m = 0;

	*out = calloc(n ? n : 1, sizeof(**out));
	for (int i = 0; i < n; i++) {
		if (in[i].bucket >= cutoff || in[i].m.alloc_count == 0)
			continue;
		int64_t b = in[i].bucket - in[i].bucket % width;
		int j;

		for (j = 0; j < m; j++)
			if ((*out)[j].ctx == in[i].ctx && (*out)[j].proc == in[i].proc && (*out)[j].bucket == b)
				break;
		if (j == m)
			(*out)[m++] = (struct row){ in[i].ctx, in[i].proc, b, {0} };
		mib_combine(&(*out)[j].m, &in[i].m);
	}
	return m;
}

static void assert_rows_match(const char *db, const struct row *want, int nwant, int64_t cutoff)
{
	struct row *got;
	int n = read_rows(db, &got), seen = 0;

	for (int i = 0; i < n; i++) {
		if (got[i].bucket >= cutoff)
			continue;
		seen++;
		int j;
		for (j = 0; j < nwant; j++)
			if (want[j].ctx == got[i].ctx && want[j].proc == got[i].proc &&
			    want[j].bucket == got[i].bucket)
				break;
		assert_true(j < nwant);
		assert_memory_equal(&got[i].m, &want[j].m, sizeof(struct mib));
	}
	assert_int_equal(seen, nwant);
	free(got);
}

static void test_compaction_preserves(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_rw(f->db);
	struct store_maint_stats st = {0};

	fill(s);
	struct snap all = snapshot(s, 0), p1 = snapshot(s, 101);
	int64_t rows = count(f->db, "SELECT count(*) FROM mib");
	int64_t sum = count(f->db, "SELECT sum(total_size) FROM mib WHERE alloc_count > 0");

	/* First two hours into 10-minute buckets, then the first hour into hours. */
	struct row *rows_in, *want;
	int nin = read_rows(f->db, &rows_in);
	int nwant = expect_compacted(rows_in, nin, T0 + 120 * BUCKET, 10 * BUCKET, &want);
	assert_int_equal(store_compact(s, T0 + 120 * BUCKET, 10 * BUCKET, &st), 0);
	/* Row by row, each coarse row is exactly mib_combine() of the rows it replaced. */
	assert_rows_match(f->db, want, nwant, T0 + 120 * BUCKET);
	free(rows_in);
	free(want);
	assert_true(st.mib_compacted > 0 && st.mib_created > 0);
	struct snap a2 = snapshot(s, 0), b2 = snapshot(s, 101);
	assert_same(&all, &a2);
	assert_same(&p1, &b2);
	assert_int_equal(count(f->db, "SELECT sum(total_size) FROM mib WHERE alloc_count > 0"), sum);
	int64_t rows2 = count(f->db, "SELECT count(*) FROM mib");
	assert_true(rows2 < rows);
	/* Coarse rows are aligned and unique per (context, process, bucket). */
	assert_int_equal(count(f->db, "SELECT count(*) FROM mib WHERE bucket_start < 1699927200000000000"
			       " AND bucket_start % 600000000000 <> 0"), 0);
	/* The young hour is untouched. */
	assert_int_equal(count(f->db, "SELECT count(DISTINCT bucket_start) FROM mib"
			       " WHERE bucket_start >= 1699927200000000000"), 60);
	/* Idempotent. */
	st = (struct store_maint_stats){0};
	assert_int_equal(store_compact(s, T0 + 120 * BUCKET, 10 * BUCKET, &st), 0);
	assert_int_equal(st.mib_compacted, 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM mib"), rows2);
	/* A coarser tier over already compacted rows. */
	assert_int_equal(store_compact(s, T0 + 60 * BUCKET, 60 * BUCKET, NULL), 0);
	struct snap a3 = snapshot(s, 0);
	assert_same(&all, &a3);
	assert_int_equal(count(f->db, "SELECT count(DISTINCT bucket_start) FROM mib"
			       " WHERE bucket_start < 1699923600000000000"), 1);
	assert_clean(s, f->db);
	/* The writer still works after its caches were dropped: same keys, new bucket. */
	struct mib m = rnd_mib(T0 + NBUCKETS * BUCKET);
	assert_int_equal(store_begin(s), 0);
	put(s, 0, 0, T0 + NBUCKETS * BUCKET, &m);
	assert_int_equal(store_commit(s), 0);
	assert_clean(s, f->db);
	store_close(s);
}

static int collect_hist(const struct store_ctx_row *r, void *arg)
{
	struct mib_hist *h = arg;

	return mib_hist_merge(h, r->hist.v, r->hist.len);
}

/* Compaction folds AccessHistograms as MemInfoBlock::Merge does (store.c's SQL aggregate
 * mib_hist_merge), skipping empty rows like the other columns. */
static void test_compaction_merges_histograms(void **state)
{
	struct fixture *fx = *state;
	struct store *s = open_rw(fx->db);
	struct store_proc p = { .pid = 7, .start_ns = 8, .exe = "/bin/app", .build_id = "ee00" };
	struct store_frame fr = { .build_id = "ee00", .path = "/bin/app", .offset = 0x10 };
	uint64_t v1[] = { 1, 2 }, v2[] = { 10, 0, 30 }, v3[] = { 500 };
	struct mib_hist h1 = { v1, 2 }, h2 = { v2, 3 }, h3 = { v3, 1 }, before = {0}, after = {0};
	struct mib m = rnd_mib(T0), empty = {0};
	struct store_ctx_filter f = { .hist = true };
	struct store_maint_stats ms = {0};

	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_put_mib_hist(s, &p, 77, &fr, 1, T0, &m, &h1), 0);
	assert_int_equal(store_put_mib_hist(s, &p, 77, &fr, 1, T0 + BUCKET, &m, &h2), 0);
	assert_int_equal(store_put_mib_hist(s, &p, 77, &fr, 1, T0 + 2 * BUCKET, &empty, &h3), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(store_query_contexts(s, &f, collect_hist, &before), 0);
	assert_int_equal(store_compact(s, T0 + 10 * BUCKET, 60 * BUCKET, &ms), 0);
	assert_int_equal(ms.mib_created, 1);
	assert_int_equal(store_query_contexts(s, &f, collect_hist, &after), 0);
	assert_int_equal(before.len, 3);
	assert_int_equal(after.len, 3);
	assert_memory_equal(before.v, after.v, 3 * sizeof(uint64_t));
	assert_int_equal(after.v[0], 11);       /* h3 was on an empty row: not counted */
	assert_int_equal(after.v[1], 2);
	assert_int_equal(after.v[2], 30);
	mib_hist_free(&before);
	mib_hist_free(&after);
	assert_clean(s, fx->db);
	store_close(s);
}

static void test_retention_and_gc(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_rw(f->db);
	struct store_maint_stats st = {0};
	struct store_proc gone = { .pid = 999, .start_ns = 1, .exe = "/bin/old", .build_id = "dd00" };
	struct store_frame fr = { .build_id = "dd01", .offset = 0x42, .function = "old_fn" };
	struct mib m = rnd_mib(T0);

	fill(s);
	/* A process with one old row only, exited, with a binary of its own. */
	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_put_mib(s, &gone, 77, &fr, 1, T0, &m), 0);
	assert_int_equal(store_proc_exit(s, &gone, T0 + 1), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM binaries WHERE build_id IN ('dd00','dd01')"), 2);

	assert_int_equal(store_retention_delete(s, T0 + 60 * BUCKET, &st), 0);
	assert_true(st.mib_deleted > 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM mib WHERE bucket_start < 1699923600000000000"), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM processes WHERE pid = 999"), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM stacks WHERE hash = 77"), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM frames WHERE function = 'old_fn'"), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM binaries WHERE build_id IN ('dd00','dd01')"), 0);
	assert_true(st.procs_deleted == 1 && st.stacks_deleted >= 1 && st.frames_deleted >= 1 &&
		    st.binaries_deleted == 2);
	/* Live processes keep their rows even without MIBs; contexts still used stay. */
	assert_int_equal(count(f->db, "SELECT count(*) FROM processes"), NPROC);
	assert_clean(s, f->db);
	/* The same writer re-creates the collected process, stack and frames correctly. */
	assert_int_equal(store_begin(s), 0);
	gone.start_ns = 2;
	assert_int_equal(store_put_mib(s, &gone, 77, &fr, 1, T0 + 200 * BUCKET, &m), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM frames WHERE function = 'old_fn'"), 1);
	assert_clean(s, f->db);
	/* A GC with nothing to collect changes nothing. */
	st = (struct store_maint_stats){0};
	assert_int_equal(store_gc(s, &st), 0);
	assert_int_equal(st.procs_deleted + st.contexts_deleted + st.stacks_deleted +
			 st.frames_deleted + st.binaries_deleted, 0);
	store_close(s);
}

static void test_size_bound(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_rw(f->db);
	struct store_maint_stats st = {0};
	uint64_t used, file;

	fill(s);
	fill(s);     /* same keys: rewritten, not doubled */
	assert_int_equal(store_used_bytes(s, &used, &file), 0);
	assert_true(used > 0 && used <= file);
	int64_t newest = count(f->db, "SELECT max(bucket_start) FROM mib");
	int64_t newest_rows = count(f->db, "SELECT count(*) FROM mib WHERE bucket_start = "
				    "(SELECT max(bucket_start) FROM mib)");

	/* Within the bound: nothing happens. */
	assert_int_equal(store_enforce_size(s, used * 2, &st), 0);
	assert_int_equal(st.mib_deleted, 0);
	/* Half of it: oldest buckets go until 90% of the bound. */
	assert_int_equal(store_enforce_size(s, used / 2, &st), 0);
	assert_true(st.mib_deleted > 0);
	assert_true(st.used_after <= (uint64_t)(used / 2 * STORE_SIZE_LOW_WATER));
	int64_t oldest = count(f->db, "SELECT min(bucket_start) FROM mib");
	assert_true(oldest > T0);
	/* Oldest first: no gap, everything from `oldest` on is still there. */
	assert_int_equal(count(f->db, "SELECT count(DISTINCT bucket_start) FROM mib"),
			 (newest - oldest) / BUCKET + 1);
	/* An impossible bound keeps the newest bucket. */
	assert_int_equal(store_enforce_size(s, 1, &st), 0);
	assert_int_equal(count(f->db, "SELECT count(*) FROM mib"), newest_rows);
	assert_int_equal(count(f->db, "SELECT max(bucket_start) FROM mib"), newest);
	assert_clean(s, f->db);
	store_close(s);
}

static void test_checkpoint(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_rw(f->db);
	char wal[160];
	struct stat sb;

	fill(s);
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	assert_int_equal(stat(wal, &sb), 0);
	assert_true(sb.st_size > 0);
	assert_int_equal(store_checkpoint(s), 0);
	assert_int_equal(stat(wal, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	/* Not while a transaction is open: the writer's own flush owns it. */
	assert_int_equal(store_begin(s), 0);
	assert_int_equal(store_compact(s, T0 + BUCKET, BUCKET, NULL), -EBUSY);
	assert_int_equal(store_rollback(s), 0);
	assert_int_equal(store_compact(s, T0, 0, NULL), -EINVAL);
	assert_int_equal(store_incremental_vacuum(s), 0);    /* auto_vacuum off: a no-op */
	store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_compaction_preserves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_merges_histograms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention_and_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
