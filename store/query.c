/* Read-only queries. Contexts are combined in SQL (GROUP BY over the mib table, which
 * is clustered by context) with mib_combine()'s semantics: SUM for counts, MIN/MAX for
 * extremes, and the "last object" fields from the row whose last object died last,
 * fetched only for the rows returned. Nothing here writes; it all works on a
 * STORE_RDONLY store while a writer holds a transaction (WAL snapshot isolation). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sqlite3.h>

#include "store/store.h"

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void stmt_resetp(sqlite3_stmt **st)
{
	if (*st)
		sqlite3_reset(*st);
}
#define _cleanup_reset_ _cleanup_(stmt_resetp)

double store_lifetime_access_density(const struct mib *m)
{
	/* Same operations, in the same order, as DENSITY_SQL below. */
	if (!m->total_access_count || !m->total_size || !m->alloc_count)
		return 0.0;

	double life_s = (double)m->total_lifetime_ns / ((double)m->alloc_count * 1e9);

	if (life_s < 0.001)
		life_s = 0.001;
	return (double)m->total_access_count / (double)m->total_size / life_s;
}

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* ---- contexts ---- */

#define AGG_SUM(f) ", sum(m." #f ")"
#define AGG_MIN(f) ", min(m." #f ")"
#define AGG_MAX(f) ", max(m." #f ")"
#define AGG_LAST(f)
#define AGG_COL(f, agg) AGG_##agg(f)

/* ?1 limit (-1 for none), ?2 binary, ?3 pid, ?4 since, ?5 until, ?6 context. */
#define ROWS_WHERE "m.alloc_count > 0" \
	" AND (?3 = 0 OR m.process_id IN (SELECT id FROM processes WHERE pid = ?3))" \
	" AND (?4 = 0 OR m.bucket_start >= ?4) AND (?5 = 0 OR m.bucket_start < ?5)"

/* store_lifetime_access_density() in SQL, over the ranking query's sums. */
#define DENSITY_SQL "CASE WHEN sum(m.total_access_count) = 0 OR sum(m.total_size) = 0" \
	" THEN 0.0 ELSE CAST(sum(m.total_access_count) AS REAL) / sum(m.total_size)" \
	" / max(CAST(sum(m.total_lifetime_ns) AS REAL) / (sum(m.alloc_count) * 1e9), 0.001) END"

/* The ranking query's sort keys over grouped mib rows. */
static const char *const group_key[] = {
	[STORE_SORT_BYTES] = "sum(m.total_size)",
	[STORE_SORT_COUNT] = "sum(m.alloc_count)",
	[STORE_SORT_LIFETIME] = "sum(m.total_lifetime_ns)",
	[STORE_SORT_DENSITY] = DENSITY_SQL,
	[STORE_SORT_ACCESSES] = "sum(m.total_access_count)",
};

static const char last_sql[] =
	"SELECT alloc_ts_ns, dealloc_ts_ns, alloc_cpu, dealloc_cpu FROM mib m"
	" WHERE m.context_id = ?6 AND " ROWS_WHERE
	" ORDER BY dealloc_ts_ns DESC, alloc_ts_ns DESC, alloc_cpu DESC, dealloc_cpu DESC LIMIT 1";

static const char frame_sql[] =
	"SELECT f.offset, f.function, f.mangled, b.build_id, b.path"
	" FROM frames f JOIN binaries b ON b.id = f.binary_id WHERE f.id = ?1";

static const char lines_sql[] =
	"SELECT function, mangled, file, line, col, decl_line, inlined FROM frame_lines"
	" WHERE frame_id = ?1 ORDER BY depth";

static void bind_filter(sqlite3_stmt *st, const struct store_ctx_filter *f)
{
	sqlite3_bind_int64(st, 1, f->limit ? (int64_t)f->limit : -1);
	if (f->binary)
		sqlite3_bind_text(st, 2, f->binary, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, f->pid);
	sqlite3_bind_int64(st, 4, f->since_ns);
	sqlite3_bind_int64(st, 5, f->until_ns);
}

struct frames_buf {
	struct store_frame *v;
	unsigned n;
};

static void frames_free(struct frames_buf *fb)
{
	for (unsigned i = 0; i < fb->n; i++) {
		free((char *)fb->v[i].build_id);
		free((char *)fb->v[i].path);
		free((char *)fb->v[i].function);
		free((char *)fb->v[i].mangled);
		for (unsigned j = 0; j < fb->v[i].nlines; j++) {
			free((char *)fb->v[i].lines[j].function);
			free((char *)fb->v[i].lines[j].mangled);
			free((char *)fb->v[i].lines[j].file);
		}
		free((void *)fb->v[i].lines);
	}
	free(fb->v);
	*fb = (struct frames_buf){0};
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

/* The frame's inline chain (schema >= 3); none for frames recorded without DWARF. */
static int load_lines(struct store *s, int64_t frame_id, struct store_frame *f)
{
	sqlite3_stmt *st = store__stmt(s, lines_sql);
	struct store_line *v;
	bool oom = false;
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;
	v = calloc(STORE_MAX_LINES, sizeof(*v));
	if (!v)
		return store__error(s, -ENOMEM, "out of memory");
	f->lines = v;
	sqlite3_bind_int64(st, 1, frame_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && f->nlines < STORE_MAX_LINES) {
		struct store_line *l = &v[f->nlines++];
		l->function = dup_or_null(col_text(st, 0), &oom);
		l->mangled = dup_or_null(col_text(st, 1), &oom);
		l->file = dup_or_null(col_text(st, 2), &oom);
		l->line = (uint32_t)sqlite3_column_int64(st, 3);
		l->column = (uint32_t)sqlite3_column_int64(st, 4);
		l->decl_line = (uint32_t)sqlite3_column_int64(st, 5);
		l->inlined = sqlite3_column_int(st, 6) != 0;
	}
	if (oom)
		return store__error(s, -ENOMEM, "out of memory");
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store__fail(s, rc, "reading frame lines");
	return 0;
}

static int load_frames(struct store *s, const void *blob, int bytes, struct frames_buf *fb)
{
	unsigned n = bytes > 0 ? (unsigned)bytes / 8 : 0;
	const unsigned char *p = blob;
	sqlite3_stmt *st;
	bool oom = false;

	if (bytes % 8)
		return store__error(s, -EUCLEAN, "corrupt stack: %d bytes of frame ids", bytes);
	fb->v = calloc(n ? n : 1, sizeof(*fb->v));
	if (!fb->v)
		return store__error(s, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < n; i++) {
		uint64_t le;

		memcpy(&le, p + 8 * i, 8);
		st = store__stmt(s, frame_sql);
		if (!st)
			return -EIO;

		_cleanup_reset_ sqlite3_stmt *guard = st;
		int rc;

		sqlite3_bind_int64(st, 1, (int64_t)le64toh(le));
		rc = sqlite3_step(st);
		if (rc == SQLITE_DONE)
			return store__error(s, -EUCLEAN, "corrupt stack: no frame %lld",
					    (long long)le64toh(le));
		if (rc != SQLITE_ROW)
			return store__fail(s, rc, "reading a frame");

		struct store_frame *f = &fb->v[fb->n++];

		f->offset = col_u64(st, 0);
		f->function = dup_or_null(col_text(st, 1), &oom);
		f->mangled = dup_or_null(col_text(st, 2), &oom);
		f->build_id = dup_or_null(col_text(st, 3), &oom);
		f->path = dup_or_null(col_text(st, 4), &oom);
		if (oom)
			return store__error(s, -ENOMEM, "out of memory");
		if (store_schema_version(s) >= 3) {
			rc = load_lines(s, (int64_t)le64toh(le), f);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int load_last(struct store *s, const struct store_ctx_filter *f, int64_t ctx,
		     struct mib *m)
{
	sqlite3_stmt *st = store__stmt(s, last_sql);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;
	int rc;

	bind_filter(st, f);
	sqlite3_bind_int64(st, 6, ctx);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		m->alloc_ts_ns = col_u64(st, 0);
		m->dealloc_ts_ns = col_u64(st, 1);
		m->alloc_cpu = (uint32_t)sqlite3_column_int64(st, 2);
		m->dealloc_cpu = (uint32_t)sqlite3_column_int64(st, 3);
		return 0;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "reading a context's last object");
}

/* One context combined from its own MIB rows (one range of the mib primary key) with
 * the row filters, and the names it needs. */
static const char one_ctx_sql[] = "SELECT m.context_id, b.build_id, b.path, s.frames"
	STORE__MIB_FIELDS(AGG_COL)
	" FROM mib m JOIN contexts c ON c.id = m.context_id"
	" JOIN binaries b ON b.id = c.binary_id JOIN stacks s ON s.id = c.stack_id"
	" WHERE m.context_id = ?6 AND " ROWS_WHERE
	" GROUP BY m.context_id";
#define ONE_CTX_FIRST_MIB_COL 4

/* Combines context ctx, reads its frames and "last object" fields and hands it to cb.
 * A context without matching rows (totals ahead of the snapshot: cannot happen inside one
 * read transaction, but costs nothing to allow) is skipped. */
static int emit_ctx(struct store *s, const struct store_ctx_filter *f, int64_t ctx,
		    store_ctx_cb cb, void *arg)
{
	sqlite3_stmt *st = store__stmt(s, one_ctx_sql);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;
	int rc;

	bind_filter(st, f);
	sqlite3_bind_int64(st, 6, ctx);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "querying a context");

	struct store_ctx_row row = {
		.context_id = sqlite3_column_int64(st, 0),
		.build_id = col_text(st, 1),
		.binary = col_text(st, 2),
	};
	struct frames_buf fb = {0};
	int col = ONE_CTX_FIRST_MIB_COL, r;

#define READ_SUM(f) row.mib.f = col_u64(st, col++);
#define READ_MIN READ_SUM
#define READ_MAX READ_SUM
#define READ_LAST(f)
#define READ_COL(f, agg) READ_##agg(f)
	STORE__MIB_FIELDS(READ_COL)
#undef READ_COL
	r = load_frames(s, sqlite3_column_blob(st, 3), sqlite3_column_bytes(st, 3), &fb);
	if (r == 0)
		r = load_last(s, f, row.context_id, &row.mib);
	if (r == 0) {
		row.frames = fb.v;
		row.nframes = fb.n;
		r = cb(&row, arg);
	}
	frames_free(&fb);
	return r;
}

/* Ranking reads, per context in order: id, alloc_count, total_size, total_lifetime_ns,
 * total_access_count (summed), so that accept() is judged before anything else is read. */
static void read_sums(sqlite3_stmt *st, struct mib *m)
{
	*m = (struct mib){ .alloc_count = col_u64(st, 1), .total_size = col_u64(st, 2),
			   .total_lifetime_ns = col_u64(st, 3),
			   .total_access_count = col_u64(st, 4) };
}

/* Steps a ranking statement and emits its contexts; with accept, the limit counts the
 * accepted ones (the statement then has no LIMIT of its own). */
static int emit_ranked(struct store *s, const struct store_ctx_filter *f, sqlite3_stmt *rank,
		       bool judge, store_ctx_cb cb, void *arg)
{
	unsigned n = 0;
	int rc;

	while ((rc = sqlite3_step(rank)) == SQLITE_ROW) {
		struct mib sums;
		int r;

		if (judge) {
			read_sums(rank, &sums);
			if (!f->accept(&sums, f->accept_arg))
				continue;
		}
		r = emit_ctx(s, f, sqlite3_column_int64(rank, 0), cb, arg);
		if (r)
			return r;
		if (f->limit && ++n >= f->limit)
			return 0;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "ranking contexts");
}

/* Schema >= 2 without row filters: the order comes from ctx_totals' index for the key
 * (N index entries for the top N; with accept, as many as it takes to accept N). Same
 * order, ties included, as grouping every row. */
#define TOT_SELECT "SELECT t.context_id, t.alloc_count, t.total_size, t.total_lifetime_ns," \
	" t.total_access_count FROM ctx_totals t WHERE t.rows > 0" \
	" AND (?2 IS NULL OR t.binary_id IN" \
	" (SELECT id FROM binaries WHERE build_id = ?2 OR path = ?2)) ORDER BY "
#define TOT_TAIL " DESC, t.context_id LIMIT ?1"

static const char *const tot_sql[] = {
	[STORE_SORT_BYTES] = TOT_SELECT "t.total_size" TOT_TAIL,
	[STORE_SORT_COUNT] = TOT_SELECT "t.alloc_count" TOT_TAIL,
	[STORE_SORT_LIFETIME] = TOT_SELECT "t.total_lifetime_ns" TOT_TAIL,
	[STORE_SORT_DENSITY] = TOT_SELECT STORE__TOTALS_DENSITY TOT_TAIL,
	[STORE_SORT_ACCESSES] = TOT_SELECT "t.total_access_count" TOT_TAIL,
};

static int query_contexts_totals(struct store *s, const struct store_ctx_filter *f,
				 store_ctx_cb cb, void *arg)
{
	sqlite3_stmt *ids = store__stmt(s, tot_sql[f->sort]);

	if (!ids)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = ids;

	sqlite3_bind_int64(ids, 1, f->limit && !f->accept ? (int64_t)f->limit : -1);
	if (f->binary)
		sqlite3_bind_text(ids, 2, f->binary, -1, SQLITE_STATIC);
	return emit_ranked(s, f, ids, f->accept != NULL, cb, arg);
}

/* accept() as the SQL function mpd_accept(alloc_count, total_size, lifetime, accesses),
 * so that the ranking query's top-N sorter keeps only accepted contexts. */
static void sql_accept(sqlite3_context *c, int argc, sqlite3_value **v)
{
	const struct store_ctx_filter *f = sqlite3_user_data(c);
	struct mib sums = { .alloc_count = (uint64_t)sqlite3_value_int64(v[0]),
			    .total_size = (uint64_t)sqlite3_value_int64(v[1]),
			    .total_lifetime_ns = (uint64_t)sqlite3_value_int64(v[2]),
			    .total_access_count = (uint64_t)sqlite3_value_int64(v[3]) };

	sqlite3_result_int(c, f->accept(&sums, f->accept_arg));
}

#define RANK_SQL_MAX 1024

/* The ranking query over the mib rows that pass the filters, grouped by context, without
 * joins; each filter is written in only when given, so that the planner can serve a
 * time range from mib_bucket and a pid from mib_process. */
static void group_rank_sql(char *sql, size_t n, const struct store_ctx_filter *f)
{
	snprintf(sql, n, "SELECT m.context_id, sum(m.alloc_count), sum(m.total_size),"
		 " sum(m.total_lifetime_ns), sum(m.total_access_count) FROM mib m"
		 " WHERE m.alloc_count > 0%s%s%s%s GROUP BY m.context_id%s ORDER BY %s DESC,"
		 " m.context_id LIMIT ?1",
		 f->binary ? " AND m.context_id IN (SELECT c.id FROM contexts c JOIN binaries b"
			     " ON b.id = c.binary_id WHERE b.build_id = ?2 OR b.path = ?2)" : "",
		 f->pid ? " AND m.process_id IN (SELECT id FROM processes WHERE pid = ?3)" : "",
		 f->since_ns ? " AND m.bucket_start >= ?4" : "",
		 f->until_ns ? " AND m.bucket_start < ?5" : "",
		 f->accept ? " HAVING mpd_accept(sum(m.alloc_count), sum(m.total_size),"
			     " sum(m.total_lifetime_ns), sum(m.total_access_count))" : "",
		 group_key[f->sort]);
}

static int query_contexts_grouped(struct store *s, const struct store_ctx_filter *f,
				  store_ctx_cb cb, void *arg)
{
	sqlite3 *db = store__db(s);
	char sql[RANK_SQL_MAX];
	sqlite3_stmt *st = NULL;
	int rc, r;

	if (f->accept) {
		rc = sqlite3_create_function_v2(db, "mpd_accept", 4, SQLITE_UTF8, (void *)f,
						sql_accept, NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			return store__fail(s, rc, "registering the context filter");
	}
	group_rank_sql(sql, sizeof(sql), f);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store__fail(s, rc, "preparing the context ranking");
	bind_filter(st, f);
	r = emit_ranked(s, f, st, false, cb, arg);
	sqlite3_finalize(st);
	return r;
}

/* Whether the time filter keeps every stored row (it then is no filter): since at or
 * before the first bucket, until after the last (each one probe of mib_bucket). */
static int time_filter_moot(struct store *s, const struct store_ctx_filter *f, bool *moot)
{
	static const char first_sql[] = "SELECT min(bucket_start) FROM mib";
	static const char last_sql_[] = "SELECT max(bucket_start) FROM mib";
	const char *q[2] = { f->since_ns ? first_sql : NULL, f->until_ns ? last_sql_ : NULL };

	*moot = true;
	for (int i = 0; i < 2 && *moot; i++) {
		sqlite3_stmt *st;
		int rc;

		if (!q[i])
			continue;
		st = store__stmt(s, q[i]);
		if (!st)
			return -EIO;

		_cleanup_reset_ sqlite3_stmt *guard = st;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			return store__fail(s, rc, "reading the time range");
		if (sqlite3_column_type(st, 0) == SQLITE_NULL)
			return 0;          /* no rows at all */
		int64_t b = sqlite3_column_int64(st, 0);

		*moot = i == 0 ? f->since_ns <= b : f->until_ns > b;
	}
	return 0;
}

int store_query_contexts(struct store *s, const struct store_ctx_filter *f, store_ctx_cb cb,
			 void *arg)
{
	static const struct store_ctx_filter all = { .sort = STORE_SORT_BYTES };
	struct store_ctx_filter g;
	bool moot = true;
	int r;

	if (!f)
		f = &all;
	if ((unsigned)f->sort >= sizeof(group_key) / sizeof(group_key[0]))
		return store__error(s, -EINVAL, "unknown sort order %d", (int)f->sort);
	if ((f->since_ns || f->until_ns) && (r = time_filter_moot(s, f, &moot)) < 0)
		return r;
	if (moot && (f->since_ns || f->until_ns)) {
		g = *f;
		g.since_ns = g.until_ns = 0;
		f = &g;
	}
	if (!f->pid && !f->since_ns && !f->until_ns && store_schema_version(s) >= 2)
		return query_contexts_totals(s, f, cb, arg);
	return query_contexts_grouped(s, f, cb, arg);
}

/* ---- time buckets ---- */

static const char buckets_sql[] =
	"SELECT m.bucket_start, m.context_id, sum(m.alloc_count), sum(m.total_size),"
	" sum(m.total_access_count)"
	" FROM mib m JOIN contexts c ON c.id = m.context_id JOIN binaries b ON b.id = c.binary_id"
	" WHERE " ROWS_WHERE " AND (?2 IS NULL OR b.build_id = ?2 OR b.path = ?2)"
	" GROUP BY m.bucket_start, m.context_id ORDER BY m.bucket_start, m.context_id";

int store_query_buckets(struct store *s, const struct store_ctx_filter *f, store_bucket_cb cb,
			void *arg)
{
	static const struct store_ctx_filter all;
	sqlite3_stmt *st = store__stmt(s, buckets_sql);
	int rc;

	if (!st)
		return -EIO;
	if (!f)
		f = &all;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	bind_filter(st, f);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_bucket_row row = {
			.bucket_start = sqlite3_column_int64(st, 0),
			.context_id = sqlite3_column_int64(st, 1),
			.alloc_count = col_u64(st, 2), .total_size = col_u64(st, 3),
			.total_access_count = col_u64(st, 4),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying time buckets");
}

/* ---- binaries, processes, runs ---- */

static const char binaries_sql[] =
	"SELECT b.id, b.build_id, b.path,"
	" (SELECT count(*) FROM processes p WHERE p.binary_id = b.id),"
	" count(DISTINCT c.id), coalesce(sum(m.alloc_count), 0), coalesce(sum(m.total_size), 0) AS ts"
	" FROM binaries b LEFT JOIN contexts c ON c.binary_id = b.id"
	" LEFT JOIN mib m ON m.context_id = c.id"
	" WHERE b.id IN (SELECT binary_id FROM processes)"
	" GROUP BY b.id ORDER BY ts DESC, b.id";

int store_query_binaries(struct store *s, store_binary_cb cb, void *arg)
{
	sqlite3_stmt *st = store__stmt(s, binaries_sql);
	int rc;

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_binary_row row = {
			.id = sqlite3_column_int64(st, 0),
			.build_id = col_text(st, 1), .path = col_text(st, 2),
			.processes = col_u64(st, 3), .contexts = col_u64(st, 4),
			.alloc_count = col_u64(st, 5), .total_size = col_u64(st, 6),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying binaries");
}

static const char processes_sql[] =
	"SELECT p.id, p.pid, p.start_ns, p.ppid, p.exe, b.build_id, p.comm,"
	" coalesce(p.run_id, 0), coalesce(p.exit_ns, 0),"
	" count(DISTINCT m.context_id), coalesce(sum(m.alloc_count), 0),"
	" coalesce(sum(m.total_size), 0)"
	" FROM processes p JOIN binaries b ON b.id = p.binary_id"
	" LEFT JOIN mib m ON m.process_id = p.id"
	" WHERE (?1 IS NULL OR b.build_id = ?1 OR b.path = ?1 OR p.exe = ?1)"
	" AND (?2 = 0 OR p.pid = ?2)"
	" GROUP BY p.id ORDER BY p.id DESC LIMIT ?3";

int store_query_processes(struct store *s, const struct store_proc_filter *f, store_proc_cb cb,
			  void *arg)
{
	static const struct store_proc_filter all;
	sqlite3_stmt *st = store__stmt(s, processes_sql);
	int rc;

	if (!st)
		return -EIO;
	if (!f)
		f = &all;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	if (f->binary)
		sqlite3_bind_text(st, 1, f->binary, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, f->pid);
	sqlite3_bind_int64(st, 3, f->limit ? (int64_t)f->limit : -1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_proc_row row = {
			.id = sqlite3_column_int64(st, 0),
			.pid = sqlite3_column_int(st, 1),
			.start_ns = col_u64(st, 2),
			.ppid = sqlite3_column_int(st, 3),
			.exe = col_text(st, 4), .build_id = col_text(st, 5), .comm = col_text(st, 6),
			.run_id = sqlite3_column_int64(st, 7),
			.exit_ns = sqlite3_column_int64(st, 8),
			.contexts = col_u64(st, 9), .alloc_count = col_u64(st, 10),
			.total_size = col_u64(st, 11),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying processes");
}

#define RUNS_COLS "SELECT id, command, alloc_mode, access_mode, settings, started_ns, ended_ns," \
	" events, drops_ringbuf, drops_live_full, drops_state_full, drops_stack," \
	" unmatched_frees, overwritten, unresolved_frames, status"
static const char runs_sql[] = RUNS_COLS ", NULL, NULL FROM runs ORDER BY id DESC";
/* Schema >= 4: with the access source. */
static const char runs_v4_sql[] = RUNS_COLS ", access_source, access_reasons"
	" FROM runs ORDER BY id DESC";

int store_query_runs(struct store *s, store_run_cb cb, void *arg)
{
	sqlite3_stmt *st = store__stmt(s, store_schema_version(s) >= 4 ? runs_v4_sql : runs_sql);
	int rc;

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_run_row row = {
			.id = sqlite3_column_int64(st, 0),
			.run = {
				.command = col_text(st, 1), .alloc_mode = col_text(st, 2),
				.access_mode = col_text(st, 3), .settings = col_text(st, 4),
				.started_ns = sqlite3_column_int64(st, 5),
			},
			.stats = {
				.ended_ns = sqlite3_column_int64(st, 6),
				.events = col_u64(st, 7), .drops_ringbuf = col_u64(st, 8),
				.drops_live_full = col_u64(st, 9),
				.drops_state_full = col_u64(st, 10),
				.drops_stack = col_u64(st, 11), .unmatched_frees = col_u64(st, 12),
				.overwritten = col_u64(st, 13),
				.unresolved_frames = col_u64(st, 14),
				.status = col_text(st, 15),
			},
			.access_source = col_text(st, 16),
			.access_reasons = col_text(st, 17),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying runs");
}

/* ---- data-access sampling (schema >= 4) ---- */

double store_data_density(uint64_t est_accesses, uint64_t size, uint64_t observed_ns)
{
	/* attrib_density()'s arithmetic; DATA_DENSITY_SQL below is the same in SQL. */
	double secs = observed_ns < 1000000 ? 1e-3 : (double)observed_ns / 1e9;

	return (double)est_accesses / (double)(size ? size : 1) / secs;
}

/* A run's observed time: until it ended, or until ?5 (now) while still recording. */
#define RUN_DURATION_SQL "max(CASE WHEN r.ended_ns > 0 THEN r.ended_ns ELSE ?5 END" \
	" - r.started_ns, 0)"

/* ?1 limit (-1 none), ?2 binary, ?3 since, ?4 until, ?5 now. Rows of one key are one per
 * run (the primary key), so the SUM of run durations counts each run once. */
#define DATA_SELECT "SELECT b.build_id, b.path, d.symbol, max(d.section), d.address," \
	" max(d.size), sum(d.access_samples), sum(d.est_accesses), count(*)," \
	" sum(" RUN_DURATION_SQL ")" \
	" FROM data_access d JOIN binaries b ON b.id = d.binary_id JOIN runs r ON r.id = d.run_id" \
	" WHERE (?2 IS NULL OR b.build_id = ?2 OR b.path = ?2)" \
	" AND (?3 = 0 OR r.started_ns >= ?3) AND (?4 = 0 OR r.started_ns < ?4)" \
	" GROUP BY d.binary_id, d.symbol, d.address ORDER BY "
#define DATA_TAIL " DESC, b.build_id, b.path, d.symbol, d.address LIMIT ?1"

/* store_data_density() in SQL. */
#define DATA_DENSITY_SQL "CAST(sum(d.est_accesses) AS REAL) / max(max(d.size), 1)" \
	" / max(CAST(sum(" RUN_DURATION_SQL ") AS REAL) / 1e9, 0.001)"

static const char *const data_sql[] = {
	[STORE_DATA_SORT_ACCESSES] = DATA_SELECT "sum(d.access_samples) DESC, sum(d.est_accesses)"
		DATA_TAIL,
	[STORE_DATA_SORT_DENSITY] = DATA_SELECT DATA_DENSITY_SQL DATA_TAIL,
	[STORE_DATA_SORT_SIZE] = DATA_SELECT "max(d.size)" DATA_TAIL,
};

int store_query_data(struct store *s, const struct store_data_filter *f, store_data_cb cb,
		     void *arg)
{
	static const struct store_data_filter all = {0};
	int rc;

	if (!f)
		f = &all;
	if ((unsigned)f->sort >= sizeof(data_sql) / sizeof(data_sql[0]))
		return store__error(s, -EINVAL, "unknown data sort order %d", (int)f->sort);
	rc = store_schema_version(s);
	if (rc < 0)
		return rc;
	if (rc < 4)
		return 0;

	sqlite3_stmt *st = store__stmt(s, data_sql[f->sort]);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, f->limit ? (int64_t)f->limit : -1);
	if (f->binary)
		sqlite3_bind_text(st, 2, f->binary, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, f->since_ns);
	sqlite3_bind_int64(st, 4, f->until_ns);
	sqlite3_bind_int64(st, 5, f->now_ns);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_data_row row = {
			.build_id = col_text(st, 0), .binary = col_text(st, 1),
			.symbol = col_text(st, 2), .section = col_text(st, 3),
			.address = col_u64(st, 4), .size = col_u64(st, 5),
			.access_samples = col_u64(st, 6), .est_accesses = col_u64(st, 7),
			.runs = col_u64(st, 8), .observed_ns = col_u64(st, 9),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying data symbols");
}

static const char classes_sql[] =
	"SELECT run_id, class, samples, est_accesses FROM access_classes"
	" WHERE ?1 = 0 OR run_id = ?1 ORDER BY run_id DESC, class";

int store_query_access_classes(struct store *s, int64_t run_id, store_access_class_cb cb,
			       void *arg)
{
	int rc = store_schema_version(s);

	if (rc < 0)
		return rc;
	if (rc < 4)
		return 0;

	sqlite3_stmt *st = store__stmt(s, classes_sql);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_access_class_row row = {
			.run_id = sqlite3_column_int64(st, 0), .cls = col_text(st, 1),
			.samples = col_u64(st, 2), .est_accesses = col_u64(st, 3),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying access classes");
}
