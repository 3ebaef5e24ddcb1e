/* Frames stored bare (a build-id and an offset, no name, no lines), oldest first: what a
 * writer that died between a flush's commit and its naming transaction left, and what
 * the daemon's namer (daemon/service/namer.c) names after each flush. Cost: one indexed
 * range scan of frames from an id on; frame_lines looked up per frame by its key. */
#include <errno.h>
#include <sqlite3.h>

#include "store/store.h"
#include "store/stmt.h"

static const char bare_sql[] =
	"SELECT f.id, b.build_id, b.path, f.offset FROM frames f JOIN binaries b"
	" ON b.id = f.binary_id WHERE f.id > ?1 AND f.function IS NULL AND b.build_id <> ''"
	" AND NOT EXISTS (SELECT 1 FROM frame_lines l WHERE l.frame_id = f.id)"
	" ORDER BY f.id LIMIT ?2";

int store_bare_frames(struct store *s, int64_t after, unsigned max, store_bare_fn fn, void *arg)
{
	sqlite3_stmt *st = store__stmt(s, bare_sql);
	int rc, n = 0;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 2, max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *bid = (const char *)sqlite3_column_text(st, 1);
		const char *path = (const char *)sqlite3_column_text(st, 2);
		int r = fn(arg, sqlite3_column_int64(st, 0), bid ? bid : "", path ? path : "",
			   (uint64_t)sqlite3_column_int64(st, 3));

		if (r < 0)
			return r;
		n++;
	}
	return rc == SQLITE_DONE ? n : store__fail(s, rc, "listing bare frames");
}
