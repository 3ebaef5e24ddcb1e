/* What a daemon run dropped at its limits (schema v14 table mem_drops, v15 columns): over
 * memory_limit while its store was unwritable (with the aggregates' peak size then), and
 * at its stop to end within the stop budget. Running totals, rewritten within each
 * successful flush after a drop, so `memprofd query status` shows them once the store is
 * writable again. Readers check the table and columns, so an older store has no record
 * (v13) or no peak and stop figures (v14). */
#include <errno.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/stmt.h"

static const char put_sql[] =
	"INSERT OR REPLACE INTO mem_drops(run_id, aggregates, objects, limit_bytes, peak_bytes,"
	" stop_records, stop_aggregates, stop_objects, stop_budget_ms)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
static const char get_v14_sql[] =
	"SELECT aggregates, objects, limit_bytes FROM mem_drops WHERE run_id = ?1";
static const char get_sql[] =
	"SELECT aggregates, objects, limit_bytes, peak_bytes, stop_records, stop_aggregates,"
	" stop_objects, stop_budget_ms FROM mem_drops WHERE run_id = ?1";

int store_put_mem_drops(struct store *s, int64_t run_id, const struct store_mem_drops *m)
{
	const uint64_t v[] = { m->aggregates, m->objects, m->limit_bytes, m->peak_bytes,
			       m->stop_records, m->stop_aggregates, m->stop_objects,
			       m->stop_budget_ms };
	sqlite3_stmt *st = store__stmt(s, put_sql);
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	for (int i = 0; i < (int)(sizeof(v) / sizeof(v[0])); i++)
		sqlite3_bind_int64(st, 2 + i, (int64_t)v[i]);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "writing the run's drops");
}

/* 0 without the table, 14 with it, 15 with its v15 columns; or -errno. */
static int table_version(struct store *s)
{
	int t = store__has(s, "mem_drops", NULL), c;

	if (t <= 0)
		return t;
	c = store__has(s, "mem_drops", "stop_budget_ms");
	return c < 0 ? c : c ? 15 : 14;
}

int store_get_mem_drops(struct store *s, int64_t run_id, struct store_mem_drops *m)
{
	uint64_t *out[] = { &m->aggregates, &m->objects, &m->limit_bytes, &m->peak_bytes,
			    &m->stop_records, &m->stop_aggregates, &m->stop_objects,
			    &m->stop_budget_ms };
	int v = table_version(s), rc;

	*m = (struct store_mem_drops){ 0 };
	if (v <= 0)
		return v;
	sqlite3_stmt *st = store__stmt(s, v == 14 ? get_v14_sql : get_sql);
	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "reading the run's drops");
	for (int i = 0; i < sqlite3_column_count(st); i++)
		*out[i] = (uint64_t)sqlite3_column_int64(st, i);
	return 1;
}
