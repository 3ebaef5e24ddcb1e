/* Schema and migrations. PRAGMA user_version is the schema version; migrations[i]
 * takes a database from version i to i + 1; the pending ones run in one IMMEDIATE
 * transaction together with the user_version bump, so a crash leaves either version,
 * never a mix (and a new store costs one commit).
 * A database newer than STORE_SCHEMA_VERSION is refused, never written. Integers that
 * are uint64 in C are stored as their int64 bit pattern. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>

#include "store/store.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The MIB value columns, as every version of the mib table has them. */
#define MIB_VALUE_COLUMNS \
	"  alloc_count INTEGER NOT NULL," \
	"  total_size INTEGER NOT NULL, min_size INTEGER NOT NULL, max_size INTEGER NOT NULL," \
	"  total_lifetime_ns INTEGER NOT NULL, min_lifetime_ns INTEGER NOT NULL," \
	"  max_lifetime_ns INTEGER NOT NULL," \
	"  alloc_ts_ns INTEGER NOT NULL, dealloc_ts_ns INTEGER NOT NULL," \
	"  alloc_cpu INTEGER NOT NULL, dealloc_cpu INTEGER NOT NULL," \
	"  num_migrated_cpu INTEGER NOT NULL, num_lifetime_overlaps INTEGER NOT NULL," \
	"  num_same_alloc_cpu INTEGER NOT NULL, num_same_dealloc_cpu INTEGER NOT NULL," \
	"  access_samples INTEGER NOT NULL, total_access_count INTEGER NOT NULL," \
	"  min_access_count INTEGER NOT NULL, max_access_count INTEGER NOT NULL," \

/* ctx_totals upkeep (v2), re-created when v5 rebuilds the mib table. */
#define MIB_TOTALS_TRIGGERS \
	"CREATE TRIGGER mib_totals_ins AFTER INSERT ON mib WHEN new.alloc_count > 0 BEGIN" \
	"  INSERT INTO ctx_totals SELECT new.context_id, c.binary_id, 1, new.alloc_count," \
	"    new.total_size, new.total_lifetime_ns, new.total_access_count" \
	"    FROM contexts c WHERE c.id = new.context_id" \
	"  ON CONFLICT(context_id) DO UPDATE SET rows = rows + 1," \
	"    alloc_count = alloc_count + excluded.alloc_count," \
	"    total_size = total_size + excluded.total_size," \
	"    total_lifetime_ns = total_lifetime_ns + excluded.total_lifetime_ns," \
	"    total_access_count = total_access_count + excluded.total_access_count;" \
	"END;" \
	"CREATE TRIGGER mib_totals_del AFTER DELETE ON mib WHEN old.alloc_count > 0 BEGIN" \
	"  UPDATE ctx_totals SET rows = rows - 1, alloc_count = alloc_count - old.alloc_count," \
	"    total_size = total_size - old.total_size," \
	"    total_lifetime_ns = total_lifetime_ns - old.total_lifetime_ns," \
	"    total_access_count = total_access_count - old.total_access_count" \
	"    WHERE context_id = old.context_id;" \
	"END;" \
	"CREATE TRIGGER mib_totals_upd AFTER UPDATE ON mib BEGIN" \
	"  UPDATE ctx_totals SET rows = rows - 1, alloc_count = alloc_count - old.alloc_count," \
	"    total_size = total_size - old.total_size," \
	"    total_lifetime_ns = total_lifetime_ns - old.total_lifetime_ns," \
	"    total_access_count = total_access_count - old.total_access_count" \
	"    WHERE context_id = old.context_id AND old.alloc_count > 0;" \
	"  INSERT INTO ctx_totals SELECT new.context_id, c.binary_id, 1, new.alloc_count," \
	"    new.total_size, new.total_lifetime_ns, new.total_access_count" \
	"    FROM contexts c WHERE c.id = new.context_id AND new.alloc_count > 0" \
	"  ON CONFLICT(context_id) DO UPDATE SET rows = rows + 1," \
	"    alloc_count = alloc_count + excluded.alloc_count," \
	"    total_size = total_size + excluded.total_size," \
	"    total_lifetime_ns = total_lifetime_ns + excluded.total_lifetime_ns," \
	"    total_access_count = total_access_count + excluded.total_access_count;" \
	"END;" \

#define V5_COL(f, agg) ", " #f
#define V5_SRC(f, agg) ", m." #f

static const char *const migrations[] = {
	/* 0 -> 1: initial schema. */
	"CREATE TABLE runs ("
	"  id INTEGER PRIMARY KEY,"
	"  command TEXT NOT NULL,"
	"  alloc_mode TEXT, access_mode TEXT,"
	"  settings TEXT,"                       /* JSON object text */
	"  started_ns INTEGER NOT NULL,"         /* CLOCK_REALTIME */
	"  ended_ns INTEGER NOT NULL DEFAULT 0," /* 0 while running */
	"  events INTEGER NOT NULL DEFAULT 0,"
	"  drops_ringbuf INTEGER NOT NULL DEFAULT 0,"
	"  drops_live_full INTEGER NOT NULL DEFAULT 0,"
	"  drops_state_full INTEGER NOT NULL DEFAULT 0,"
	"  drops_stack INTEGER NOT NULL DEFAULT 0,"
	"  unmatched_frees INTEGER NOT NULL DEFAULT 0,"
	"  overwritten INTEGER NOT NULL DEFAULT 0,"
	"  unresolved_frames INTEGER NOT NULL DEFAULT 0,"
	"  status TEXT NOT NULL DEFAULT 'running');"
	/* One row per build-id; binaries without one (build_id '') are told apart by path. */
	"CREATE TABLE binaries ("
	"  id INTEGER PRIMARY KEY,"
	"  build_id TEXT NOT NULL,"              /* lowercase hex, '' if none */
	"  path TEXT NOT NULL);"                 /* first path seen, '' if unknown */
	"CREATE UNIQUE INDEX binaries_build_id ON binaries(build_id) WHERE build_id <> '';"
	"CREATE UNIQUE INDEX binaries_no_build_id ON binaries(path) WHERE build_id = '';"
	"CREATE INDEX binaries_path ON binaries(path);"
	/* (pid, start_ns) is a process instance: PID reuse never merges two processes. */
	"CREATE TABLE processes ("
	"  id INTEGER PRIMARY KEY,"
	"  pid INTEGER NOT NULL,"
	"  start_ns INTEGER NOT NULL,"
	"  ppid INTEGER NOT NULL DEFAULT 0,"
	"  exe TEXT,"
	"  binary_id INTEGER NOT NULL REFERENCES binaries(id),"
	"  comm TEXT,"
	"  run_id INTEGER REFERENCES runs(id),"
	"  exit_ns INTEGER,"                     /* CLOCK_REALTIME, NULL while running */
	"  UNIQUE (pid, start_ns));"
	"CREATE INDEX processes_binary ON processes(binary_id);"
	"CREATE INDEX processes_run ON processes(run_id);"
	"CREATE TABLE frames ("
	"  id INTEGER PRIMARY KEY,"
	"  binary_id INTEGER NOT NULL REFERENCES binaries(id),"
	"  offset INTEGER NOT NULL,"             /* file offset; absolute address if no build-id */
	"  function TEXT,"                       /* demangled, NULL if unknown */
	"  mangled TEXT,"
	"  UNIQUE (binary_id, offset));"
	/* frames: little-endian int64 frame ids, leaf first; hash is the caller's. */
	"CREATE TABLE stacks ("
	"  id INTEGER PRIMARY KEY,"
	"  hash INTEGER NOT NULL UNIQUE,"
	"  nframes INTEGER NOT NULL,"
	"  frames BLOB NOT NULL);"
	/* An allocation context: a stack in the processes of one executable. */
	"CREATE TABLE contexts ("
	"  id INTEGER PRIMARY KEY,"
	"  stack_id INTEGER NOT NULL REFERENCES stacks(id),"
	"  binary_id INTEGER NOT NULL REFERENCES binaries(id),"
	"  UNIQUE (stack_id, binary_id));"
	"CREATE INDEX contexts_binary ON contexts(binary_id);"
	/* Clustered by context so that GROUP BY context_id is one ordered scan. */
	"CREATE TABLE mib ("
	"  context_id INTEGER NOT NULL REFERENCES contexts(id),"
	"  process_id INTEGER NOT NULL REFERENCES processes(id),"
	"  bucket_start INTEGER NOT NULL,"       /* CLOCK_REALTIME ns */
	MIB_VALUE_COLUMNS
	"  PRIMARY KEY (context_id, process_id, bucket_start)) WITHOUT ROWID;"
	"CREATE INDEX mib_process ON mib(process_id);"
	"CREATE INDEX mib_bucket ON mib(bucket_start);",
	/* 1 -> 2: per-context totals of the SUM columns (the sort keys), kept by triggers in
	 * the writer's own transaction, so "top N contexts" reads N index entries instead of
	 * grouping every MIB row. rows counts the MIB rows with allocations (0: none left). */
	"CREATE TABLE ctx_totals ("
	"  context_id INTEGER PRIMARY KEY REFERENCES contexts(id),"
	"  binary_id INTEGER NOT NULL REFERENCES binaries(id),"
	"  rows INTEGER NOT NULL, alloc_count INTEGER NOT NULL, total_size INTEGER NOT NULL,"
	"  total_lifetime_ns INTEGER NOT NULL, total_access_count INTEGER NOT NULL);"
	"INSERT INTO ctx_totals SELECT m.context_id, c.binary_id, count(*), sum(m.alloc_count),"
	"  sum(m.total_size), sum(m.total_lifetime_ns), sum(m.total_access_count)"
	"  FROM mib m JOIN contexts c ON c.id = m.context_id WHERE m.alloc_count > 0"
	"  GROUP BY m.context_id;"
	"CREATE INDEX ctx_totals_size ON ctx_totals(total_size DESC, context_id);"
	"CREATE INDEX ctx_totals_count ON ctx_totals(alloc_count DESC, context_id);"
	"CREATE INDEX ctx_totals_lifetime ON ctx_totals(total_lifetime_ns DESC, context_id);"
	"CREATE INDEX ctx_totals_accesses ON ctx_totals(total_access_count DESC, context_id);"
	"CREATE INDEX ctx_totals_density ON ctx_totals(" STORE__TOTALS_DENSITY " DESC, context_id);"
	"CREATE INDEX ctx_totals_binary ON ctx_totals(binary_id, total_size DESC, context_id);"
	MIB_TOTALS_TRIGGERS,
	/* 2 -> 3: source lines of each frame, its inline chain leaf first (depth 0 is the
	 * innermost inlined function; the last depth is the function the address is in). */
	"CREATE TABLE frame_lines ("
	"  frame_id INTEGER NOT NULL REFERENCES frames(id),"
	"  depth INTEGER NOT NULL,"
	"  function TEXT, mangled TEXT, file TEXT,"
	"  line INTEGER NOT NULL DEFAULT 0, col INTEGER NOT NULL DEFAULT 0,"
	"  decl_line INTEGER NOT NULL DEFAULT 0,"
	"  inlined INTEGER NOT NULL DEFAULT 0,"   /* inlined into the next depth */
	"  PRIMARY KEY (frame_id, depth)) WITHOUT ROWID;",
	/* 3 -> 4: data-access sampling. The recorder rewrites its running totals at every
	 * flush (absolute values per run), so each table is keyed by run. A static data
	 * symbol is (binary, symbol, link-time address): two symbols of one name (static
	 * functions' locals in different files) stay apart. */
	"ALTER TABLE runs ADD COLUMN access_source TEXT;"     /* pebs|ibs|spe|soft, NULL if none */
	"ALTER TABLE runs ADD COLUMN access_reasons TEXT;"    /* newline-separated, NULL if none */
	"CREATE TABLE data_access ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  binary_id INTEGER NOT NULL REFERENCES binaries(id),"
	"  symbol TEXT NOT NULL,"                /* '' when no symbol covers the address */
	"  address INTEGER NOT NULL,"            /* link-time vaddr */
	"  section TEXT,"
	"  size INTEGER NOT NULL,"
	"  access_samples INTEGER NOT NULL, est_accesses INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, binary_id, symbol, address)) WITHOUT ROWID;"
	"CREATE INDEX data_access_binary ON data_access(binary_id, symbol, address);"
	/* Samples of a run by attrib class (heap, heap_untracked, static, stack, tls, anon,
	 * file, unknown: daemon/attrib/attrib.h's attrib_class_name()). */
	"CREATE TABLE access_classes ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  class TEXT NOT NULL,"
	"  samples INTEGER NOT NULL, est_accesses INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, class)) WITHOUT ROWID;",
	/* 4 -> 5: the run is part of a MIB row's key. A recorder writes each row's running
	 * value; without the run, a second recording of the same process (record --pid
	 * twice, a daemon restart) in the same bucket overwrote the first one's row. */
	"CREATE TABLE mib_v5 ("
	"  context_id INTEGER NOT NULL REFERENCES contexts(id),"
	"  process_id INTEGER NOT NULL REFERENCES processes(id),"
	"  run_id INTEGER NOT NULL DEFAULT 0,"   /* 0: rows of older schemas, or merged */
	"  bucket_start INTEGER NOT NULL,"
	MIB_VALUE_COLUMNS
	"  PRIMARY KEY (context_id, process_id, run_id, bucket_start)) WITHOUT ROWID;"
	"INSERT INTO mib_v5(context_id, process_id, run_id, bucket_start" STORE__MIB_FIELDS(V5_COL) ")"
	"  SELECT m.context_id, m.process_id, coalesce(p.run_id, 0), m.bucket_start"
	STORE__MIB_FIELDS(V5_SRC) " FROM mib m JOIN processes p ON p.id = m.process_id;"
	"DROP TABLE mib;"
	"ALTER TABLE mib_v5 RENAME TO mib;"
	"CREATE INDEX mib_process ON mib(process_id);"
	"CREATE INDEX mib_bucket ON mib(bucket_start);"
	MIB_TOTALS_TRIGGERS,
	/* 5 -> 6: the MemProf v4 AccessHistogram of each MIB row: little-endian uint64 counts
	 * per ATTRIB_GRANULE bytes (store/mib.h struct mib_hist), NULL when the row has none
	 * (no access source, objects too large, rows of older schemas). */
	"ALTER TABLE mib ADD COLUMN access_hist BLOB;",
	/* 6 -> 7: the overhead governor of a daemon run, rewritten at each of its ticks
	 * (store/governor.c), for `memprofd query status`. governor_sources: what it scales;
	 * rate is NULL for a source whose rate the run cannot change. */
	"CREATE TABLE governor ("
	"  run_id INTEGER PRIMARY KEY REFERENCES runs(id),"
	"  at_ns INTEGER NOT NULL,"              /* CLOCK_REALTIME of the last tick */
	"  budget REAL NOT NULL,"                /* CPU allowed, fraction of one CPU */
	"  cpu REAL NOT NULL,"                   /* CPU used in the last tick, same unit */
	"  min_scale REAL NOT NULL,"
	"  ticks INTEGER NOT NULL, lowered INTEGER NOT NULL, raised INTEGER NOT NULL,"
	"  action TEXT NOT NULL,"                /* hold|lower|raise|at_floor (last tick) */
	"  changed_ns INTEGER NOT NULL DEFAULT 0," /* last rate change, 0: none yet */
	"  decision TEXT NOT NULL,"              /* the last tick's decision in words */
	"  history TEXT,"                        /* recent rate changes, newest first, one a line */
	"  rss_bytes INTEGER NOT NULL DEFAULT 0, cache_bytes INTEGER NOT NULL DEFAULT 0,"
	"  procs_held INTEGER NOT NULL DEFAULT 0, aggs_held INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE governor_sources ("
	"  run_id INTEGER NOT NULL REFERENCES runs(id),"
	"  source TEXT NOT NULL,"
	"  scale REAL NOT NULL,"                 /* multiplier of the configured rate */
	"  rate REAL, unit TEXT,"                /* the rate in force now */
	"  events INTEGER NOT NULL,"             /* in the last tick */
	"  PRIMARY KEY (run_id, source)) WITHOUT ROWID;",
	/* 7 -> 8: the daemon's targets at its governor's last tick (store/governor.c): how
	 * many it traces, and the selected processes it cannot profile because they lack
	 * libmemprofd_sampler (alloc = sampled), for `memprofd query status`. */
	"CREATE TABLE daemon_targets ("
	"  run_id INTEGER PRIMARY KEY REFERENCES runs(id),"
	"  traced INTEGER NOT NULL,"             /* processes in the BPF targets map */
	"  unsampled INTEGER NOT NULL,"          /* selected, without the sampler */
	"  skipped INTEGER NOT NULL,"            /* selected, over max_processes (cumulative) */
	"  unsampled_list TEXT);",               /* 'PID EXE' a line, newest first, a few */
	/* issue 21: 8 -> 9: each MIB row's evidence and leaks (store/mib.h): the objects
	 * observed behind alloc_count, and those still allocated when their process ended,
	 * with their bytes and lifetimes (so freed objects' lifetimes can be told apart).
	 * 0 in older rows: unknown. */
	"ALTER TABLE mib ADD COLUMN alloc_samples INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE mib ADD COLUMN live_at_exit_count INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE mib ADD COLUMN live_at_exit_bytes INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE mib ADD COLUMN live_at_exit_lifetime_ns INTEGER NOT NULL DEFAULT 0;",
	/* issue 16: 9 -> 10: a stack whose unwinding stopped before its outermost frame
	 * (no CFI, a read outside the copied stack, an address outside the executable
	 * mappings) is marked, never completed by a guess. */
	"ALTER TABLE stacks ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0;",
	/* issue 18: 10 -> 11: what a run missed (counted per run: execs not marked in the
	 * kernel, processes whose probes came after they started, allocation records of
	 * processes never named), its last flush, and its writer (pid and start time in
	 * clock ticks since boot), so that the next writer marks a run whose writer died
	 * `crashed` (store/run_end.c). */
	"ALTER TABLE runs ADD COLUMN flushed_ns INTEGER NOT NULL DEFAULT 0;"  /* CLOCK_REALTIME */
	"ALTER TABLE runs ADD COLUMN missed_exec INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE runs ADD COLUMN missed_late INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE runs ADD COLUMN missed_unknown INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE runs ADD COLUMN writer_pid INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE runs ADD COLUMN writer_start INTEGER NOT NULL DEFAULT 0;",
	/* issue 17: 11 -> 12: per-object access density extremes (store/mib.h), NULL when
	 * not every object of the row had its own (older rows: only bounds are known). */
	"ALTER TABLE mib ADD COLUMN min_access_density REAL;"
	"ALTER TABLE mib ADD COLUMN max_access_density REAL;"
	"ALTER TABLE mib ADD COLUMN min_lifetime_access_density REAL;"
	"ALTER TABLE mib ADD COLUMN max_lifetime_access_density REAL;",
	/* issue 15: 12 -> 13: each MIB row's watch evidence (store/mib.h): hardware-watch
	 * traps and watched granule-nanoseconds, so a context whose watches saw nothing for
	 * long enough is decided. 0 in older rows: none. */
	"ALTER TABLE mib ADD COLUMN watch_hits INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE mib ADD COLUMN watch_ns INTEGER NOT NULL DEFAULT 0;",
	/* issue 22: 13 -> 14: what a daemon run dropped over its memory_limit while the
	 * store was unwritable (store/mem_drops.c), running totals per run. */
	"CREATE TABLE mem_drops ("
	"  run_id INTEGER PRIMARY KEY REFERENCES runs(id),"
	"  aggregates INTEGER NOT NULL, objects INTEGER NOT NULL,"
	"  limit_bytes INTEGER NOT NULL);",
	/* issue 17: 14 -> 15: the stall factor's share of a MIB row's access estimate error
	 * (store/mib.h access_est_err), 0 in older rows: none known. */
	"ALTER TABLE mib ADD COLUMN access_est_err INTEGER NOT NULL DEFAULT 0;",
};

_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION,
	       "one migration step per schema version");

static int read_version(sqlite3 *db, int *version)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

static int fail(sqlite3 *db, int rc, char *err, size_t errsz, const char *what)
{
	snprintf(err, errsz, "%s: %s", what, sqlite3_errmsg(db));
	return store__errno(rc);
}

/* All pending migrations in one transaction: a new database is created by one commit
 * (one WAL append, no per-version round trips), and a failure leaves the version the
 * store had. Another writer may have migrated while we waited for the lock. */
static int migrate(sqlite3 *db, int from, char *err, size_t errsz)
{
	char what[64], bump[48];
	int cur = from, rc;

	if (from >= STORE_SCHEMA_VERSION)
		return 0;
	snprintf(what, sizeof(what), "migrating to schema version %d", STORE_SCHEMA_VERSION);
	rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return fail(db, rc, err, errsz, what);
	rc = read_version(db, &cur);
	if (rc == SQLITE_OK && cur > STORE_SCHEMA_VERSION) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		snprintf(err, errsz, "database schema version %d is newer than this memprofd "
			 "supports (%d)", cur, STORE_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	for (int v = cur < 0 ? 0 : cur; rc == SQLITE_OK && v < STORE_SCHEMA_VERSION; v++) {
		snprintf(what, sizeof(what), "migrating to schema version %d", v + 1);
		rc = sqlite3_exec(db, migrations[v], NULL, NULL, NULL);
	}
	snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, bump, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int r = fail(db, rc, err, errsz, what);

		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	return 0;
}

static int pragma(sqlite3 *db, const char *sql, char *err, size_t errsz)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : fail(db, rc, err, errsz, sql);
}

static int enable_wal(sqlite3 *db, char *err, size_t errsz)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);
		bool ok = mode && (!strcmp(mode, "wal") || !strcmp(mode, "memory"));

		if (!ok)
			snprintf(err, errsz, "cannot enable the WAL journal (journal_mode is %s)",
				 mode ? mode : "unknown");
		sqlite3_finalize(st);
		return ok ? 0 : -ENOTSUP;
	}
	int r = fail(db, rc, err, errsz, "PRAGMA journal_mode = WAL");

	sqlite3_finalize(st);
	return r;
}

int store__schema_open(sqlite3 *db, bool rdwr, char *err, size_t errsz)
{
	int version = 0, rc, r;

	/* The first read of page 1: a file that is not SQLite fails here, before any write. */
	rc = read_version(db, &version);
	if ((rc & 0xff) == SQLITE_NOTADB) {
		snprintf(err, errsz, "%s", sqlite3_errmsg(db));   /* "file is not a database" */
		return store__errno(rc);
	}
	if (rc != SQLITE_OK)
		return fail(db, rc, err, errsz, "reading the schema version");
	if (version > STORE_SCHEMA_VERSION) {
		snprintf(err, errsz, "database schema version %d is newer than this memprofd "
			 "supports (%d)", version, STORE_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (version < 0) {
		snprintf(err, errsz, "invalid database schema version %d", version);
		return -EINVAL;
	}
	if (!rdwr) {
		if (version == 0) {
			snprintf(err, errsz, "not a memprofd database (no schema; nothing was "
				 "recorded into it)");
			return -ENOMSG;
		}
		/* An older schema is read as it is: readers check store_schema_version()
		 * before using what later migrations added (a reader never migrates). */
		return 0;
	}
	/* NORMAL first: switching a new file to WAL then syncs the journal once, not twice. */
	r = pragma(db, "PRAGMA synchronous = NORMAL", err, errsz);
	if (r < 0)
		return r;
	r = enable_wal(db, err, errsz);
	if (r < 0)
		return r;
	r = pragma(db, "PRAGMA foreign_keys = ON", err, errsz);
	if (r < 0)
		return r;
	return migrate(db, version, err, errsz);
}

const char *store__migration_sql(int from)
{
	return from >= 0 && from < STORE_SCHEMA_VERSION ? migrations[from] : NULL;
}
