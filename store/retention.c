/* Retention, compaction and the size bound, in SQL over the mib table. Compaction
 * reproduces mib_combine(): SUM of counts, MIN/MAX of extremes over non-empty rows, and
 * the "last object" fields of the row whose last object died last (ranked by a window
 * function, same order as store/query.c), and AccessHistograms by the SQL aggregate
 * mib_hist_merge() (store.c). Invariant: every step runs in one IMMEDIATE
 * transaction through store_begin()/store_commit(), and after rows are deleted the
 * writer's id caches are forgotten, so no later flush can write a dangling id. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>

#include "store/store.h"

#define SIZE_MAX_ROUNDS 16   /* delete-and-measure rounds of store_enforce_size() */

static int exec(struct store *s, const char *sql, const char *what)
{
	int rc = sqlite3_exec(store__db(s), sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : store__fail(s, rc, what);
}

/* Runs a statement with up to two int64 bindings; returns changes() or -errno. */
static int64_t run2(struct store *s, const char *sql, int64_t a, int64_t b, int nbind,
		    const char *what)
{
	sqlite3 *db = store__db(s);
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__fail(s, rc, what);
	if (nbind > 0)
		sqlite3_bind_int64(st, 1, a);
	if (nbind > 1)
		sqlite3_bind_int64(st, 2, b);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store__fail(s, rc, what);
	return sqlite3_changes64(db);
}

static int query_i64(struct store *s, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(store__db(s), sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__fail(s, rc, sql);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_DONE;
	} else if (rc == SQLITE_DONE) {
		*out = 0;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, sql);
}

static int finish(struct store *s, int r)
{
	if (r < 0) {
		store_rollback(s);
		return r;
	}
	r = store_commit(s);
	if (r < 0) {
		store_rollback(s);
		return r;
	}
	return store__forget_ids(s);
}

int store_used_bytes(struct store *s, uint64_t *used, uint64_t *file)
{
	int64_t pages, free_pages, page_size;
	int r = query_i64(s, "PRAGMA page_count", &pages);

	if (!r)
		r = query_i64(s, "PRAGMA freelist_count", &free_pages);
	if (!r)
		r = query_i64(s, "PRAGMA page_size", &page_size);
	if (r)
		return r;
	if (used)
		*used = (uint64_t)(pages - free_pages) * (uint64_t)page_size;
	if (file)
		*file = (uint64_t)pages * (uint64_t)page_size;
	return 0;
}

/* The GC statements, in dependency order: mib -> processes/contexts -> stacks ->
 * frames (through the stacks' blobs) -> binaries. */
static int gc_locked(struct store *s, struct store_maint_stats *st)
{
	int64_t n;

	n = run2(s, "DELETE FROM processes WHERE exit_ns IS NOT NULL AND NOT EXISTS "
		 "(SELECT 1 FROM mib m WHERE m.process_id = processes.id)", 0, 0, 0, "gc: processes");
	if (n < 0)
		return (int)n;
	st->procs_deleted += n;
	/* Derived per-context tables (schema v2's ctx_totals) refer to contexts: their rows
	 * for contexts without MIBs go first. Absent in older schemas. */
	int has_totals = store__has(s, "ctx_totals", NULL);

	if (has_totals < 0)
		return has_totals;
	if (has_totals) {
		n = run2(s, "DELETE FROM ctx_totals WHERE NOT EXISTS "
			 "(SELECT 1 FROM mib m WHERE m.context_id = ctx_totals.context_id)", 0, 0, 0,
			 "gc: context totals");
		if (n < 0)
			return (int)n;
	}
	n = run2(s, "DELETE FROM contexts WHERE NOT EXISTS "
		 "(SELECT 1 FROM mib m WHERE m.context_id = contexts.id)", 0, 0, 0, "gc: contexts");
	if (n < 0)
		return (int)n;
	st->contexts_deleted += n;
	n = run2(s, "DELETE FROM stacks WHERE NOT EXISTS "
		 "(SELECT 1 FROM contexts c WHERE c.stack_id = stacks.id)", 0, 0, 0, "gc: stacks");
	if (n < 0)
		return (int)n;
	st->stacks_deleted += n;

	/* Frames are referenced from the stacks' blobs (little-endian int64 ids). */
	int r = exec(s, "CREATE TEMP TABLE IF NOT EXISTS gc_keep(id INTEGER PRIMARY KEY);"
		     "DELETE FROM temp.gc_keep", "gc: frames");
	if (r)
		return r;
	sqlite3 *db = store__db(s);
	sqlite3_stmt *sel, *ins;
	int rc = sqlite3_prepare_v2(db, "SELECT frames FROM stacks", -1, &sel, NULL);

	if (rc != SQLITE_OK)
		return store__fail(s, rc, "gc: reading stacks");
	rc = sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO temp.gc_keep(id) VALUES (?1)", -1, &ins, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_finalize(sel);
		return store__fail(s, rc, "gc: frames");
	}
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
		const unsigned char *b = sqlite3_column_blob(sel, 0);
		int len = sqlite3_column_bytes(sel, 0);

		for (int i = 0; i + 8 <= len && rc == SQLITE_ROW; i += 8) {
			uint64_t id = 0;

			for (int k = 7; k >= 0; k--)
				id = id << 8 | b[i + k];
			sqlite3_bind_int64(ins, 1, (int64_t)id);
			if (sqlite3_step(ins) != SQLITE_DONE)
				rc = SQLITE_ERROR;
			sqlite3_reset(ins);
		}
		if (rc != SQLITE_ROW)
			break;
	}
	sqlite3_finalize(sel);
	sqlite3_finalize(ins);
	if (rc != SQLITE_DONE)
		return store__fail(s, rc == SQLITE_ROW ? SQLITE_ERROR : rc, "gc: frames");
	n = run2(s, "DELETE FROM frames WHERE id NOT IN (SELECT id FROM temp.gc_keep)", 0, 0, 0,
		 "gc: frames");
	if (n < 0)
		return (int)n;
	st->frames_deleted += n;
	r = exec(s, "DELETE FROM temp.gc_keep", "gc: frames");
	if (r)
		return r;
	n = run2(s, "DELETE FROM binaries WHERE NOT EXISTS (SELECT 1 FROM processes p WHERE p.binary_id = binaries.id)"
		 " AND NOT EXISTS (SELECT 1 FROM frames f WHERE f.binary_id = binaries.id)"
		 " AND NOT EXISTS (SELECT 1 FROM contexts c WHERE c.binary_id = binaries.id)"
		 /* schema >= 4: the writer has migrated; data symbols keep their binary */
		 " AND NOT EXISTS (SELECT 1 FROM data_access d WHERE d.binary_id = binaries.id)",
		 0, 0, 0, "gc: binaries");
	if (n < 0)
		return (int)n;
	st->binaries_deleted += n;
	return 0;
}

int store_gc(struct store *s, struct store_maint_stats *st)
{
	struct store_maint_stats ignored = {0};
	int r = store_begin(s);

	if (r)
		return r;
	return finish(s, gc_locked(s, st ? st : &ignored));
}

static int delete_before(struct store *s, int64_t cutoff_ns, struct store_maint_stats *st)
{
	int64_t n = run2(s, "DELETE FROM mib WHERE bucket_start < ?1", cutoff_ns, 0, 1,
			 "retention: deleting old buckets");

	if (n < 0)
		return (int)n;
	st->mib_deleted += n;
	return gc_locked(s, st);
}

int store_retention_delete(struct store *s, int64_t cutoff_ns, struct store_maint_stats *st)
{
	struct store_maint_stats ignored = {0};
	int r = store_begin(s);

	if (r)
		return r;
	return finish(s, delete_before(s, cutoff_ns, st ? st : &ignored));
}

/* ---- compaction ---- */

#define NONEMPTY "m.alloc_count > 0"
#define C_SUM(f) ", sum(CASE WHEN " NONEMPTY " THEN m." #f " ELSE 0 END) AS " #f
#define C_MIN(f) ", coalesce(min(CASE WHEN " NONEMPTY " THEN m." #f " END), 0) AS " #f
#define C_MAX(f) ", coalesce(max(CASE WHEN " NONEMPTY " THEN m." #f " END), 0) AS " #f
#define C_LAST(f) ", coalesce(max(CASE WHEN m.rn = 1 THEN m." #f " END), 0) AS " #f
#define C_COL(f, agg) C_##agg(f)
/* Density extremes: NULL (unknown) when any non-empty row's is. */
#define C_D(f, agg) ", CASE WHEN count(CASE WHEN " NONEMPTY " THEN 1 END) = count(CASE WHEN " \
	NONEMPTY " THEN m." #f " END) THEN " #agg "(CASE WHEN " NONEMPTY " THEN m." #f " END)" \
	" END AS " #f
#define COLS(f, agg) ", " #f

/* ?1 cutoff, ?2 width. Groups (context, process, coarse bucket) that need work: more
 * than one row, or one row not yet aligned. */
static const char compact_sql[] =
	"CREATE TEMP TABLE compacted AS"
	" WITH src AS (SELECT *, bucket_start - (bucket_start % ?2) AS nb FROM main.mib"
	"   WHERE bucket_start < ?1),"
	" m AS (SELECT *, row_number() OVER (PARTITION BY context_id, process_id, nb"
	"   ORDER BY alloc_count > 0 DESC, dealloc_ts_ns DESC, alloc_ts_ns DESC,"
	"   alloc_cpu DESC, dealloc_cpu DESC) AS rn FROM src)"
	" SELECT m.context_id, m.process_id, m.nb AS bucket_start"
	STORE__MIB_FIELDS(C_COL) STORE__MIB_V9_FIELDS(C_COL) STORE__MIB_V12_FIELDS(C_D)
	STORE__MIB_V13_FIELDS(C_COL) STORE__MIB_V16_FIELDS(C_COL) STORE__MIB_V17_FIELDS(C_COL)
	", mib_hist_merge(CASE WHEN " NONEMPTY " THEN m.access_hist END) AS access_hist"
	", count(*) AS nrows FROM m GROUP BY m.context_id, m.process_id, m.nb"
	" HAVING count(*) > 1 OR max(m.bucket_start <> m.nb)";

static const char compact_delete_sql[] =
	"DELETE FROM main.mib WHERE bucket_start < ?1 AND"
	" (context_id, process_id, bucket_start - (bucket_start % ?2)) IN"
	" (SELECT context_id, process_id, bucket_start FROM temp.compacted)";

static const char compact_insert_sql[] =
	"INSERT INTO main.mib(context_id, process_id, bucket_start" STORE__MIB_FIELDS(COLS)
	STORE__MIB_V9_FIELDS(COLS) STORE__MIB_V12_FIELDS(COLS) STORE__MIB_V13_FIELDS(COLS)
	STORE__MIB_V16_FIELDS(COLS) STORE__MIB_V17_FIELDS(COLS)
	", access_hist) SELECT context_id, process_id, bucket_start"
	STORE__MIB_FIELDS(COLS) STORE__MIB_V9_FIELDS(COLS) STORE__MIB_V12_FIELDS(COLS)
	STORE__MIB_V13_FIELDS(COLS) STORE__MIB_V16_FIELDS(COLS) STORE__MIB_V17_FIELDS(COLS)
	", access_hist FROM temp.compacted WHERE alloc_count > 0";

static int compact_locked(struct store *s, int64_t cutoff, int64_t width,
			  struct store_maint_stats *st)
{
	int64_t n;
	int r = exec(s, "DROP TABLE IF EXISTS temp.compacted", "compaction");

	if (r)
		return r;
	n = run2(s, compact_sql, cutoff, width, 2, "compaction: grouping");
	if (n < 0)
		return (int)n;
	n = run2(s, compact_delete_sql, cutoff, width, 2, "compaction: deleting fine rows");
	if (n < 0)
		return (int)n;
	st->mib_compacted += n;
	n = run2(s, compact_insert_sql, 0, 0, 0, "compaction: writing coarse rows");
	if (n < 0)
		return (int)n;
	st->mib_created += n;
	return exec(s, "DROP TABLE temp.compacted", "compaction");
}

int store_compact(struct store *s, int64_t cutoff_ns, int64_t width_ns,
		  struct store_maint_stats *st)
{
	struct store_maint_stats ignored = {0};

	if (width_ns <= 0 || cutoff_ns <= 0)
		return store__error(s, -EINVAL, "compaction: width and cutoff must be positive");
	int r = store_begin(s);

	if (r)
		return r;
	return finish(s, compact_locked(s, cutoff_ns, width_ns, st ? st : &ignored));
}

/* ---- the size bound ---- */

/* The bucket_start below which deleting frees about `want` rows (never the newest). */
static int oldest_cutoff(struct store *s, int64_t want, int64_t *cutoff)
{
	sqlite3_stmt *st;
	int64_t seen = 0, newest = 0;
	int r = query_i64(s, "SELECT max(bucket_start) FROM mib", &newest);

	if (r)
		return r;
	int rc = sqlite3_prepare_v2(store__db(s), "SELECT bucket_start, count(*) FROM mib"
				    " GROUP BY bucket_start ORDER BY bucket_start", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store__fail(s, rc, "size bound: counting buckets");
	*cutoff = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t b = sqlite3_column_int64(st, 0);

		if (b >= newest)
			break;
		*cutoff = b + 1;
		seen += sqlite3_column_int64(st, 1);
		if (seen >= want)
			break;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store__fail(s, rc, "size bound");
}

int store_enforce_size(struct store *s, uint64_t max_bytes, struct store_maint_stats *st)
{
	struct store_maint_stats ignored = {0};
	uint64_t used = 0, target = (uint64_t)(max_bytes * STORE_SIZE_LOW_WATER);
	int r;

	if (!st)
		st = &ignored;
	if (!max_bytes)
		return 0;
	r = store_used_bytes(s, &used, NULL);
	if (r)
		return r;
	st->used_before = st->used_after = used;
	for (int round = 0; used > max_bytes && round < SIZE_MAX_ROUNDS; round++) {
		int64_t rows = 0, cutoff = 0;

		r = query_i64(s, "SELECT count(*) FROM mib", &rows);
		if (r)
			return r;
		if (rows == 0)
			break;
		/* Rows stand for the bulk of the size; delete in proportion, at least one bucket. */
		int64_t want = (int64_t)((double)rows * (double)(used - target) / (double)used) + 1;

		r = oldest_cutoff(s, want, &cutoff);
		if (r)
			return r;
		if (!cutoff)
			break;     /* only the newest bucket is left */
		r = store_begin(s);
		if (r)
			return r;
		r = finish(s, delete_before(s, cutoff, st));
		if (r)
			return r;
		r = store_used_bytes(s, &used, NULL);
		if (r)
			return r;
		st->used_after = used;
		if (used <= target)
			break;
		max_bytes = target;   /* keep going down to the low water once started */
	}
	return store_incremental_vacuum(s);
}

int store_checkpoint(struct store *s)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(store__db(s), "PRAGMA wal_checkpoint(TRUNCATE)", -1, &st, NULL);
	int busy = 0;

	if (rc != SQLITE_OK)
		return store__fail(s, rc, "checkpoint");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		busy = sqlite3_column_int(st, 0);
		rc = SQLITE_DONE;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store__fail(s, rc, "checkpoint");
	return busy ? store__error(s, -EBUSY, "checkpoint: a reader kept the WAL from being truncated") : 0;
}

int store_incremental_vacuum(struct store *s)
{
	int64_t mode = 0;
	int r = query_i64(s, "PRAGMA auto_vacuum", &mode);

	if (r || mode != 2)
		return r;
	return exec(s, "PRAGMA incremental_vacuum", "incremental vacuum");
}

int store_integrity_check(struct store *s, char *msg, size_t msgsz)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(store__db(s), "PRAGMA integrity_check", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__fail(s, rc, "integrity check");
	rc = sqlite3_step(st);
	const char *t = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
	bool ok = t && !strcmp(t, "ok");

	if (msg && msgsz)
		snprintf(msg, msgsz, "%s", t ? t : sqlite3_errmsg(store__db(s)));
	sqlite3_finalize(st);
	if (!t)
		return store__fail(s, rc, "integrity check");
	return ok ? 0 : -EUCLEAN;
}
