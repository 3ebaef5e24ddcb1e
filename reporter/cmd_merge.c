/* Merging databases: each input is ATTACHed read-only and copied into the output in
 * natural-key order (binaries, frames, stacks, contexts, runs, processes, mib), with
 * temp tables mapping input ids to output ids. A process whose (pid, start_ns) already
 * exists in the output came from another host (or an earlier input): it gets start_ns
 * + 1 (repeatedly), which keeps the two processes apart and is invisible at ns scale;
 * its run, copied with "merged_from" in its settings, names the input it came from.
 * An input may be of any schema version up to this one (never migrated: it is only read,
 * and may be a read-only file); what each table holds is taken from the columns and
 * tables the input has (struct src_schema), what it lacks is left empty or derived the
 * way the store's migrations derive it. A newer input is refused before anything is
 * written.
 * MIB rows are copied as they are (AccessHistograms included), never combined here. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>

#include "reporter/merge.h"
#include "store/store.h"
#include "base/log.h"

static const char merge_usage[] =
	"usage: memprofd merge -o OUT.db IN.db...\n"
	"\n"
	"Merges memprofd databases (e.g. one per host) into OUT.db: allocation contexts,\n"
	"stacks, frames and binaries are shared by build-id, offsets and stack hash, so\n"
	"counts add and min/max combine; processes and runs stay distinct per input.\n"
	"OUT.db is replaced atomically (it may be one of the inputs).\n"
	"  -o, --output FILE   the merged database (required)\n"
	"  -h, --help          show this help\n";

struct merger {
	sqlite3 *db;
	char *err;
	size_t errsz;
};

static int fail(struct merger *m, int rc, const char *what)
{
	snprintf(m->err, m->errsz, "%s: %s", what, m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc));
	switch (rc & 0xff) {
	case SQLITE_BUSY: case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_CANTOPEN: return -ENOENT;
	case SQLITE_CORRUPT: case SQLITE_NOTADB: return -EUCLEAN;
	case SQLITE_READONLY: case SQLITE_PERM: case SQLITE_AUTH: return -EACCES;
	default: return -EIO;
	}
}

static int exec(struct merger *m, const char *sql, const char *what)
{
	int rc = sqlite3_exec(m->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : fail(m, rc, what);
}

/* Set-based steps, in dependency order. Temp tables map src id -> dst id. */
static const char *const copy_sql[] = {
	"DROP TABLE IF EXISTS temp.map_bin; DROP TABLE IF EXISTS temp.map_frame;"
	"DROP TABLE IF EXISTS temp.map_stack; DROP TABLE IF EXISTS temp.map_ctx;"
	"DROP TABLE IF EXISTS temp.map_run; DROP TABLE IF EXISTS temp.map_proc;"
	"CREATE TEMP TABLE map_bin(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
	"CREATE TEMP TABLE map_frame(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
	"CREATE TEMP TABLE map_stack(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
	"CREATE TEMP TABLE map_ctx(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
	"CREATE TEMP TABLE map_run(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
	"CREATE TEMP TABLE map_proc(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);",
	/* binaries: by build-id, or by path for those without one. */
	"INSERT INTO main.binaries(build_id, path) SELECT s.build_id, s.path FROM src.binaries s"
	" WHERE NOT EXISTS (SELECT 1 FROM main.binaries d WHERE"
	"  (s.build_id <> '' AND d.build_id = s.build_id) OR"
	"  (s.build_id = '' AND d.build_id = '' AND d.path = s.path));"
	"INSERT INTO temp.map_bin SELECT s.id, d.id FROM src.binaries s JOIN main.binaries d ON"
	" (s.build_id <> '' AND d.build_id = s.build_id) OR"
	" (s.build_id = '' AND d.build_id = '' AND d.path = s.path);",
	/* frames: (binary, offset); a name known on either side is kept. */
	"INSERT INTO main.frames(binary_id, offset, function, mangled)"
	" SELECT mb.dst, f.offset, f.function, f.mangled FROM src.frames f"
	" JOIN temp.map_bin mb ON mb.src = f.binary_id WHERE true"
	" ON CONFLICT(binary_id, offset) DO UPDATE SET"
	" function = coalesce(function, excluded.function),"
	" mangled = coalesce(mangled, excluded.mangled);"
	"INSERT INTO temp.map_frame SELECT f.id, d.id FROM src.frames f"
	" JOIN temp.map_bin mb ON mb.src = f.binary_id"
	" JOIN main.frames d ON d.binary_id = mb.dst AND d.offset = f.offset;",
};

/* After stacks (done in C: their blobs hold frame ids). */
static const char *const copy_sql2[] = {
	"INSERT OR IGNORE INTO main.contexts(stack_id, binary_id)"
	" SELECT ms.dst, mb.dst FROM src.contexts c JOIN temp.map_stack ms ON ms.src = c.stack_id"
	" JOIN temp.map_bin mb ON mb.src = c.binary_id;"
	"INSERT INTO temp.map_ctx SELECT c.id, d.id FROM src.contexts c"
	" JOIN temp.map_stack ms ON ms.src = c.stack_id JOIN temp.map_bin mb ON mb.src = c.binary_id"
	" JOIN main.contexts d ON d.stack_id = ms.dst AND d.binary_id = mb.dst;",
};

/* What an input's schema holds, found by its tables and columns (not its version
 * number, so a renumbered migration needs nothing here). */
struct src_schema {
	bool frame_lines;       /* v3: DWARF lines of frames */
	bool access;            /* v4: runs.access_source/_reasons, data_access, access_classes */
	bool mib_run;           /* v5: mib.run_id (before: the run of the row's process) */
	bool mib_hist;          /* v6: mib.access_hist */
	bool mib_v9;            /* v9: mib.alloc_samples, live_at_exit_* (issue 21) */
	bool governor;          /* v7: governor, governor_sources */
	bool daemon_targets;    /* v8: daemon_targets */
	bool truncated;         /* issue 16: stacks.truncated */
	bool mib_density;       /* issue 17: mib.min_access_density and the other extremes */
	bool run_missed;        /* v11: runs.missed_exec/_late/_unknown, flushed_ns (issue 18) */
	bool mib_watch;         /* issue 15: mib.watch_hits, watch_ns */
	bool mib_est_err;       /* issue 17: mib.access_est_err */
	bool mib_bytes;         /* issue 17: mib.total_access_bytes (v17) */
	bool mem_drops;         /* issue 22: mem_drops */
	bool stop_drops;        /* issue 22: mem_drops.peak_bytes and the stop_* columns (v15) */
};

/* Whether the input has table (column NULL) or table.column. */
static int src_has(struct merger *m, const char *table, const char *column, bool *out)
{
	sqlite3_stmt *st;
	int rc = column ?
		sqlite3_prepare_v2(m->db, "SELECT 1 FROM pragma_table_info(?1, 'src') WHERE name = ?2",
				   -1, &st, NULL) :
		sqlite3_prepare_v2(m->db, "SELECT 1 FROM src.sqlite_master WHERE type = 'table'"
				   " AND name = ?1", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return fail(m, rc, "reading the input's schema");
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	if (column)
		sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	*out = rc == SQLITE_ROW;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(m, rc, "reading the input's schema");
}

static int src_schema_read(struct merger *m, struct src_schema *sch)
{
	int r = src_has(m, "frame_lines", NULL, &sch->frame_lines);

	if (!r)
		r = src_has(m, "runs", "access_source", &sch->access);
	if (!r)
		r = src_has(m, "mib", "run_id", &sch->mib_run);
	if (!r)
		r = src_has(m, "mib", "access_hist", &sch->mib_hist);
	if (!r)
		r = src_has(m, "mib", "alloc_samples", &sch->mib_v9);
	if (!r)
		r = src_has(m, "governor", NULL, &sch->governor);
	if (!r)
		r = src_has(m, "daemon_targets", NULL, &sch->daemon_targets);
	if (!r)
		r = src_has(m, "stacks", "truncated", &sch->truncated);
	if (!r)
		r = src_has(m, "mib", "min_access_density", &sch->mib_density);
	if (!r)
		r = src_has(m, "runs", "missed_exec", &sch->run_missed);
	if (!r)
		r = src_has(m, "mib", "watch_hits", &sch->mib_watch);
	if (!r)
		r = src_has(m, "mib", "access_est_err", &sch->mib_est_err);
	if (!r)
		r = src_has(m, "mib", "total_access_bytes", &sch->mib_bytes);
	if (!r)
		r = src_has(m, "mem_drops", NULL, &sch->mem_drops);
	if (!r)
		r = src_has(m, "mem_drops", "stop_budget_ms", &sch->stop_drops);
	return r;
}

/* Lines of the frames the output has none for (the same binary and offset has the same
 * lines on every host). */
static const char copy_lines_sql[] =
	"INSERT INTO main.frame_lines(frame_id, depth, function, mangled, file, line, col,"
	" decl_line, inlined) SELECT mf.dst, l.depth, l.function, l.mangled, l.file, l.line, l.col,"
	" l.decl_line, l.inlined FROM src.frame_lines l JOIN temp.map_frame mf ON mf.src = l.frame_id"
	" WHERE NOT EXISTS (SELECT 1 FROM main.frame_lines d WHERE d.frame_id = mf.dst)";

/* Runs: new ids after the output's, provenance in the settings; the first %s: the access
 * source and reasons, or NULLs for an input older than them; the second: the missed
 * counters and the last flush, or 0s. writer_pid/writer_start are not copied: a writer
 * is a process of the input's host, never one the output's next writer could check. */
static const char copy_runs_sql[] =
	"INSERT INTO temp.map_run SELECT s.id, s.id + (SELECT coalesce(max(id), 0) FROM main.runs)"
	" FROM src.runs s;"
	"INSERT INTO main.runs(id, command, alloc_mode, access_mode, settings, started_ns, ended_ns,"
	" events, drops_ringbuf, drops_live_full, drops_state_full, drops_stack, unmatched_frees,"
	" overwritten, unresolved_frames, status, access_source, access_reasons, missed_exec,"
	" missed_late, missed_unknown, flushed_ns)"
	" SELECT mr.dst, s.command, s.alloc_mode, s.access_mode,"
	" json_set(CASE WHEN json_valid(s.settings) THEN s.settings ELSE '{}' END,"
	"  '$.merged_from', ?1), s.started_ns, s.ended_ns, s.events, s.drops_ringbuf,"
	" s.drops_live_full, s.drops_state_full, s.drops_stack, s.unmatched_frees, s.overwritten,"
	" s.unresolved_frames, s.status, %s, %s FROM src.runs s JOIN temp.map_run mr ON mr.src = s.id;";

static int exec_bound(struct merger *m, const char *sql, const char *text, const char *what);

static int copy_runs(struct merger *m, const struct src_schema *sch, const char *in)
{
	char sql[sizeof(copy_runs_sql) + 160];

	snprintf(sql, sizeof(sql), copy_runs_sql,
		 sch->access ? "s.access_source, s.access_reasons" : "NULL, NULL",
		 sch->run_missed ? "s.missed_exec, s.missed_late, s.missed_unknown, s.flushed_ns" :
		 "0, 0, 0, 0");
	return exec_bound(m, sql, in, in);
}

#define COL(f, agg) ", " #f
#define SRC_COL(f, agg) ", m." #f
/* Rows never collide: every process is new in the output. First %s: the input's run of
 * the row (mib.run_id, or before schema 5 the run of the row's process, as the v5
 * migration derived it); second: its histogram (m.access_hist, NULL before schema 6). */
static const char copy_mib_sql[] =
	"INSERT INTO main.mib(context_id, process_id, run_id, bucket_start" STORE__MIB_FIELDS(COL)
	STORE__MIB_V9_FIELDS(COL) STORE__MIB_V12_FIELDS(COL) STORE__MIB_V13_FIELDS(COL)
	STORE__MIB_V16_FIELDS(COL) STORE__MIB_V17_FIELDS(COL) ", access_hist) SELECT mc.dst, mp.dst,"
	" coalesce((SELECT mr.dst FROM temp.map_run mr WHERE mr.src = %s), 0),"
	" m.bucket_start" STORE__MIB_FIELDS(SRC_COL) "%s%s%s%s%s, %s"
	" FROM src.mib m JOIN temp.map_ctx mc ON mc.src = m.context_id"
	" JOIN temp.map_proc mp ON mp.src = m.process_id";

static int copy_mibs(struct merger *m, const struct src_schema *sch, const char *in)
{
	char sql[sizeof(copy_mib_sql) + 768];

	snprintf(sql, sizeof(sql), copy_mib_sql, sch->mib_run ? "m.run_id" :
		 "(SELECT p.run_id FROM src.processes p WHERE p.id = m.process_id)",
		 sch->mib_v9 ? STORE__MIB_V9_FIELDS(SRC_COL) : ", 0, 0, 0, 0",
		 sch->mib_density ? STORE__MIB_V12_FIELDS(SRC_COL) : ", NULL, NULL, NULL, NULL",
		 sch->mib_watch ? STORE__MIB_V13_FIELDS(SRC_COL) : ", 0, 0",
		 sch->mib_est_err ? STORE__MIB_V16_FIELDS(SRC_COL) : ", 0",
		 sch->mib_bytes ? STORE__MIB_V17_FIELDS(SRC_COL) : ", 0",
		 sch->mib_hist ? "m.access_hist" : "NULL");
	return exec(m, sql, in);
}

/* Per-run tables: keyed by run, and every run is new in the output. */
static const char copy_access_sql[] =
	"INSERT INTO main.data_access(run_id, binary_id, symbol, address, section, size,"
	" access_samples, est_accesses) SELECT mr.dst, mb.dst, d.symbol, d.address, d.section,"
	" d.size, d.access_samples, d.est_accesses FROM src.data_access d"
	" JOIN temp.map_run mr ON mr.src = d.run_id JOIN temp.map_bin mb ON mb.src = d.binary_id;"
	"INSERT INTO main.access_classes(run_id, class, samples, est_accesses)"
	" SELECT mr.dst, c.class, c.samples, c.est_accesses FROM src.access_classes c"
	" JOIN temp.map_run mr ON mr.src = c.run_id;";
static const char copy_governor_sql[] =
	"INSERT INTO main.governor SELECT mr.dst, g.at_ns, g.budget, g.cpu, g.min_scale, g.ticks,"
	" g.lowered, g.raised, g.action, g.changed_ns, g.decision, g.history, g.rss_bytes,"
	" g.cache_bytes, g.procs_held, g.aggs_held FROM src.governor g"
	" JOIN temp.map_run mr ON mr.src = g.run_id;"
	"INSERT INTO main.governor_sources SELECT mr.dst, g.source, g.scale, g.rate, g.unit, g.events"
	" FROM src.governor_sources g JOIN temp.map_run mr ON mr.src = g.run_id;";
static const char copy_mem_drops_sql[] =
	"INSERT INTO main.mem_drops(run_id, aggregates, objects, limit_bytes)"
	" SELECT mr.dst, d.aggregates, d.objects, d.limit_bytes"
	" FROM src.mem_drops d JOIN temp.map_run mr ON mr.src = d.run_id;";
static const char copy_stop_drops_sql[] =
	"INSERT INTO main.mem_drops SELECT mr.dst, d.aggregates, d.objects, d.limit_bytes,"
	" d.peak_bytes, d.stop_records, d.stop_aggregates, d.stop_objects, d.stop_budget_ms"
	" FROM src.mem_drops d JOIN temp.map_run mr ON mr.src = d.run_id;";
static const char copy_targets_sql[] =
	"INSERT INTO main.daemon_targets SELECT mr.dst, t.traced, t.unsampled, t.skipped,"
	" t.unsampled_list FROM src.daemon_targets t JOIN temp.map_run mr ON mr.src = t.run_id;";

static int exec_bound(struct merger *m, const char *sql, const char *text, const char *what)
{
	sqlite3_stmt *st;
	const char *tail = sql;
	int rc = SQLITE_OK;

	while (tail && *tail) {
		rc = sqlite3_prepare_v2(m->db, tail, -1, &st, &tail);
		if (rc != SQLITE_OK)
			return fail(m, rc, what);
		if (!st)
			break;
		if (text && sqlite3_bind_parameter_count(st) >= 1)
			sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return fail(m, rc, what);
	}
	return 0;
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static void put_le64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* Stacks by hash; a new stack's blob is rewritten with the output's frame ids. */
static int copy_stacks(struct merger *m)
{
	sqlite3_stmt *sel = NULL, *get = NULL, *ins = NULL, *map = NULL, *fr = NULL;
	unsigned char *buf = NULL;
	size_t cap = 0;
	int rc, r = 0;

	if ((rc = sqlite3_prepare_v2(m->db, "SELECT id, hash, nframes, frames FROM src.stacks", -1, &sel, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "SELECT id FROM main.stacks WHERE hash = ?1", -1, &get, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "INSERT INTO main.stacks(hash, nframes, frames) VALUES (?1, ?2, ?3)", -1, &ins, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "INSERT INTO temp.map_stack VALUES (?1, ?2)", -1, &map, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "SELECT dst FROM temp.map_frame WHERE src = ?1", -1, &fr, NULL))) {
		r = fail(m, rc, "merging stacks");
		goto out;
	}
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
		int64_t sid = sqlite3_column_int64(sel, 0), hash = sqlite3_column_int64(sel, 1), dst;
		int nframes = sqlite3_column_int(sel, 2);
		int len = sqlite3_column_bytes(sel, 3);
		const unsigned char *blob = sqlite3_column_blob(sel, 3);

		sqlite3_reset(get);
		sqlite3_bind_int64(get, 1, hash);
		if ((rc = sqlite3_step(get)) == SQLITE_ROW) {
			dst = sqlite3_column_int64(get, 0);
		} else if (rc == SQLITE_DONE) {
			if ((size_t)len > cap) {
				unsigned char *nb = realloc(buf, len);

				if (!nb) {
					snprintf(m->err, m->errsz, "merging stacks: out of memory");
					r = -ENOMEM;
					goto out;
				}
				buf = nb;
				cap = len;
			}
			for (int i = 0; i + 8 <= len; i += 8) {
				sqlite3_reset(fr);
				sqlite3_bind_int64(fr, 1, (int64_t)get_le64(blob + i));
				if (sqlite3_step(fr) != SQLITE_ROW) {
					snprintf(m->err, m->errsz, "merging stacks: stack %lld names a frame "
						 "that does not exist", (long long)sid);
					r = -EUCLEAN;
					goto out;
				}
				put_le64(buf + i, (uint64_t)sqlite3_column_int64(fr, 0));
			}
			sqlite3_reset(ins);
			sqlite3_bind_int64(ins, 1, hash);
			sqlite3_bind_int(ins, 2, nframes);
			sqlite3_bind_blob(ins, 3, len ? (const void *)buf : "", len, SQLITE_TRANSIENT);
			if ((rc = sqlite3_step(ins)) != SQLITE_DONE) {
				r = fail(m, rc, "merging stacks");
				goto out;
			}
			dst = sqlite3_last_insert_rowid(m->db);
		} else {
			r = fail(m, rc, "merging stacks");
			goto out;
		}
		sqlite3_reset(map);
		sqlite3_bind_int64(map, 1, sid);
		sqlite3_bind_int64(map, 2, dst);
		if ((rc = sqlite3_step(map)) != SQLITE_DONE) {
			r = fail(m, rc, "merging stacks");
			goto out;
		}
	}
	if (rc != SQLITE_DONE)
		r = fail(m, rc, "merging stacks");
out:
	sqlite3_finalize(sel);
	sqlite3_finalize(get);
	sqlite3_finalize(ins);
	sqlite3_finalize(map);
	sqlite3_finalize(fr);
	free(buf);
	return r;
}

/* Processes: always new rows; (pid, start_ns) collisions are moved by whole ns. */
static int copy_processes(struct merger *m)
{
	sqlite3_stmt *sel = NULL, *taken = NULL, *ins = NULL;
	int rc, r = 0;

	if ((rc = sqlite3_prepare_v2(m->db, "SELECT p.id, p.pid, p.start_ns, p.ppid, p.exe, mb.dst, p.comm,"
				     " mr.dst, p.exit_ns FROM src.processes p JOIN temp.map_bin mb ON mb.src = p.binary_id"
				     " LEFT JOIN temp.map_run mr ON mr.src = p.run_id", -1, &sel, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "SELECT 1 FROM main.processes WHERE pid = ?1 AND start_ns = ?2",
				     -1, &taken, NULL)) ||
	    (rc = sqlite3_prepare_v2(m->db, "INSERT INTO main.processes(pid, start_ns, ppid, exe, binary_id,"
				     " comm, run_id, exit_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", -1, &ins, NULL))) {
		r = fail(m, rc, "merging processes");
		goto out;
	}
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
		int64_t start = sqlite3_column_int64(sel, 2);

		for (;;) {
			sqlite3_reset(taken);
			sqlite3_bind_int64(taken, 1, sqlite3_column_int64(sel, 1));
			sqlite3_bind_int64(taken, 2, start);
			rc = sqlite3_step(taken);
			if (rc == SQLITE_DONE)
				break;
			if (rc != SQLITE_ROW) {
				r = fail(m, rc, "merging processes");
				goto out;
			}
			start++;
		}
		sqlite3_reset(ins);
		sqlite3_bind_int64(ins, 1, sqlite3_column_int64(sel, 1));
		sqlite3_bind_int64(ins, 2, start);
		for (int c = 3; c <= 8; c++)
			sqlite3_bind_value(ins, c, sqlite3_column_value(sel, c));
		if ((rc = sqlite3_step(ins)) != SQLITE_DONE) {
			r = fail(m, rc, "merging processes");
			goto out;
		}
		char map[96];

		snprintf(map, sizeof(map), "INSERT INTO temp.map_proc VALUES (%lld, %lld)",
			 (long long)sqlite3_column_int64(sel, 0), (long long)sqlite3_last_insert_rowid(m->db));
		if ((r = exec(m, map, "merging processes")))
			goto out;
	}
	if (rc != SQLITE_DONE)
		r = fail(m, rc, "merging processes");
out:
	sqlite3_finalize(sel);
	sqlite3_finalize(taken);
	sqlite3_finalize(ins);
	return r;
}

static int merge_one(struct merger *m, const char *in)
{
	char uri[PATH_MAX + 32];
	struct src_schema sch = { 0 };
	sqlite3_stmt *st;
	int r, rc;

	/* Read-only attach: an input is never written (nor its WAL checkpointed). */
	snprintf(uri, sizeof(uri), "file:%s?mode=ro", in);
	rc = sqlite3_prepare_v2(m->db, "ATTACH DATABASE ?1 AS src", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_DONE)
		return fail(m, rc, in);
	r = exec(m, "BEGIN IMMEDIATE", in);
	if (!r)
		r = src_schema_read(m, &sch);
	for (size_t i = 0; !r && i < sizeof(copy_sql) / sizeof(copy_sql[0]); i++)
		r = exec_bound(m, copy_sql[i], NULL, in);
	if (!r && sch.frame_lines)
		r = exec(m, copy_lines_sql, in);
	if (!r)
		r = copy_stacks(m);
	if (!r && sch.truncated)   /* a stack cut on one host is cut wherever it is stored */
		r = exec(m, "UPDATE main.stacks SET truncated = 1 WHERE truncated = 0 AND hash IN"
			 " (SELECT hash FROM src.stacks WHERE truncated != 0)", in);
	for (size_t i = 0; !r && i < sizeof(copy_sql2) / sizeof(copy_sql2[0]); i++)
		r = exec_bound(m, copy_sql2[i], in, in);
	if (!r)
		r = copy_runs(m, &sch, in);
	if (!r)
		r = copy_processes(m);
	if (!r)
		r = copy_mibs(m, &sch, in);
	if (!r && sch.access)
		r = exec(m, copy_access_sql, in);
	if (!r && sch.governor)
		r = exec(m, copy_governor_sql, in);
	if (!r && sch.daemon_targets)
		r = exec(m, copy_targets_sql, in);
	if (!r && sch.mem_drops)
		r = exec(m, sch.stop_drops ? copy_stop_drops_sql : copy_mem_drops_sql, in);
	if (!r)
		r = exec(m, "COMMIT", in);
	else
		sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_exec(m->db, "DETACH DATABASE src", NULL, NULL, NULL);
	if (r) {
		size_t n = strlen(m->err);

		if (n + 1 < m->errsz && strncmp(m->err, in, strlen(in)))
			snprintf(m->err + n, m->errsz - n, " (merging %s)", in);
	}
	return r;
}

static int fsync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

static void unlink_tmp(const char *tmp)
{
	char p[PATH_MAX + 16];
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };

	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", tmp, sfx[i]);
		unlink(p);
	}
}

int merge_dbs(const char *out, const char *const *inputs, size_t n, char *err, size_t errsz)
{
	char tmp[PATH_MAX], why[512];
	struct store *s;
	int r;

	if (!n) {
		snprintf(err, errsz, "no input databases");
		return -EINVAL;
	}
	/* Validate every input first: readable, a memprofd database of this schema version
	 * or an older one (a newer one is refused; an older one is read as it is). */
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			if (!strcmp(inputs[i], inputs[j])) {
				snprintf(err, errsz, "%s: given twice (its counts would be doubled)", inputs[i]);
				return -EINVAL;
			}
		r = store_open(&s, inputs[i], STORE_RDONLY, why, sizeof(why));
		if (r) {
			snprintf(err, errsz, "%s", why);
			return r;
		}
		store_close(s);
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid()) >= (int)sizeof(tmp)) {
		snprintf(err, errsz, "%s: path too long", out);
		return -ENAMETOOLONG;
	}
	unlink_tmp(tmp);
	/* The store creates the schema at this version. */
	r = store_open(&s, tmp, STORE_RDWR, why, sizeof(why));
	if (r) {
		snprintf(err, errsz, "%s", why);
		return r;
	}
	store_close(s);

	struct merger m = { .err = err, .errsz = errsz };
	int rc = sqlite3_open_v2(tmp, &m.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL);

	if (rc != SQLITE_OK) {
		r = fail(&m, rc, tmp);
		goto fail;
	}
	sqlite3_busy_timeout(m.db, STORE_BUSY_TIMEOUT_MS);
	r = exec(&m, "PRAGMA foreign_keys = ON", tmp);
	for (size_t i = 0; !r && i < n; i++)
		r = merge_one(&m, inputs[i]);
	if (r)
		goto fail;
	/* One self-contained file: the WAL folded in, rollback journal mode, checked. */
	r = exec(&m, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE", tmp);
	if (!r) {
		sqlite3_stmt *st;

		rc = sqlite3_prepare_v2(m.db, "PRAGMA quick_check", -1, &st, NULL);
		if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
		    strcmp((const char *)sqlite3_column_text(st, 0), "ok")) {
			snprintf(err, errsz, "%s: merged database fails quick_check: %s", tmp,
				 (const char *)sqlite3_column_text(st, 0));
			r = -EUCLEAN;
		}
		sqlite3_finalize(st);
	}
	if (r)
		goto fail;
	sqlite3_close(m.db);
	m.db = NULL;
	r = fsync_path(tmp, false);
	if (!r && rename(tmp, out) < 0)
		r = -errno;
	if (r) {
		snprintf(err, errsz, "%s: %s", out, strerror(-r));
		goto fail;
	}
	/* The old OUT's WAL/shm, if it was a WAL database, no longer belong to it. */
	char side[PATH_MAX + 8];
	snprintf(side, sizeof(side), "%s-wal", out);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", out);
	unlink(side);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", out);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	fsync_path(slash ? dir : ".", true);
	return 0;
fail:
	if (m.db)
		sqlite3_close(m.db);
	unlink_tmp(tmp);
	return r;
}

int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' }, { "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL;
	char err[1024];
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'h': fputs(merge_usage, stdout); return 0;
		default: fputs(merge_usage, stderr); return 2;
		}
	}
	if (!out || optind >= argc) {
		log_error("merge: give -o OUT.db and at least one input database");
		return 2;
	}
	int r = merge_dbs(out, (const char *const *)argv + optind, argc - optind, err, sizeof(err));

	if (r) {
		log_error("merge: %s", err);
		return r == -EINVAL && strstr(err, "given twice") ? 2 : 1;
	}
	return 0;
}
