/* What a run dropped over the daemon's memory_limit while its store was unwritable (schema
 * v13 table mem_drops): running totals, rewritten within each successful flush after a
 * drop, so `memprofd query status` shows them once the store is writable again. Readers
 * check that the table exists, so an older store simply has no record. */
#include <errno.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/stmt.h"

static const char put_sql[] =
	"INSERT OR REPLACE INTO mem_drops(run_id, aggregates, objects, limit_bytes)"
	" VALUES (?1, ?2, ?3, ?4)";
static const char has_sql[] =
	"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'mem_drops'";
static const char get_sql[] =
	"SELECT aggregates, objects, limit_bytes FROM mem_drops WHERE run_id = ?1";

int store_put_mem_drops(struct store *s, int64_t run_id, const struct store_mem_drops *m)
{
	sqlite3_stmt *st = store__stmt(s, put_sql);
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, (int64_t)m->aggregates);
	sqlite3_bind_int64(st, 3, (int64_t)m->objects);
	sqlite3_bind_int64(st, 4, (int64_t)m->limit_bytes);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "writing memory-limit drops");
}

int store_get_mem_drops(struct store *s, int64_t run_id, struct store_mem_drops *m)
{
	sqlite3_stmt *st = store__stmt(s, has_sql);
	int rc;

	*m = (struct store_mem_drops){ 0 };
	if (!st)
		return -EIO;
	{
		_cleanup_reset_ sqlite3_stmt *guard = st;

		if ((rc = sqlite3_step(st)) != SQLITE_ROW)
			return store__fail(s, rc, "looking for the mem_drops table");
		if (!sqlite3_column_int(st, 0))
			return 0;
	}
	if (!(st = store__stmt(s, get_sql)))
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return store__fail(s, rc, "reading memory-limit drops");
	m->aggregates = (uint64_t)sqlite3_column_int64(st, 0);
	m->objects = (uint64_t)sqlite3_column_int64(st, 1);
	m->limit_bytes = (uint64_t)sqlite3_column_int64(st, 2);
	return 1;
}
