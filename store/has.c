/* Whether the store has a table, or a table's column: how readers of every schema version
 * decide what an older store lacks (store__has in store.h), instead of comparing version
 * numbers. One cached statement; pragma_table_info of a missing table has no rows. */
#include <errno.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/stmt.h"

static const char has_sql[] =
	"SELECT count(*) FROM pragma_table_info(?1) WHERE ?2 IS NULL OR name = ?2";

int store__has(struct store *s, const char *table, const char *column)
{
	sqlite3_stmt *st = store__stmt(s, has_sql);
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	if (column)
		sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW)
		return store__fail(s, rc, "reading the store's schema");
	return sqlite3_column_int(st, 0) > 0;
}
