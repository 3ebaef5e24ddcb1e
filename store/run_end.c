/* Runs always end: a run's row names its writer (pid and start time in clock ticks since
 * boot, both from /proc, so a reused pid is told apart); a run still `running` whose
 * writer is gone is marked `crashed` by the next writer, its end frozen at its last
 * flush (its start if it never flushed). Only runs of this host's writers can be judged:
 * rows without a writer (schema < 11, or merged) are left as they are. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>
#include "store/store.h"

#define RUN_END_MAX 1024   /* runs judged per call (a store has a handful running) */

static uint64_t start_ticks_of(const char *stat_path)
{
	char buf[1024];
	unsigned long long ticks = 0;
	FILE *f = fopen(stat_path, "re");

	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	char state;
	if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &state, &ticks) != 2 || state == 'Z' || state == 'X')
		return 0;
	return ticks;
}

uint64_t store__self_start_ticks(void)
{
	return start_ticks_of("/proc/self/stat");
}

static bool writer_alive(int64_t pid, int64_t start)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	return start_ticks_of(path) == (uint64_t)start;
}

int store_end_crashed_runs(struct store *s)
{
	if (store_schema_version(s) < 11)
		return 0;
	sqlite3_stmt *sel = store__stmt(s, "SELECT id, writer_pid, writer_start FROM runs"
					" WHERE status = 'running' AND ended_ns = 0 AND writer_pid > 0");
	int64_t dead[RUN_END_MAX];
	int n = 0, rc;

	if (!sel)
		return -EIO;
	while (n < RUN_END_MAX && (rc = sqlite3_step(sel)) == SQLITE_ROW)
		if (!writer_alive(sqlite3_column_int64(sel, 1), sqlite3_column_int64(sel, 2)))
			dead[n++] = sqlite3_column_int64(sel, 0);
	sqlite3_reset(sel);
	for (int i = 0; i < n; i++) {
		sqlite3_stmt *up = store__stmt(s, "UPDATE runs SET status = 'crashed', ended_ns ="
					       " CASE WHEN flushed_ns > 0 THEN flushed_ns ELSE started_ns END"
					       " WHERE id = ?1");
		if (!up)
			return -EIO;
		sqlite3_bind_int64(up, 1, dead[i]);
		rc = sqlite3_step(up);
		sqlite3_reset(up);
		if (rc != SQLITE_DONE)
			return store__fail(s, rc, "marking a crashed run");
	}
	return n;
}
