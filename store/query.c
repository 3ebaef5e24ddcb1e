/* Read-only queries. Contexts are ranked first (ctx_totals' indexes, a bounded walk of
 * them, or grouping the matching mib rows: see store_query_contexts()), and only the
 * contexts returned are combined, from their own MIB rows (one range of the mib primary
 * key, clustered by context) with mib_combine(), their frames read through a per-query
 * cache. Nothing here writes; it all works on a STORE_RDONLY store while a writer holds
 * a transaction (WAL snapshot isolation: one query reads one snapshot). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/alloc_trim.h"
#include "base/cleanup.h"
#include "store/stmt.h"
#include "base/arena.h"

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
	[STORE_SORT_LIVE] = "sum(m.live_at_exit_bytes)",
};

static void bind_filter(sqlite3_stmt *st, const struct store_ctx_filter *f)
{
	sqlite3_bind_int64(st, 1, f->limit ? (int64_t)f->limit : -1);
	if (f->binary)
		sqlite3_bind_text(st, 2, f->binary, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, f->pid);
	sqlite3_bind_int64(st, 4, f->since_ns);
	sqlite3_bind_int64(st, 5, f->until_ns);
}

/* ---- frames: a cache for the life of one query ----
 * Contexts share most of their frames (main, the callers of hot paths), so a query reads
 * each frame and its inline chain once: the frames a context needs that are not cached
 * yet are read by one statement (json_each over their ids) and kept, strings in an
 * arena, until the query ends or FCACHE_MAX_FRAMES are cached (then it starts over). */
#define FCACHE_MAX_FRAMES 262144
#define FCACHE_ID_TEXT 24          /* "-9223372036854775808," */

/* ?1: JSON array of distinct frame ids. CROSS JOIN keeps json_each the outer loop, so a
 * frame's rows are consecutive (and its lines come in primary-key order, by depth)
 * without a sorter. Schema >= 3 adds the lines. */
#define FRAMES_SELECT "SELECT f.id, f.offset, f.function, f.mangled, b.build_id, b.path"
#define FRAMES_FROM " FROM json_each(?1) j CROSS JOIN frames f ON f.id = j.value" \
	" CROSS JOIN binaries b ON b.id = f.binary_id"
static const char frames_sql[] = FRAMES_SELECT FRAMES_FROM;
static const char frames_lines_sql[] = FRAMES_SELECT ", l.function, l.mangled, l.file, l.line,"
	" l.col, l.decl_line, l.inlined, l.depth" FRAMES_FROM
	" LEFT JOIN frame_lines l ON l.frame_id = f.id";

struct fcache {
	struct store_frame *frames;    /* lines and strings point into the arena */
	int64_t *ids;
	size_t n, cap;
	uint32_t *slots;               /* open addressing by id: index + 1, 0 empty */
	size_t nslots;
	struct arena arena;
	struct store_frame *row;       /* the current context's frames, copied */
	unsigned row_cap;
	char *json;                    /* the ids to read, as a JSON array */
	size_t json_cap;
};

/* A copy of column i's text in the arena, NULL for NULL; *oom on failure. */
static const char *arena_text(struct fcache *c, sqlite3_stmt *st, int i, bool *oom)
{
	const char *t = col_text(st, i);
	char *d;

	if (!t)
		return NULL;
	size_t n = (size_t)sqlite3_column_bytes(st, i) + 1;

	d = arena_alloc_checked(&c->arena, n);
	if (!d) {
		*oom = true;
		return NULL;
	}
	memcpy(d, t, n);
	return d;
}

static void fcache_clear(struct fcache *c)
{
	arena_free(&c->arena);
	c->n = 0;
	if (c->slots)
		memset(c->slots, 0, c->nslots * sizeof(*c->slots));
}

static void fcache_free(struct fcache *c)
{
	fcache_clear(c);
	free(c->frames);
	free(c->ids);
	free(c->slots);
	free(c->row);
	free(c->json);
	*c = (struct fcache){0};
}

static size_t slot_of(const struct fcache *c, int64_t id)
{
	return (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 20) & (c->nslots - 1);
}

/* The cached frame with this id, or NULL. */
static const struct store_frame *fcache_get(const struct fcache *c, int64_t id)
{
	if (!c->nslots)
		return NULL;
	for (size_t i = slot_of(c, id);; i = (i + 1) & (c->nslots - 1)) {
		uint32_t v = c->slots[i];

		if (!v)
			return NULL;
		if (c->ids[v - 1] == id)
			return &c->frames[v - 1];
	}
}

static int fcache_put(struct fcache *c, int64_t id, const struct store_frame *f)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct store_frame *fr = realloc(c->frames, cap * sizeof(*fr));

		if (!fr)
			return -ENOMEM;
		c->frames = fr;

		int64_t *ids = realloc(c->ids, cap * sizeof(*ids));

		if (!ids)
			return -ENOMEM;
		c->ids = ids;
		c->cap = cap;
	}
	if (2 * (c->n + 1) > c->nslots) {      /* load factor <= 1/2 */
		size_t ns = c->nslots ? c->nslots * 2 : 2048;
		uint32_t *sl = calloc(ns, sizeof(*sl));

		if (!sl)
			return -ENOMEM;
		free(c->slots);
		c->slots = sl;
		c->nslots = ns;
		for (size_t k = 0; k < c->n; k++) {
			size_t i = slot_of(c, c->ids[k]);

			while (c->slots[i])
				i = (i + 1) & (c->nslots - 1);
			c->slots[i] = (uint32_t)k + 1;
		}
	}
	size_t i = slot_of(c, id);

	while (c->slots[i])
		i = (i + 1) & (c->nslots - 1);
	c->frames[c->n] = *f;
	c->ids[c->n] = id;
	c->slots[i] = (uint32_t)++c->n;
	return 0;
}

/* Reads the frames whose ids are in c->json (one statement) into the cache. */
static int fcache_read(struct store *s, struct fcache *c)
{
	bool lines = store_schema_version(s) >= 3, oom = false;
	sqlite3_stmt *st = store__stmt(s, lines ? frames_lines_sql : frames_sql);
	struct store_line tmp[STORE_MAX_LINES];
	struct store_frame cur = {0};
	int64_t cur_id = 0;
	bool have = false;
	int rc, r = 0;

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_text(st, 1, c->json, -1, SQLITE_STATIC);
	for (;;) {
		rc = sqlite3_step(st);

		int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;

		if (have && (rc != SQLITE_ROW || id != cur_id)) {   /* the previous frame is whole */
			if (cur.nlines) {
				struct store_line *l = arena_alloc_checked(&c->arena,
									   cur.nlines * sizeof(*l));

				if (!l)
					return store__error(s, -ENOMEM, "out of memory");
				memcpy(l, tmp, cur.nlines * sizeof(*l));
				cur.lines = l;
			}
			r = fcache_put(c, cur_id, &cur);
			if (r < 0)
				return store__error(s, r, "out of memory");
			have = false;
		}
		if (rc != SQLITE_ROW)
			break;
		if (!have) {
			cur = (struct store_frame){ .offset = col_u64(st, 1),
				.function = arena_text(c, st, 2, &oom),
				.mangled = arena_text(c, st, 3, &oom),
				.build_id = arena_text(c, st, 4, &oom),
				.path = arena_text(c, st, 5, &oom) };
			cur_id = id;
			have = true;
		}
		/* A LEFT JOIN row without lines has NULL for all of them (depth is NOT NULL);
		 * depths are 0.. in order, so a line lands at its depth. */
		int64_t depth = lines && sqlite3_column_type(st, 13) != SQLITE_NULL ?
				sqlite3_column_int64(st, 13) : -1;

		if (depth >= 0 && depth < STORE_MAX_LINES && depth == cur.nlines)
			tmp[cur.nlines++] = (struct store_line){
				.function = arena_text(c, st, 6, &oom),
				.mangled = arena_text(c, st, 7, &oom),
				.file = arena_text(c, st, 8, &oom),
				.line = (uint32_t)sqlite3_column_int64(st, 9),
				.column = (uint32_t)sqlite3_column_int64(st, 10),
				.decl_line = (uint32_t)sqlite3_column_int64(st, 11),
				.inlined = sqlite3_column_int(st, 12) != 0 };
		if (oom)
			return store__error(s, -ENOMEM, "out of memory");
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "reading frames");
}

/* The frames of a stack blob (little-endian int64 frame ids, leaf first) into c->row. */
static int load_frames(struct store *s, struct fcache *c, const void *blob, int bytes,
		       unsigned *nframes)
{
	unsigned n = bytes > 0 ? (unsigned)bytes / 8 : 0, missing = 0;
	const unsigned char *p = blob;
	size_t len = 0;

	if (bytes % 8)
		return store__error(s, -EUCLEAN, "corrupt stack: %d bytes of frame ids", bytes);
	if (n > c->row_cap) {
		struct store_frame *row = realloc(c->row, n * sizeof(*row));

		if (!row)
			return store__error(s, -ENOMEM, "out of memory");
		c->row = row;
		c->row_cap = n;
	}
	if (c->n + n > FCACHE_MAX_FRAMES)
		fcache_clear(c);
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t le;

			memcpy(&le, p + 8 * i, 8);

			int64_t id = (int64_t)le64toh(le);
			const struct store_frame *f = fcache_get(c, id);

			if (f) {
				c->row[i] = *f;
				continue;
			}
			if (pass)
				return store__error(s, -EUCLEAN, "corrupt stack: no frame %lld",
						    (long long)id);
			if (c->json_cap < len + FCACHE_ID_TEXT + 2) {
				size_t cap = (len + FCACHE_ID_TEXT + 2) * 2;
				char *j = realloc(c->json, cap);

				if (!j)
					return store__error(s, -ENOMEM, "out of memory");
				c->json = j;
				c->json_cap = cap;
			}
			len += (size_t)snprintf(c->json + len, c->json_cap - len, "%c%lld",
						missing++ ? ',' : '[', (long long)id);
		}
		if (!missing)
			break;
		if (!pass) {
			snprintf(c->json + len, c->json_cap - len, "]");

			int r = fcache_read(s, c);

			if (r < 0)
				return r;
		}
	}
	if (n)   /* an allocator inlined at the call site is no frame of the program's */
		alloc_trim_leaf(&c->row[0]);
	*nframes = n;
	return 0;
}

/* Where combined contexts go: the caller's callback, with the query's frame cache. */
struct ctx_emit {
	store_ctx_cb cb;
	void *arg;
	struct fcache fc;
};

/* A context's binary and stack, and its MIB rows that pass the row filters (one range of
 * the mib primary key), combined here with mib_combine(): the same SUM/MIN/MAX and
 * "last object" as grouping in SQL, without the sorter SQLite would use for it. */
static const char ctx_names_sql[] = "SELECT b.build_id, b.path, s.frames FROM contexts c"
	" JOIN binaries b ON b.id = c.binary_id JOIN stacks s ON s.id = c.stack_id"
	" WHERE c.id = ?1";
static const char ctx_names_v10_sql[] = "SELECT b.build_id, b.path, s.frames, s.truncated"
	" FROM contexts c JOIN binaries b ON b.id = c.binary_id JOIN stacks s ON s.id = c.stack_id"
	" WHERE c.id = ?1";
#define MIB_COL(f, agg) ", m." #f
static const char ctx_rows_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	" FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The same with the schema >= 9 fields. */
static const char ctx_rows_v9_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	STORE__MIB_V9_FIELDS(MIB_COL) " FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The same with the schema >= 12 fields. */
static const char ctx_rows_v12_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	STORE__MIB_V9_FIELDS(MIB_COL) STORE__MIB_V12_FIELDS(MIB_COL)
	" FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The same with the schema >= 13 fields. */
static const char ctx_rows_v13_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	STORE__MIB_V9_FIELDS(MIB_COL) STORE__MIB_V12_FIELDS(MIB_COL) STORE__MIB_V13_FIELDS(MIB_COL)
	" FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The same with the schema >= 16 fields. */
static const char ctx_rows_v16_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	STORE__MIB_V9_FIELDS(MIB_COL) STORE__MIB_V12_FIELDS(MIB_COL) STORE__MIB_V13_FIELDS(MIB_COL)
	STORE__MIB_V16_FIELDS(MIB_COL) " FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The same with the schema >= 17 fields. */
static const char ctx_rows_v17_sql[] = "SELECT m.context_id" STORE__MIB_FIELDS(MIB_COL)
	STORE__MIB_V9_FIELDS(MIB_COL) STORE__MIB_V12_FIELDS(MIB_COL) STORE__MIB_V13_FIELDS(MIB_COL)
	STORE__MIB_V16_FIELDS(MIB_COL) STORE__MIB_V17_FIELDS(MIB_COL)
	" FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;
/* The context's AccessHistogram over the same rows (schema >= 6). */
static const char ctx_hist_sql[] =
	"SELECT mib_hist_merge(m.access_hist) FROM mib m WHERE m.context_id = ?6 AND " ROWS_WHERE;

/* With f->hist, combines the histograms of ctx's matching rows into h. */
static int load_hist(struct store *s, const struct store_ctx_filter *f, int64_t ctx,
		     struct mib_hist *h)
{
	if (!f->hist || store_schema_version(s) < 6)
		return 0;
	sqlite3_stmt *st = store__stmt(s, ctx_hist_sql);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;
	int rc, r;

	bind_filter(st, f);
	sqlite3_bind_int64(st, 6, ctx);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "reading a context's access histogram");
	r = mib_hist_merge_blob(h, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
	if (r)
		return store__error(s, r, "reading a context's access histogram: %s",
				    r == -ENOMEM ? "out of memory" : "corrupt histogram");
	return 0;
}

/* Combines context ctx, reads its names and frames and hands it to cb. A context without
 * matching rows (totals ahead of the snapshot: cannot happen inside one read transaction,
 * but costs nothing to allow) is skipped. */
static int emit_ctx(struct store *s, const struct store_ctx_filter *f, struct ctx_emit *e,
		    int64_t ctx)
{
	struct store_ctx_row row = { .context_id = ctx };
	bool v9 = store_schema_version(s) >= 9, v12 = store_schema_version(s) >= 12;
	bool v13 = store_schema_version(s) >= 13, v16 = store_schema_version(s) >= 16;
	bool v17 = store_schema_version(s) >= 17;
	sqlite3_stmt *st = store__stmt(s, v17 ? ctx_rows_v17_sql : v16 ? ctx_rows_v16_sql : v13 ? ctx_rows_v13_sql :
					  v12 ? ctx_rows_v12_sql :
					  v9 ? ctx_rows_v9_sql : ctx_rows_sql);
	int rc;

	if (!st)
		return -EIO;
	{
		_cleanup_reset_ sqlite3_stmt *guard = st;

		bind_filter(st, f);
		sqlite3_bind_int64(st, 6, ctx);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			struct mib m = { 0 };
			int col = 1;

#define READ_COL(f, agg) m.f = col_u64(st, col++);
			STORE__MIB_FIELDS(READ_COL)
			if (v9) {
				STORE__MIB_V9_FIELDS(READ_COL)
			}
#undef READ_COL
			/* A NULL extreme (or an older store): this row's are unknown. */
			m.has_density = v12;
#define READ_DCOL(f, agg) m.has_density = m.has_density && \
	sqlite3_column_type(st, col) != SQLITE_NULL; m.f = sqlite3_column_double(st, col++);
			if (v12) {
				STORE__MIB_V12_FIELDS(READ_DCOL)
			}
			if (!m.has_density)
				m.min_access_density = m.max_access_density =
				m.min_lifetime_access_density = m.max_lifetime_access_density = 0;
#undef READ_DCOL
#define READ_COL(f, agg) m.f = col_u64(st, col++);
			if (v13) {
				STORE__MIB_V13_FIELDS(READ_COL)
			}
			if (v16) {
				STORE__MIB_V16_FIELDS(READ_COL)
			}
			if (v17) {
				STORE__MIB_V17_FIELDS(READ_COL)
			}
#undef READ_COL
			mib_combine(&row.mib, &m);
		}
		if (rc != SQLITE_DONE)
			return store__fail(s, rc, "querying a context");
	}
	if (!row.mib.alloc_count)
		return 0;
	bool v10 = store_schema_version(s) >= 10;   /* stacks.truncated */
	st = store__stmt(s, v10 ? ctx_names_v10_sql : ctx_names_sql);
	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;
	int r;

	sqlite3_bind_int64(st, 1, ctx);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return store__error(s, -EUCLEAN, "context %lld has MIB rows but no stack",
				    (long long)ctx);
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "querying a context");
	row.build_id = col_text(st, 0);
	row.binary = col_text(st, 1);
	row.truncated = v10 && sqlite3_column_int(st, 3) != 0;
	r = load_frames(s, &e->fc, sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2),
			&row.nframes);
	if (r == 0)
		r = load_hist(s, f, ctx, &row.hist);
	if (r == 0) {
		row.frames = e->fc.row;
		r = e->cb(&row, e->arg);
	}
	mib_hist_free(&row.hist);
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
		       bool judge, struct ctx_emit *e)
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
		r = emit_ctx(s, f, e, sqlite3_column_int64(rank, 0));
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
				 struct ctx_emit *e)
{
	sqlite3_stmt *ids = store__stmt(s, tot_sql[f->sort]);

	if (!ids)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = ids;

	sqlite3_bind_int64(ids, 1, f->limit && !f->accept ? (int64_t)f->limit : -1);
	if (f->binary)
		sqlite3_bind_text(ids, 2, f->binary, -1, SQLITE_STATIC);
	return emit_ranked(s, f, ids, f->accept != NULL, e);
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
static void group_rank_sql(char *sql, size_t n, const struct store_ctx_filter *f, bool by_time)
{
	snprintf(sql, n, "SELECT m.context_id, sum(m.alloc_count), sum(m.total_size),"
		 " sum(m.total_lifetime_ns), sum(m.total_access_count) FROM mib m%s"
		 " WHERE m.alloc_count > 0%s%s%s%s GROUP BY m.context_id%s ORDER BY %s DESC,"
		 " m.context_id LIMIT ?1", by_time ? " INDEXED BY mib_bucket" : "",
		 f->binary ? " AND m.context_id IN (SELECT c.id FROM contexts c JOIN binaries b"
			     " ON b.id = c.binary_id WHERE b.build_id = ?2 OR b.path = ?2)" : "",
		 f->pid ? " AND m.process_id IN (SELECT id FROM processes WHERE pid = ?3)" : "",
		 f->since_ns ? " AND m.bucket_start >= ?4" : "",
		 f->until_ns ? " AND m.bucket_start < ?5" : "",
		 f->accept ? " HAVING mpd_accept(sum(m.alloc_count), sum(m.total_size),"
			     " sum(m.total_lifetime_ns), sum(m.total_access_count))" : "",
		 group_key[f->sort]);
}

/* by_time: the rows come from mib_bucket's range (few rows in a narrow range), else
 * the planner's choice (a scan of mib in context order for a wide one). */
static int query_contexts_grouped(struct store *s, const struct store_ctx_filter *f,
				  bool by_time, struct ctx_emit *e)
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
	group_rank_sql(sql, sizeof(sql), f, by_time);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store__fail(s, rc, "preparing the context ranking");
	bind_filter(st, f);
	r = emit_ranked(s, f, st, false, e);
	sqlite3_finalize(st);
	return r;
}

/* ---- row filters: a bounded walk of ctx_totals ----
 * A context's sums over the rows a filter keeps are at most its ctx_totals sums (every
 * summed column is >= 0). So for a summed key, walking ctx_totals by that key and
 * combining each context's matching rows (one range of the mib primary key) has found
 * the exact top N as soon as the next context's total cannot beat the N-th found. The
 * walk visits the contexts whose total reaches the N-th filtered value: a few thousand
 * of 1M for a pid or an hour of a day, where grouping reads millions of rows. */
#define WALK_MAX_CONTEXTS 20000  /* a walk that needs more gives way to grouping the rows */
#define WALK_MAX_LIMIT 1000      /* larger --limit values group the rows */
#define RANGE_PROBE_ROWS 30000   /* a time range with fewer rows is grouped from mib_bucket */

/* One context's sums over the rows the filters keep; each filter is written in only
 * when given, so that a pid becomes a seek on the mib primary key (context_id,
 * process_id) instead of a test on every row of the context. ?6: the context. */
static void ctx_sums_sql(char *sql, size_t n, const struct store_ctx_filter *f)
{
	snprintf(sql, n, "SELECT count(*), sum(m.alloc_count), sum(m.total_size),"
		 " sum(m.total_lifetime_ns), sum(m.total_access_count) FROM mib m"
		 " WHERE m.context_id = ?6 AND m.alloc_count > 0%s%s%s",
		 f->pid ? " AND m.process_id IN (SELECT id FROM processes WHERE pid = ?3)" : "",
		 f->since_ns ? " AND m.bucket_start >= ?4" : "",
		 f->until_ns ? " AND m.bucket_start < ?5" : "");
}

/* One context's sums over the filtered rows (st: ctx_sums_sql, bound); 0 if it has none,
 * 1 if it has. */
static int filtered_sums(struct store *s, sqlite3_stmt *st, int64_t ctx, struct mib *sums)
{
	int rc;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 6, ctx);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "summing a context's rows");
	if (!sqlite3_column_int64(st, 0))
		return 0;
	read_sums(st, sums);
	return 1;
}

struct ranked { int64_t key, id; };

static int64_t sort_key(const struct mib *m, enum store_sort k)
{
	switch (k) {
	case STORE_SORT_COUNT: return (int64_t)m->alloc_count;
	case STORE_SORT_LIFETIME: return (int64_t)m->total_lifetime_ns;
	case STORE_SORT_ACCESSES: return (int64_t)m->total_access_count;
	default: return (int64_t)m->total_size;
	}
}

/* Whether (key, id) ranks before r: larger key first, then smaller id (the SQL order). */
static bool ranks_before(int64_t key, int64_t id, const struct ranked *r)
{
	return key > r->key || (key == r->key && id < r->id);
}

/* 0: done (contexts emitted); -EAGAIN: a bounded walk ran past WALK_MAX_CONTEXTS,
 * nothing was emitted, group the rows instead. */
static int query_contexts_walk(struct store *s, const struct store_ctx_filter *f,
			       struct ctx_emit *e, bool bounded)
{
	sqlite3_stmt *ids = store__stmt(s, tot_sql[f->sort]);
	struct ranked *top;
	unsigned n = 0;
	unsigned walked = 0;
	int rc, r = 0;

	if (!ids)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = ids;

	char sql[RANK_SQL_MAX];
	sqlite3_stmt *sums_st = NULL;

	ctx_sums_sql(sql, sizeof(sql), f);
	rc = sqlite3_prepare_v2(store__db(s), sql, -1, &sums_st, NULL);
	if (rc != SQLITE_OK)
		return store__fail(s, rc, "preparing the context sums");
	bind_filter(sums_st, f);
	top = calloc(f->limit, sizeof(*top));
	if (!top) {
		sqlite3_finalize(sums_st);
		return store__error(s, -ENOMEM, "out of memory");
	}
	sqlite3_bind_int64(ids, 1, -1);
	if (f->binary)
		sqlite3_bind_text(ids, 2, f->binary, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(ids)) == SQLITE_ROW) {
		struct mib total, sums;
		int64_t id = sqlite3_column_int64(ids, 0), key;

		read_sums(ids, &total);
		key = sort_key(&total, f->sort);
		if (n == f->limit && !ranks_before(key, id, &top[n - 1]))
			break;             /* nothing further down can rank in the top N */
		if (bounded && ++walked > WALK_MAX_CONTEXTS) {
			r = -EAGAIN;
			break;
		}
		r = filtered_sums(s, sums_st, id, &sums);
		if (r < 0)
			break;
		if (r == 0 || (f->accept && !f->accept(&sums, f->accept_arg))) {
			r = 0;
			continue;
		}
		r = 0;
		key = sort_key(&sums, f->sort);
		if (n == f->limit && !ranks_before(key, id, &top[n - 1]))
			continue;
		unsigned i = n < f->limit ? n++ : n - 1;

		for (; i > 0 && ranks_before(key, id, &top[i - 1]); i--)
			top[i] = top[i - 1];
		top[i] = (struct ranked){ key, id };
	}
	if (r == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE)
		r = store__fail(s, rc, "ranking contexts");
	sqlite3_finalize(sums_st);
	/* Emitted while the walk's statement still holds the read snapshot. */
	for (unsigned i = 0; r == 0 && i < n; i++)
		r = emit_ctx(s, f, e, top[i].id);
	free(top);
	return r;
}

/* Whether the time range holds fewer than RANGE_PROBE_ROWS rows (an index-only count
 * that stops there); false when mib_bucket is missing. */
static bool time_range_small(struct store *s, const struct store_ctx_filter *f)
{
	static const char probe_sql[] = "SELECT count(*) FROM (SELECT 1 FROM mib m"
		" INDEXED BY mib_bucket WHERE m.bucket_start >= ?4 AND m.bucket_start < ?5"
		" LIMIT ?1)";
	sqlite3 *db = store__db(s);
	sqlite3_stmt *st;
	bool small = false;

	if (sqlite3_prepare_v2(db, probe_sql, -1, &st, NULL) != SQLITE_OK)
		return false;
	sqlite3_bind_int64(st, 1, RANGE_PROBE_ROWS);
	sqlite3_bind_int64(st, 4, f->since_ns ? f->since_ns : INT64_MIN);
	sqlite3_bind_int64(st, 5, f->until_ns ? f->until_ns : INT64_MAX);
	if (sqlite3_step(st) == SQLITE_ROW)
		small = sqlite3_column_int64(st, 0) < RANGE_PROBE_ROWS;
	sqlite3_finalize(st);
	return small;
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

static int query_contexts(struct store *s, const struct store_ctx_filter *f,
			  struct ctx_emit *e)
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
	if (f->sort == STORE_SORT_LIVE) {
		/* Not in ctx_totals: the matching rows are grouped. */
		if (store_schema_version(s) < 9)
			return store__error(s, -EINVAL, "this store (schema %d) does not count "
					    "objects live at exit; record with this memprofd",
					    store_schema_version(s));
		return query_contexts_grouped(s, f, false, e);
	}
	bool rows = f->pid || f->since_ns || f->until_ns, totals = store_schema_version(s) >= 2;
	bool walkable = totals && rows && f->sort != STORE_SORT_DENSITY && f->limit &&
			f->limit <= WALK_MAX_LIMIT;

	switch (f->plan) {
	case STORE_PLAN_AUTO:
		break;
	case STORE_PLAN_TOTALS:
		if (!rows && totals)
			return query_contexts_totals(s, f, e);
		return query_contexts_grouped(s, f, false, e);
	case STORE_PLAN_WALK:
		if (walkable && (r = query_contexts_walk(s, f, e, false)) != -EAGAIN)
			return r;
		return query_contexts_grouped(s, f, false, e);
	case STORE_PLAN_GROUP_BY_TIME:
		return query_contexts_grouped(s, f, f->since_ns || f->until_ns, e);
	default:
		return query_contexts_grouped(s, f, false, e);
	}
	if (!rows && totals)
		return query_contexts_totals(s, f, e);
	if (!rows)
		return query_contexts_grouped(s, f, false, e);
	/* Row filters: a narrow time range from its index, else the walk where the key is
	 * a sum and the limit small, else (or when the walk would go too deep) grouping. */
	if ((f->since_ns || f->until_ns) && time_range_small(s, f))
		return query_contexts_grouped(s, f, true, e);
	if (walkable && (r = query_contexts_walk(s, f, e, true)) != -EAGAIN)
		return r;
	return query_contexts_grouped(s, f, false, e);
}

int store_query_contexts(struct store *s, const struct store_ctx_filter *f, store_ctx_cb cb,
			 void *arg)
{
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_)
		return ro_->contexts(rc_, s, f, cb, arg);
	struct ctx_emit e = { .cb = cb, .arg = arg };
	int r = query_contexts(s, f, &e);

	fcache_free(&e.fc);
	return r;
}

/* ---- time buckets ---- */

static const char buckets_sql[] =
	"SELECT m.bucket_start, m.context_id, sum(m.alloc_count), sum(m.total_size),"
	" sum(m.total_access_count), sum(m.total_lifetime_ns)"
	" FROM mib m JOIN contexts c ON c.id = m.context_id JOIN binaries b ON b.id = c.binary_id"
	" WHERE " ROWS_WHERE " AND (?2 IS NULL OR b.build_id = ?2 OR b.path = ?2)"
	" GROUP BY m.bucket_start, m.context_id ORDER BY m.bucket_start, m.context_id";

int store_query_buckets(struct store *s, const struct store_ctx_filter *f, store_bucket_cb cb,
			void *arg)
{
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_)
		return ro_->buckets(rc_, s, f, cb, arg);
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
			.total_access_count = col_u64(st, 4), .total_lifetime_ns = col_u64(st, 5),
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
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_)
		return ro_->binaries(rc_, s, cb, arg);
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
/* Schema >= 11 (issue 18): with what the run missed and its last flush. */
static const char runs_v11_sql[] = RUNS_COLS ", access_source, access_reasons, missed_exec,"
	" missed_late, missed_unknown, flushed_ns FROM runs ORDER BY id DESC";

int store_query_runs(struct store *s, store_run_cb cb, void *arg)
{
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_ && ro_->runs)
		return ro_->runs(rc_, s, cb, arg);
	int v = store_schema_version(s);
	sqlite3_stmt *st = store__stmt(s, v >= 11 ? runs_v11_sql : v >= 4 ? runs_v4_sql : runs_sql);
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
		if (v >= 11) {
			row.stats.missed_exec = col_u64(st, 18);
			row.stats.missed_late = col_u64(st, 19);
			row.stats.missed_unknown = col_u64(st, 20);
			row.stats.flushed_ns = sqlite3_column_int64(st, 21);
		}
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying runs");
}

/* ---- data-access sampling (schema >= 4) ---- */

double store_data_density(uint64_t est_accesses, uint64_t size, uint64_t observed_ns)
{
	/* DATA_DENSITY_SQL below is the same arithmetic in SQL. */
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
	" AND d.symbol != ''" \
	" GROUP BY d.binary_id, d.symbol, d.address ORDER BY "
#define DATA_TAIL " DESC, b.build_id, b.path, d.symbol, d.address LIMIT ?1"

/* Rows with symbol '' (addresses in a binary's data that no symbol covers) are no data
 * row: store_query_unsymbolized() counts them per binary. */

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
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_)
		return ro_->data(rc_, s, f, cb, arg);
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
	void *rc_;
	const struct store_rows_ops *ro_ = store__rows(s, &rc_);

	if (ro_ && ro_->access_classes)
		return ro_->access_classes(rc_, s, run_id, cb, arg);

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

static const char unsym_sql[] =
	"SELECT d.run_id, b.build_id, b.path, sum(d.access_samples), sum(d.est_accesses)"
	" FROM data_access d JOIN binaries b ON b.id = d.binary_id"
	" WHERE d.symbol = '' AND (?1 = 0 OR d.run_id = ?1)"
	" GROUP BY d.run_id, d.binary_id ORDER BY d.run_id DESC, 4 DESC, b.path";

int store_query_unsymbolized(struct store *s, int64_t run_id, store_unsym_cb cb, void *arg)
{
	int rc = store_schema_version(s);

	if (rc < 0)
		return rc;
	if (rc < 4)
		return 0;

	sqlite3_stmt *st = store__stmt(s, unsym_sql);

	if (!st)
		return -EIO;

	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_unsym_row row = {
			.run_id = sqlite3_column_int64(st, 0), .build_id = col_text(st, 1),
			.binary = col_text(st, 2), .samples = col_u64(st, 3),
			.est_accesses = col_u64(st, 4),
		};
		int r = cb(&row, arg);

		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "querying unsymbolized data accesses");
}
