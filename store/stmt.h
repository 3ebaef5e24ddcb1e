/* Store-internal: a prepared statement reset when its variable goes out of scope, so a
 * cached statement never keeps a read transaction open on an early return. */
#pragma once
#include <sqlite3.h>
#include "base/cleanup.h"

static inline void stmt_resetp(sqlite3_stmt **st)
{
	if (*st)
		sqlite3_reset(*st);
}
#define _cleanup_reset_ _cleanup_(stmt_resetp)
