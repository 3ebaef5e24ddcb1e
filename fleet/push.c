/* Pushing a store (fleet/push.h; the scheme is in cmd_push.c's opening comment). Reads
 * the store with plain read-only SQLite statements, in each table's primary-key order;
 * binaries (few) and frame ids (one per return address) are held in memory to turn a
 * stack's frame ids into (binary key, offset) pairs. Needs store schema >= 6. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <endian.h>
#include <sqlite3.h>

#include "fleet/fleet.h"
#include "fleet/push.h"
#include "store/store.h"

#define PUSH_MIN_SCHEMA 6          /* mib.run_id and mib.access_hist */
#define PUSH_MAX_RUNS 1000000      /* runs in one store */
#define BIN_KEY_MAX 4200           /* "path:" + PATH_MAX */

#define _cleanup_(f) __attribute__((cleanup(f)))

struct run_mark { int64_t id; uint64_t mark, rows; bool send; };
struct bin { int64_t id; char *key; };
struct frame_ref { int64_t id; uint32_t bin; uint64_t offset; };

struct pusher {
	sqlite3 *db;
	struct ch *ch;
	const char *host;
	uint64_t push_id;
	struct tsv_buf buf;
	const char *table;
	uint64_t nrows;
	struct run_mark *runs;
	size_t nruns;
	struct bin *bins;
	size_t nbins;
	struct frame_ref *frames;
	size_t nframes, frames_cap;
	struct push_stats *st;
	int version;               /* the store's schema version */
	char *err;
	size_t errsz;
};

static int sql_fail(struct pusher *p, const char *what)
{
	snprintf(p->err, p->errsz, "%s: %s", what, sqlite3_errmsg(p->db));
	return -EIO;
}

static void stmt_freep(sqlite3_stmt **st) { sqlite3_finalize(*st); }

static int prepare(struct pusher *p, const char *sql, sqlite3_stmt **st)
{
	return sqlite3_prepare_v2(p->db, sql, -1, st, NULL) == SQLITE_OK ? 0 :
		sql_fail(p, "reading the store");
}

/* ---- batching ---- */

static int flush_batch(struct pusher *p)
{
	char sql[128];
	int r;

	if (!p->nrows)
		return 0;
	if (p->buf.oom) {
		snprintf(p->err, p->errsz, "out of memory building a batch");
		return -ENOMEM;
	}
	snprintf(sql, sizeof(sql), "INSERT INTO " FLEET_DB ".%s FORMAT TabSeparated", p->table);
	r = ch_exec(p->ch, sql, &p->buf, NULL);
	if (r) {
		snprintf(p->err, p->errsz, "%s (push cut short after %" PRIu64 " rows; nothing of "
			 "it counts until a push completes)", ch_errmsg(p->ch), p->st->rows);
		return r;
	}
	p->st->rows += p->nrows;
	p->nrows = 0;
	tsv_reset(&p->buf);
	return 0;
}

static int begin_table(struct pusher *p, const char *table)
{
	int r = flush_batch(p);

	p->table = table;
	return r;
}

/* Starts a row: host and push id, the columns every table begins with. */
static void row_start(struct pusher *p)
{
	tsv_str(&p->buf, p->host);
	tsv_tab(&p->buf);
	tsv_u64(&p->buf, p->push_id);
}

static int row_end(struct pusher *p)
{
	tsv_nl(&p->buf);
	p->nrows++;
	if (p->nrows >= FLEET_BATCH_ROWS || p->buf.len >= FLEET_BATCH_BYTES)
		return flush_batch(p);
	return 0;
}

static void col_i64(struct pusher *p, int64_t v) { tsv_tab(&p->buf); tsv_i64(&p->buf, v); }
static void col_u64(struct pusher *p, uint64_t v) { tsv_tab(&p->buf); tsv_u64(&p->buf, v); }
static void col_str(struct pusher *p, const char *s) { tsv_tab(&p->buf); tsv_str(&p->buf, s); }

static const char *text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* ---- run marks ---- */

static struct run_mark *run_find(struct pusher *p, int64_t id)
{
	size_t lo = 0, hi = p->nruns;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->runs[mid].id == id)
			return &p->runs[mid];
		if (p->runs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int load_runs(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, "SELECT id FROM runs UNION SELECT run_id FROM mib UNION"
			    " SELECT run_id FROM data_access ORDER BY 1", &st);

	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (p->nruns >= PUSH_MAX_RUNS) {
			snprintf(p->err, p->errsz, "more than %d runs in the store", PUSH_MAX_RUNS);
			return -E2BIG;
		}
		struct run_mark *v = realloc(p->runs, (p->nruns + 1) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->runs = v;
		p->runs[p->nruns++] = (struct run_mark){ .id = sqlite3_column_int64(st, 0),
							  .mark = FLEET_FNV_SEED };
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading runs");
}

/* Folds every column of the statement's row, from column `from` on, into h. */
static uint64_t hash_row(sqlite3_stmt *st, int from, uint64_t h)
{
	for (int i = from; i < sqlite3_column_count(st); i++) {
		unsigned char t = (unsigned char)sqlite3_column_type(st, i);
		int64_t v;

		h = fleet_fnv(h, &t, 1);
		switch (t) {
		case SQLITE_INTEGER:
			v = sqlite3_column_int64(st, i);
			h = fleet_fnv(h, &v, sizeof(v));
			break;
		case SQLITE_NULL:
			break;
		default: {
			const void *b = sqlite3_column_blob(st, i);
			int n = sqlite3_column_bytes(st, i);

			h = fleet_fnv(h, &n, sizeof(n));
			h = fleet_fnv(h, b, (size_t)n);
		}
		}
	}
	return h;
}

/* Column 0 of each query is the run the row belongs to: every table push sends a run's
 * rows from, so a change to any of them changes the run's mark. The last two exist from
 * store schema 4 (access classes) and 10 (stacks.truncated: a stack the daemon marks cut
 * after its rows were pushed changes the mark of the runs with rows on it). */
static const struct { const char *sql; int min_version; bool rows; } mark_sql[] = {
	{ "SELECT id, * FROM runs", 0, true },
	{ "SELECT coalesce(run_id, 0), * FROM processes", 0, true },
	{ "SELECT run_id, * FROM mib", 0, true },
	{ "SELECT run_id, * FROM data_access", 0, true },
	{ "SELECT run_id, * FROM access_classes", 4, true },
	{ "SELECT DISTINCT m.run_id, s.hash FROM stacks s JOIN contexts c ON c.stack_id = s.id"
	  " JOIN mib m ON m.context_id = c.id WHERE s.truncated != 0 ORDER BY 1, 2", 10, false },
};

static int mark_runs(struct pusher *p)
{
	for (size_t q = 0; q < sizeof(mark_sql) / sizeof(mark_sql[0]); q++) {
		_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
		int rc, r;

		if (p->version < mark_sql[q].min_version)
			continue;
		if ((r = prepare(p, mark_sql[q].sql, &st)))
			return r;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			struct run_mark *m = run_find(p, sqlite3_column_int64(st, 0));
			unsigned char tag = (unsigned char)q;

			if (!m)
				continue;     /* a process of no run of ours */
			m->mark = hash_row(st, 1, fleet_fnv(m->mark, &tag, 1));
			m->rows += mark_sql[q].rows;
		}
		if (rc != SQLITE_DONE)
			return sql_fail(p, "reading the store");
	}
	return 0;
}

/* Marks as unsent every run whose (run, mark) the ledger has for this host. */
static int check_ledger(struct pusher *p)
{
	struct tsv_buf q = { 0 };
	const struct tsv_buf *resp;
	struct tsv_cur cur;
	int r;

	tsv_printf(&q, "SELECT run_id, mark FROM " FLEET_DB ".pushes WHERE host = ");
	tsv_sql_str(&q, p->host);
	r = q.oom ? -ENOMEM : ch_exec(p->ch, q.p, NULL, &resp);
	tsv_free(&q);
	if (r) {
		snprintf(p->err, p->errsz, "%s", ch_errmsg(p->ch));
		return r;
	}
	for (size_t i = 0; i < p->nruns; i++)
		p->runs[i].send = true;
	tsv_cur_init(&cur, resp);
	while (tsv_next_row(&cur)) {
		int64_t id = tsv_get_i64(&cur);
		uint64_t mark = tsv_get_u64(&cur);
		struct run_mark *m = run_find(p, id);

		if (m && m->mark == mark)
			m->send = false;
	}
	if (cur.bad) {
		snprintf(p->err, p->errsz, "ClickHouse at %s: malformed ledger answer", ch_url(p->ch));
		return -EPROTO;
	}
	for (size_t i = 0; i < p->nruns; i++) {
		p->st->runs_sent += p->runs[i].send;
		p->st->runs_skipped += !p->runs[i].send;
	}
	return 0;
}

/* ---- dimension tables ---- */

/* bins are in id order (push_binaries reads them so); UINT32_MAX if unknown. */
static uint32_t bin_index(struct pusher *p, int64_t id)
{
	size_t lo = 0, hi = p->nbins;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->bins[mid].id == id)
			return (uint32_t)mid;
		if (p->bins[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX;
}

static const char *bin_key(struct pusher *p, int64_t id)
{
	uint32_t i = bin_index(p, id);

	return i == UINT32_MAX ? "" : p->bins[i].key;
}

static int push_binaries(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	char key[BIN_KEY_MAX];
	int rc, r = prepare(p, "SELECT id, build_id, path FROM binaries ORDER BY id", &st);

	if (!r)
		r = begin_table(p, "binaries");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct bin *v = realloc(p->bins, (p->nbins + 1) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->bins = v;
		fleet_bin_key(key, sizeof(key), text(st, 1), text(st, 2));
		if (!(p->bins[p->nbins].key = strdup(key)))
			return -ENOMEM;
		p->bins[p->nbins++].id = sqlite3_column_int64(st, 0);
		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, key);
		col_str(p, text(st, 1));
		col_str(p, text(st, 2));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading binaries");
}

static int push_processes(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, "SELECT id, coalesce(run_id, 0), pid, start_ns, binary_id"
			    " FROM processes ORDER BY id", &st);

	if (!r)
		r = begin_table(p, "processes");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		row_start(p);
		for (int i = 0; i < 4; i++)
			col_i64(p, sqlite3_column_int64(st, i));
		col_str(p, bin_key(p, sqlite3_column_int64(st, 4)));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading processes");
}

static const struct frame_ref *frame_find(struct pusher *p, int64_t id)
{
	size_t lo = 0, hi = p->nframes;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->frames[mid].id == id)
			return &p->frames[mid];
		if (p->frames[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The line columns of a frame, gathered as arrays while its rows are read. */
struct line_cols { struct tsv_buf fn, hfn, mg, hmg, file, hfile, line, col, decl, inl; };

static void lines_reset(struct line_cols *l)
{
	struct tsv_buf *b[] = { &l->fn, &l->hfn, &l->mg, &l->hmg, &l->file, &l->hfile, &l->line,
				&l->col, &l->decl, &l->inl };

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		tsv_reset(b[i]);
		tsv_arr_open(b[i]);
	}
}

static void lines_free(struct line_cols *l)
{
	struct tsv_buf *b[] = { &l->fn, &l->hfn, &l->mg, &l->hmg, &l->file, &l->hfile, &l->line,
				&l->col, &l->decl, &l->inl };

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		tsv_free(b[i]);
}

/* Columns 5..12: depth, function, mangled, file, line, col, decl_line, inlined. */
static void lines_add(struct line_cols *l, sqlite3_stmt *st)
{
	tsv_arr_str(&l->fn, text(st, 6));
	tsv_arr_u64(&l->hfn, sqlite3_column_type(st, 6) != SQLITE_NULL);
	tsv_arr_str(&l->mg, text(st, 7));
	tsv_arr_u64(&l->hmg, sqlite3_column_type(st, 7) != SQLITE_NULL);
	tsv_arr_str(&l->file, text(st, 8));
	tsv_arr_u64(&l->hfile, sqlite3_column_type(st, 8) != SQLITE_NULL);
	tsv_arr_u64(&l->line, (uint32_t)sqlite3_column_int64(st, 9));
	tsv_arr_u64(&l->col, (uint32_t)sqlite3_column_int64(st, 10));
	tsv_arr_u64(&l->decl, (uint32_t)sqlite3_column_int64(st, 11));
	tsv_arr_u64(&l->inl, sqlite3_column_int64(st, 12) != 0);
}

static int lines_emit(struct pusher *p, struct line_cols *l)
{
	struct tsv_buf *b[] = { &l->fn, &l->hfn, &l->mg, &l->hmg, &l->file, &l->hfile, &l->line,
				&l->col, &l->decl, &l->inl };

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		tsv_arr_close(b[i]);
		if (b[i]->oom)
			return -ENOMEM;
		tsv_tab(&p->buf);
		tsv_raw(&p->buf, b[i]->p, b[i]->len);
	}
	return row_end(p);
}

static int remember_frame(struct pusher *p, sqlite3_stmt *st)
{
	if (p->nframes == p->frames_cap) {
		size_t cap = p->frames_cap ? 2 * p->frames_cap : 1024;
		struct frame_ref *v = realloc(p->frames, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->frames = v;
		p->frames_cap = cap;
	}
	p->frames[p->nframes++] = (struct frame_ref){ .id = sqlite3_column_int64(st, 0),
		.bin = bin_index(p, sqlite3_column_int64(st, 1)),
		.offset = (uint64_t)sqlite3_column_int64(st, 2) };
	return 0;
}

/* Frames with their lines (one row per frame, lines as arrays), in id order. */
static int push_frames(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	struct line_cols l = { 0 };
	int64_t cur = INT64_MIN;
	int rc, r = prepare(p, "SELECT f.id, f.binary_id, f.offset, f.function, f.mangled, l.depth,"
			    " l.function, l.mangled, l.file, l.line, l.col, l.decl_line, l.inlined"
			    " FROM frames f LEFT JOIN frame_lines l ON l.frame_id = f.id"
			    " ORDER BY f.id, l.depth", &st);

	if (!r)
		r = begin_table(p, "frames");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);

		if (id != cur) {
			if (cur != INT64_MIN && (r = lines_emit(p, &l)))
				break;
			if ((r = remember_frame(p, st)))
				break;
			cur = id;
			row_start(p);
			col_str(p, bin_key(p, sqlite3_column_int64(st, 1)));
			col_u64(p, (uint64_t)sqlite3_column_int64(st, 2));
			col_u64(p, sqlite3_column_type(st, 3) != SQLITE_NULL);
			col_str(p, text(st, 3));
			col_u64(p, sqlite3_column_type(st, 4) != SQLITE_NULL);
			col_str(p, text(st, 4));
			lines_reset(&l);
		}
		if (sqlite3_column_type(st, 5) != SQLITE_NULL)
			lines_add(&l, st);
	}
	if (!r && rc == SQLITE_DONE && cur != INT64_MIN)
		r = lines_emit(p, &l);
	lines_free(&l);
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading frames");
}

/* Contexts with their stacks' frames as (binary key, offset) arrays. */
static int push_contexts(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, p->version >= 10 ?
			    "SELECT c.id, c.binary_id, s.hash, s.frames, s.truncated FROM contexts c"
			    " JOIN stacks s ON s.id = c.stack_id ORDER BY c.id" :
			    "SELECT c.id, c.binary_id, s.hash, s.frames, 0 FROM contexts c"
			    " JOIN stacks s ON s.id = c.stack_id ORDER BY c.id", &st);

	if (!r)
		r = begin_table(p, "contexts");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *blob = sqlite3_column_blob(st, 3);
		int n = sqlite3_column_bytes(st, 3) / 8;

		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, bin_key(p, sqlite3_column_int64(st, 1)));
		col_i64(p, sqlite3_column_int64(st, 2));
		for (int pass = 0; pass < 2; pass++) {
			tsv_tab(&p->buf);
			tsv_arr_open(&p->buf);
			for (int i = 0; i < n; i++) {
				uint64_t v;

				memcpy(&v, blob + 8 * (size_t)i, 8);
				const struct frame_ref *f = frame_find(p, (int64_t)le64toh(v));

				if (!f || f->bin == UINT32_MAX) {
					snprintf(p->err, p->errsz, "%s: context %lld names a frame that "
						 "does not exist", "reading the store",
						 (long long)sqlite3_column_int64(st, 0));
					return -EUCLEAN;
				}
				if (pass)
					tsv_arr_u64(&p->buf, f->offset);
				else
					tsv_arr_str(&p->buf, p->bins[f->bin].key);
			}
			tsv_arr_close(&p->buf);
		}
		col_u64(p, sqlite3_column_int(st, 4) != 0);
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading contexts");
}

/* ---- the changed runs' rows ---- */

static bool sending(struct pusher *p, int64_t run)
{
	struct run_mark *m = run_find(p, run);

	return m && m->send;
}

static int push_runs(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, "SELECT id, command, started_ns, ended_ns, status, alloc_mode FROM runs"
			    " ORDER BY id", &st);

	if (!r)
		r = begin_table(p, "runs");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!sending(p, sqlite3_column_int64(st, 0)))
			continue;
		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, text(st, 1));
		col_i64(p, sqlite3_column_int64(st, 2));
		col_i64(p, sqlite3_column_int64(st, 3));
		col_str(p, text(st, 4));
		col_str(p, text(st, 5));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading runs");
}

/* Access samples per run and class (store schema >= 4): the evidence rule's weight. */
static int push_access_classes(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc = SQLITE_DONE, r = p->version < 4 ? 0 :
		prepare(p, "SELECT run_id, class, samples, est_accesses FROM access_classes", &st);

	if (!r && st)
		r = begin_table(p, "access_classes");
	while (!r && st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!sending(p, sqlite3_column_int64(st, 0)))
			continue;
		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, text(st, 1));
		col_u64(p, (uint64_t)sqlite3_column_int64(st, 2));
		col_u64(p, (uint64_t)sqlite3_column_int64(st, 3));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading access classes");
}

#define PUSH_MIB_COL(f, agg) ", m." #f
#define PUSH_MIB_SQL(v9, v12, v13, v16) "SELECT m.run_id, c.binary_id, s.hash, m.process_id," \
	" m.bucket_start" STORE__MIB_FIELDS(PUSH_MIB_COL) v9 ", m.access_hist" v12 v13 v16 \
	" FROM mib m JOIN contexts c ON c.id = m.context_id JOIN stacks s ON s.id = c.stack_id"
/* Schema >= 9 has the evidence and live-at-exit columns; before, they are 0. Schema >= 12
 * has the per-object density extremes (NULL: unknown); before, they are unknown. Schema
 * >= 13 the watch evidence, >= 16 the estimate's stall-factor error, >= 17 the bytes
 * accessed; before, 0. */
static const char mib_sql_v17[] = PUSH_MIB_SQL(STORE__MIB_V9_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V12_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V13_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V16_FIELDS(PUSH_MIB_COL)
					       STORE__MIB_V17_FIELDS(PUSH_MIB_COL));
static const char mib_sql_v16[] = PUSH_MIB_SQL(STORE__MIB_V9_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V12_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V13_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V16_FIELDS(PUSH_MIB_COL) ", 0");
static const char mib_sql_v13[] = PUSH_MIB_SQL(STORE__MIB_V9_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V12_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V13_FIELDS(PUSH_MIB_COL), ", 0, 0");
static const char mib_sql_v12[] = PUSH_MIB_SQL(STORE__MIB_V9_FIELDS(PUSH_MIB_COL),
					       STORE__MIB_V12_FIELDS(PUSH_MIB_COL), ", 0, 0", ", 0, 0");
static const char mib_sql_v9[] = PUSH_MIB_SQL(STORE__MIB_V9_FIELDS(PUSH_MIB_COL),
					      ", NULL, NULL, NULL, NULL", ", 0, 0", ", 0, 0");
static const char mib_sql_v6[] = PUSH_MIB_SQL(", 0, 0, 0, 0", ", NULL, NULL, NULL, NULL", ", 0, 0",
					      ", 0, 0");
#define PUSH_MIB_NWATCH 2          /* STORE__MIB_V13_FIELDS, after the density extremes */
#define PUSH_MIB_NERR 2            /* STORE__MIB_V16_FIELDS and _V17_, after the watch evidence */
#define PUSH_MIB_NDENSITY 4        /* STORE__MIB_V12_FIELDS, after the histogram */
#define PUSH_MIB_FIRST 5           /* the column of alloc_count */
#define PUSH_MIB_NFIELDS 23        /* STORE__MIB_FIELDS, then STORE__MIB_V9_FIELDS */

static void col_hist(struct pusher *p, sqlite3_stmt *st, int i)
{
	const unsigned char *b = sqlite3_column_blob(st, i);
	int n = sqlite3_column_bytes(st, i) / 8;

	tsv_tab(&p->buf);
	tsv_arr_open(&p->buf);
	for (int k = 0; k < n && n <= MIB_HIST_MAX_LEN; k++) {
		uint64_t v;

		memcpy(&v, b + 8 * (size_t)k, 8);
		tsv_arr_u64(&p->buf, le64toh(v));
	}
	tsv_arr_close(&p->buf);
}

/* has_density and the four extremes: a row's are known when none is NULL (store.h). The
 * values travel as the bits of the (non-negative) doubles: exact, and ClickHouse's MIN/MAX
 * of the bits order as the values do, so the fleet gives merge's doubles bit for bit. */
static void col_density(struct pusher *p, sqlite3_stmt *st, int i)
{
	bool known = true;

	for (int k = 0; k < PUSH_MIB_NDENSITY; k++)
		known = known && sqlite3_column_type(st, i + k) != SQLITE_NULL &&
			sqlite3_column_double(st, i + k) >= 0;   /* not NaN, not negative */
	col_u64(p, known);
	for (int k = 0; k < PUSH_MIB_NDENSITY; k++) {
		double d = known ? sqlite3_column_double(st, i + k) : 0.0;
		uint64_t bits;

		memcpy(&bits, &d, sizeof(bits));
		col_u64(p, bits);
	}
}

static int push_mib(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, p->version >= 17 ? mib_sql_v17 : p->version >= 16 ? mib_sql_v16 : p->version >= 13 ? mib_sql_v13 :
			    p->version >= 12 ? mib_sql_v12 : p->version >= 9 ? mib_sql_v9 : mib_sql_v6,
			    &st);

	if (!r)
		r = begin_table(p, "mib");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!sending(p, sqlite3_column_int64(st, 0)))
			continue;
		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, bin_key(p, sqlite3_column_int64(st, 1)));
		col_i64(p, sqlite3_column_int64(st, 2));
		col_i64(p, sqlite3_column_int64(st, 3));
		col_i64(p, sqlite3_column_int64(st, 4));
		for (int i = 0; i < PUSH_MIB_NFIELDS; i++)
			col_u64(p, (uint64_t)sqlite3_column_int64(st, PUSH_MIB_FIRST + i));
		col_hist(p, st, PUSH_MIB_FIRST + PUSH_MIB_NFIELDS);
		col_density(p, st, PUSH_MIB_FIRST + PUSH_MIB_NFIELDS + 1);
		for (int i = 0; i < PUSH_MIB_NWATCH + PUSH_MIB_NERR; i++)
			col_u64(p, (uint64_t)sqlite3_column_int64(st, PUSH_MIB_FIRST +
						PUSH_MIB_NFIELDS + 1 + PUSH_MIB_NDENSITY + i));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading MIB rows");
}

/* Data rows join their run, as store_query_data() does (a row without one never counts). */
static int push_data(struct pusher *p)
{
	_cleanup_(stmt_freep) sqlite3_stmt *st = NULL;
	int rc, r = prepare(p, "SELECT d.run_id, d.binary_id, d.symbol, d.address, d.section, d.size,"
			    " d.access_samples, d.est_accesses, r.started_ns, r.ended_ns"
			    " FROM data_access d JOIN runs r ON r.id = d.run_id", &st);

	if (!r)
		r = begin_table(p, "data");
	while (!r && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!sending(p, sqlite3_column_int64(st, 0)))
			continue;
		row_start(p);
		col_i64(p, sqlite3_column_int64(st, 0));
		col_str(p, bin_key(p, sqlite3_column_int64(st, 1)));
		col_str(p, text(st, 2));
		col_u64(p, (uint64_t)sqlite3_column_int64(st, 3));
		col_u64(p, sqlite3_column_type(st, 4) != SQLITE_NULL);
		col_str(p, text(st, 4));
		for (int i = 5; i < 8; i++)
			col_u64(p, (uint64_t)sqlite3_column_int64(st, i));
		col_i64(p, sqlite3_column_int64(st, 8));
		col_i64(p, sqlite3_column_int64(st, 9));
		r = row_end(p);
	}
	return r ? r : rc == SQLITE_DONE ? 0 : sql_fail(p, "reading data symbols");
}

/* The ledger rows, last: one INSERT, so the push becomes visible all at once. */
static int push_ledger(struct pusher *p)
{
	int r = begin_table(p, "pushes");

	for (size_t i = 0; !r && i < p->nruns; i++) {
		if (!p->runs[i].send)
			continue;
		row_start(p);
		col_i64(p, p->runs[i].id);
		col_u64(p, p->runs[i].mark);
		col_u64(p, p->runs[i].rows);
		tsv_nl(&p->buf);
		p->nrows++;
	}
	return r ? r : flush_batch(p);
}

/* ---- the push ---- */

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int open_store(struct pusher *p, const char *path)
{
	struct store *s;
	char why[512], uri[4200];
	int r = store_open(&s, path, STORE_RDONLY, why, sizeof(why));

	if (r) {
		snprintf(p->err, p->errsz, "%s", why);
		return r;
	}
	int version = store_schema_version(s);

	p->version = version;
	store_close(s);
	if (version < PUSH_MIN_SCHEMA) {
		snprintf(p->err, p->errsz, "%s: store schema %d is older than push reads (%d): "
			 "`memprofd merge -o NEW.db %s` brings it up to date", path, version,
			 PUSH_MIN_SCHEMA, path);
		return -EPROTONOSUPPORT;
	}
	snprintf(uri, sizeof(uri), "file:%s?mode=ro", path);
	if (sqlite3_open_v2(uri, &p->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
		return sql_fail(p, path);
	sqlite3_busy_timeout(p->db, STORE_BUSY_TIMEOUT_MS);
	/* One snapshot for the marks and the rows sent. */
	return sqlite3_exec(p->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 :
		sql_fail(p, path);
}

static void pusher_free(struct pusher *p)
{
	if (p->db) {
		sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL);
		sqlite3_close(p->db);
	}
	ch_close(p->ch);
	tsv_free(&p->buf);
	for (size_t i = 0; i < p->nbins; i++)
		free(p->bins[i].key);
	free(p->bins);
	free(p->runs);
	free(p->frames);
}

int push_store(const struct push_opts *o, struct push_stats *st, char *err, size_t errsz)
{
	struct pusher p = { .host = o->host, .st = st, .err = err, .errsz = errsz };
	int64_t t0 = realtime_ns();
	int r = open_store(&p, o->db);

	if (!r && !(r = ch_open(&p.ch, o->url, err, errsz)))
		r = fleet_check_schema(p.ch, err, errsz);
	if (!r)
		r = load_runs(&p);
	if (!r)
		r = mark_runs(&p);
	if (!r)
		r = check_ledger(&p);
	if (!r && st->runs_sent) {
		p.push_id = (uint64_t)realtime_ns();
		int (*const steps[])(struct pusher *) = { push_binaries, push_processes, push_frames,
			push_contexts, push_runs, push_access_classes, push_mib, push_data,
			push_ledger };

		for (size_t i = 0; !r && i < sizeof(steps) / sizeof(steps[0]); i++)
			r = steps[i](&p);
	}
	if (r == -ENOMEM && !err[0])
		snprintf(err, errsz, "out of memory");
	st->seconds = (double)(realtime_ns() - t0) / 1e9;
	pusher_free(&p);
	return r;
}
