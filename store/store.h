/* The SQLite store: schema, migrations, batched writer and read-only query API.
 * Invariants: WAL journal; every write happens inside store_begin()/store_commit(),
 * one transaction per daemon flush, so a kill -9 at any moment leaves the last
 * committed flush intact; readers open with STORE_RDONLY and never block the writer.
 * All functions return 0 or a negative errno; store_errmsg() says why in one line. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "store/mib.h"

#define STORE_SCHEMA_VERSION 17

enum store_flags {
	STORE_RDONLY = 0,
	STORE_RDWR = 1,      /* create the file if missing, migrate to the current schema */
};

struct store;

/* Opens (and for STORE_RDWR creates/migrates) the DB at path. On failure *out is NULL
 * and err (if non-NULL) holds a one-line reason, e.g. "file is not a database". */
int store_open(struct store **out, const char *path, unsigned flags, char *err, size_t errsz);
void store_close(struct store *s);
/* For _cleanup_(store_closep) (base/cleanup.h). */
static inline void store_closep(struct store **s) { store_close(*s); }
const char *store_errmsg(const struct store *s);
int store_schema_version(struct store *s);     /* PRAGMA user_version of the open DB */
/* Bounds the connection's page cache (SQLite's default is 2 MiB); it fills as pages are
 * read or written and then stays at the bound. store_cache_used(): bytes it holds now. */
int store_set_cache(struct store *s, uint64_t bytes);
uint64_t store_cache_used(struct store *s);
/* How long a statement waits on another connection's lock before failing with SQLITE_BUSY
 * (STORE_BUSY_TIMEOUT_MS after store_open). The daemon shortens it: a failed flush is
 * retried at the next interval anyway, and SIGTERM has a deadline to keep. */
void store_set_busy_timeout(struct store *s, int ms);

/* Writer: one transaction per flush. store_rollback() also drops the id caches
 * filled since store_begin(), so a failed flush can be retried from scratch. */
int store_begin(struct store *s);
int store_commit(struct store *s);
int store_rollback(struct store *s);

/* A recording session (memprofd record / daemon start). */
struct store_run {
	const char *command;     /* argv joined, or "pid N", or "daemon" */
	const char *alloc_mode;  /* exact|sampled|off */
	const char *access_mode; /* auto|pebs|ibs|spe|soft|off */
	const char *settings;    /* JSON object text with the rest of the settings */
	int64_t started_ns;      /* CLOCK_REALTIME */
};
int store_run_begin(struct store *s, const struct store_run *r, int64_t *run_id);

/* Run counters, overwritten at every flush (absolute values). */
struct store_run_stats {
	int64_t ended_ns;        /* 0 while running */
	uint64_t events;         /* ring buffer records consumed */
	uint64_t drops_ringbuf;  /* records the kernel could not reserve */
	uint64_t drops_live_full;/* allocations not tracked: live map full */
	uint64_t drops_state_full;/* calls not tracked: per-thread state map full */
	uint64_t drops_stack;    /* stacks that could not be captured */
	uint64_t unmatched_frees;/* frees of addresses never seen allocated */
	uint64_t overwritten;    /* allocations whose address was reused before a free was seen */
	uint64_t unresolved_frames;
	const char *status;      /* "running", "ok", "child exited 3", "crashed", ... */
	/* Schema >= 10 (0 before). What the run missed: */
	uint64_t missed_exec;    /* execs the kernel could not mark for the daemon's decision */
	uint64_t missed_late;    /* selected processes whose probes came after they started */
	uint64_t missed_unknown; /* allocation records of processes never named */
	int64_t flushed_ns;      /* CLOCK_REALTIME of the last flush (written by store_run_update) */
};
int store_run_update(struct store *s, int64_t run_id, const struct store_run_stats *st);
/* Runs end (store/run_end.c): every run still `running` whose writer process is gone is
 * marked `crashed`, ended at its last flush. Writers call it once at open, in their own
 * transaction. Returns the number of runs marked, or -errno. */
int store_end_crashed_runs(struct store *s);

/* A frame: (build-id, file offset) of a return address; function is the ELF symbol
 * (demangled for display), NULL when unknown. build_id "" means unresolvable: then
 * offset is the absolute address. */
/* One source position of a frame: the frame's address expands into its inline chain,
 * leaf first; `inlined` is set on entries inlined into the next one (their caller). */
struct store_line {
	const char *function;    /* demangled */
	const char *mangled;     /* linkage name, for MemProf GUIDs */
	const char *file;        /* NULL if unknown */
	uint32_t line, column;   /* 0 if unknown */
	uint32_t decl_line;      /* the function's declaration line (MemProf LineOffset base) */
	bool inlined;
};

#define STORE_MAX_LINES 32       /* inline depth kept per frame */

struct store_frame {
	const char *build_id;    /* lowercase hex */
	const char *path;        /* binary path as seen, may be NULL */
	uint64_t offset;
	const char *function;    /* may be NULL */
	const char *mangled;     /* may be NULL; kept for MemProf */
	const struct store_line *lines;  /* DWARF lines, leaf first; NULL/0 when unknown */
	unsigned nlines;
};

/* A process instance: (pid, start_ns) never collides across PID reuse. */
struct store_proc {
	int32_t pid;
	uint64_t start_ns;       /* task start time, CLOCK_REALTIME ns (epoch), as exit_ns */
	int32_t ppid;            /* 0 if unknown */
	const char *exe;         /* path, may be NULL */
	const char *build_id;    /* of exe, hex, may be "" */
	const char *comm;        /* may be NULL */
	int64_t run_id;
};

/* Writes the aggregate of one allocation context in one process and one time bucket,
 * replacing what an earlier flush wrote for the same key (the caller keeps the running
 * aggregate). stack_hash identifies the frame sequence (frames: leaf first, allocator
 * frames already removed); frames are only read the first time a hash is seen.
 * bucket_start is the CLOCK_REALTIME ns at which the time bucket starts. MIBs with
 * alloc_count == 0 are stored but, being empty for mib_combine(), never reported. */
/* The stack with this hash (stored by a put before) was cut before its outermost frame:
 * `query contexts` says "truncated": true. Idempotent. */
int store_mark_truncated(struct store *s, uint64_t stack_hash);
int store_put_mib(struct store *s, const struct store_proc *p, uint64_t stack_hash,
		  const struct store_frame *frames, unsigned nframes, int64_t bucket_start,
		  const struct mib *m);
/* The same, with the row's AccessHistogram (NULL or len 0: none), which replaces the one
 * an earlier flush wrote, like the rest of the row. */
int store_put_mib_hist(struct store *s, const struct store_proc *p, uint64_t stack_hash,
		       const struct store_frame *frames, unsigned nframes, int64_t bucket_start,
		       const struct mib *m, const struct mib_hist *h);

/* Names and DWARF lines of a frame some put stored bare (symbolized after its flush
 * committed): fills what the row lacks, never replaces what it has. Within a transaction. */
int store_put_frame_symbols(struct store *s, const struct store_frame *f);

/* Bare frames (no name, no lines, a build-id) with id > after, by id, at most max: fn
 * gets each (strings valid during the call; < 0 stops and is returned). The number
 * listed, or -errno (store/bare_frames.c). */
typedef int (*store_bare_fn)(void *arg, int64_t id, const char *build_id, const char *path,
			     uint64_t offset);
int store_bare_frames(struct store *s, int64_t after, unsigned max, store_bare_fn fn, void *arg);

/* Aggregates (and the objects in them) a daemon run dropped over its memory_limit while
 * the store was unwritable, and what its stop dropped to end within its budget: running
 * totals (store/mem_drops.c). */
struct store_mem_drops {
	uint64_t aggregates, objects;
	uint64_t limit_bytes;    /* the memory_limit they were dropped over */
	uint64_t peak_bytes;     /* the aggregates' largest size seen while unwritable (v15) */
	uint64_t stop_records;   /* ring records read at the stop but not handled (v15) */
	uint64_t stop_aggregates, stop_objects;   /* not written by the final flush (v15) */
	uint64_t stop_budget_ms; /* the stop's budget (v15; 0: no stop dropped anything) */
};
/* Replaces the run's record; within the flush's transaction. */
int store_put_mem_drops(struct store *s, int64_t run_id, const struct store_mem_drops *m);
/* The run's record: 1 and m filled, 0 (m zeroed) when it has none or the store predates
 * the table, or -errno. */
int store_get_mem_drops(struct store *s, int64_t run_id, struct store_mem_drops *m);

/* Marks a process as exited (exit time in CLOCK_REALTIME ns). */
int store_proc_exit(struct store *s, const struct store_proc *p, int64_t exit_ns);
/* Drops the writer's cached id of a process that will write no more, so a long-running
 * writer's cache stays as big as its live processes. Between transactions; 0 or -EBUSY. */
int store_forget_process(struct store *s, int32_t pid, uint64_t start_ns);

/* ---- read side ---- */

enum store_sort { STORE_SORT_BYTES, STORE_SORT_COUNT, STORE_SORT_LIFETIME,
		  STORE_SORT_DENSITY, STORE_SORT_ACCESSES,
		  STORE_SORT_LIVE /* bytes live at exit (schema >= 9; ranked by grouping rows) */ };

/* How store_query_contexts() finds the top contexts; the result is the same whichever.
 * AUTO picks; the others are for tests and bench/query_bench, and fall back to GROUP
 * where they do not apply (TOTALS with row filters; WALK for density or no limit). */
enum store_plan { STORE_PLAN_AUTO, STORE_PLAN_TOTALS, STORE_PLAN_WALK, STORE_PLAN_GROUP,
		  STORE_PLAN_GROUP_BY_TIME };

struct store_ctx_filter {
	const char *binary;      /* build-id hex or path; NULL for all */
	int32_t pid;             /* 0 for all */
	int64_t since_ns, until_ns; /* bucket_start range, 0 for open */
	enum store_sort sort;
	unsigned limit;          /* 0 = no limit; with accept, counts the contexts it accepts */
	/* Optional: only contexts for which accept() returns true, judged on their summed
	 * alloc_count, total_size, total_lifetime_ns and total_access_count (the other
	 * fields are 0) before anything else of them is read; `query --class` is this. */
	bool (*accept)(const struct mib *sums, void *arg);
	void *accept_arg;
	enum store_plan plan;    /* 0: automatic */
	bool hist;               /* also combine each context's AccessHistogram (schema >= 6) */
};

struct store_ctx_row {
	int64_t context_id;
	const char *build_id, *binary;  /* the process executable the context belongs to */
	struct store_frame *frames;     /* leaf first */
	unsigned nframes;
	bool truncated;                 /* the stack was cut before its outermost frame */
	struct mib mib;                 /* combined over buckets and processes */
	struct mib_hist hist;           /* with filter.hist: combined by mib_hist_merge(); else
	                                 * or when no row has one, len 0 */
};

/* Calls cb once per context, in the requested order; stops early if cb returns non-zero
 * (and returns that value). Row memory is valid only during the callback. */
typedef int (*store_ctx_cb)(const struct store_ctx_row *row, void *arg);
int store_query_contexts(struct store *s, const struct store_ctx_filter *f, store_ctx_cb cb,
			 void *arg);

/* ---- additions: limits, derived values, more readers ---- */

#define STORE_BUSY_TIMEOUT_MS 5000  /* how long a writer/reader waits on a lock */
#define STORE_MAX_FRAMES 4096       /* frames per stack; longer stacks are -E2BIG */

/* Lifetime access density, accesses per byte per second of average lifetime:
 * total_access_count / total_size / max(avg lifetime s, 0.001); 0 when nothing was
 * accessed. store_query_contexts() sorts by this same formula, evaluated in SQL. */
double store_lifetime_access_density(const struct mib *m);

struct store_binary_row {
	int64_t id;
	const char *build_id, *path;
	uint64_t processes;      /* processes whose executable it is */
	uint64_t contexts;       /* allocation contexts recorded for those processes */
	uint64_t alloc_count, total_size;
};
typedef int (*store_binary_cb)(const struct store_binary_row *row, void *arg);
/* Every binary that is some process's executable, by total_size descending. */
int store_query_binaries(struct store *s, store_binary_cb cb, void *arg);

struct store_proc_filter {
	const char *binary;      /* build-id hex or exe path; NULL for all */
	int32_t pid;             /* 0 for all */
	unsigned limit;          /* 0 = no limit */
};
struct store_proc_row {
	int64_t id;
	int32_t pid, ppid;
	uint64_t start_ns;
	const char *exe, *build_id, *comm;   /* may be NULL */
	int64_t run_id;          /* 0 if none */
	int64_t exit_ns;         /* 0 while running (or never seen exiting) */
	uint64_t contexts, alloc_count, total_size;
};
typedef int (*store_proc_cb)(const struct store_proc_row *row, void *arg);
/* Process instances, most recently recorded first. */
int store_query_processes(struct store *s, const struct store_proc_filter *f, store_proc_cb cb,
			  void *arg);

struct store_run_row {
	int64_t id;
	struct store_run run;    /* strings may be NULL */
	struct store_run_stats stats;
	const char *access_source;   /* store_run_access(); NULL if unset or schema < 4 */
	const char *access_reasons;  /* newline-separated; NULL if none */
};
typedef int (*store_run_cb)(const struct store_run_row *row, void *arg);
/* Recording sessions, most recent first. */
int store_query_runs(struct store *s, store_run_cb cb, void *arg);

/* One context's allocations in one time bucket (summed over processes), for timelines. */
struct store_bucket_row {
	int64_t bucket_start;    /* CLOCK_REALTIME ns */
	int64_t context_id;
	uint64_t alloc_count, total_size, total_access_count;
	uint64_t total_lifetime_ns;  /* of the objects that ended (freed, or their process
				      * exited) in the bucket: what a bucket is keyed by */
};
typedef int (*store_bucket_cb)(const struct store_bucket_row *row, void *arg);
/* Every (bucket, context) with allocations, by bucket_start then context_id; f's binary,
 * pid and since/until apply, sort and limit do not. */
int store_query_buckets(struct store *s, const struct store_ctx_filter *f, store_bucket_cb cb,
			void *arg);

/* ---- internal to store/ (store.c, schema.c, query.c); not for other modules ---- */

struct sqlite3;
struct sqlite3_stmt;
/* Records "what: <sqlite3_errmsg>" as the store's error and returns the -errno for rc.
 * Notices when SQLite rolled the open transaction back by itself and drops the caches. */
int store__fail(struct store *s, int rc, const char *what);
/* Sets the store's error message (printf-style) and returns err. */
int store__error(struct store *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prepared statement for sql (a string literal: cached by its address for the life of
 * the store), reset and with bindings cleared; NULL on failure (store's error set). */
struct sqlite3_stmt *store__stmt(struct store *s, const char *sql);
/* Maps a SQLite result code to a negative errno. */
int store__errno(int rc);
/* 1 if the store has table (column NULL) or table.column, 0 if not, or -errno
 * (store/has.c). */
int store__has(struct store *s, const char *table, const char *column);
/* This process's start time in clock ticks since boot (/proc/self/stat), 0 if unread:
 * with the pid, a run's writer identity (store/run_end.c). */
uint64_t store__self_start_ticks(void);
/* Every connection store_open() makes has the SQL aggregate mib_hist_merge(blob): the
 * access_hist blobs of a group combined by mib_hist_merge() (NULL if none). */
/* Reads user_version (this is what detects "file is not a database"), sets the
 * pragmas, and for a writer applies the migrations up to STORE_SCHEMA_VERSION. */
int store__schema_open(struct sqlite3 *db, bool rdwr, char *err, size_t errsz);
/* The SQL of the migration step from version `from` to from + 1 (NULL out of range):
 * for tests that build an older database by hand. */
const char *store__migration_sql(int from);
/* store_lifetime_access_density() over ctx_totals' columns (schema >= 2): the
 * expression of the ctx_totals_density index, used verbatim in ORDER BY. */
#define STORE__TOTALS_DENSITY "(CASE WHEN total_access_count = 0 OR total_size = 0" \
	" THEN 0.0 ELSE CAST(total_access_count AS REAL) / total_size" \
	" / max(CAST(total_lifetime_ns AS REAL) / (alloc_count * 1e9), 0.001) END)"
/* The mib table's columns after (context_id, process_id, bucket_start), named as the
 * struct mib fields, with how store_query_contexts() combines them (mib_combine):
 * SUM, MIN, MAX, or LAST (taken from the row whose last object died last). */
#define STORE__MIB_FIELDS(X) \
	X(alloc_count, SUM) X(total_size, SUM) X(min_size, MIN) X(max_size, MAX) \
	X(total_lifetime_ns, SUM) X(min_lifetime_ns, MIN) X(max_lifetime_ns, MAX) \
	X(alloc_ts_ns, LAST) X(dealloc_ts_ns, LAST) X(alloc_cpu, LAST) X(dealloc_cpu, LAST) \
	X(num_migrated_cpu, SUM) X(num_lifetime_overlaps, SUM) \
	X(num_same_alloc_cpu, SUM) X(num_same_dealloc_cpu, SUM) \
	X(access_samples, SUM) X(total_access_count, SUM) \
	X(min_access_count, MIN) X(max_access_count, MAX)
/* The struct mib fields of schema >= 9 (issue 21: evidence and live at exit), all SUM;
 * apart so that readers of older stores keep selecting only what those have. */
#define STORE__MIB_V9_FIELDS(X) \
	X(alloc_samples, SUM) X(live_at_exit_count, SUM) X(live_at_exit_bytes, SUM) \
	X(live_at_exit_lifetime_ns, SUM)
/* The struct mib density extremes of schema >= 12 (issue 17), REAL and NULL when the
 * row's has_density is false; a group's MIN/MAX is NULL if any of its rows' is. */
#define STORE__MIB_V12_FIELDS(X) \
	X(min_access_density, MIN) X(max_access_density, MAX) \
	X(min_lifetime_access_density, MIN) X(max_lifetime_access_density, MAX)
/* The struct mib watch evidence of schema >= 13 (issue 15), SUM, 0 in older rows. */
#define STORE__MIB_V13_FIELDS(X) X(watch_hits, SUM) X(watch_ns, SUM)
/* The struct mib estimate error of schema >= 16 (issue 17), 0 in older rows; summed (an
 * upper bound) by mib_combine and SQL alike. */
#define STORE__MIB_V16_FIELDS(X) X(access_est_err, SUM)
/* The struct mib bytes accessed of schema >= 17 (issue 17), 0 in older rows: unknown. */
#define STORE__MIB_V17_FIELDS(X) X(total_access_bytes, SUM)

/* ---- data-access sampling (schema >= 4) ----
 * Per run, absolute values: the recorder keeps running totals and rewrites them at every
 * flush (inside store_begin()/store_commit(), like store_put_mib()), so a put replaces
 * what an earlier flush wrote for the same key. */

/* One static data symbol's accesses in one run. Key: (run, binary, symbol, address). */
struct store_data {
	const char *build_id;    /* lowercase hex, "" or NULL if none (then path names it) */
	const char *path;        /* binary path as seen, may be NULL */
	const char *symbol;      /* "" or NULL when no symbol covers the address */
	const char *section;     /* ".data", ".bss", ...; may be NULL */
	uint64_t address;        /* link-time vaddr of the symbol */
	uint64_t size;           /* symbol size in bytes */
	uint64_t access_samples; /* samples that hit it */
	uint64_t est_accesses;   /* accesses those samples stand for */
};
int store_put_data(struct store *s, int64_t run_id, const struct store_data *d);

/* Samples of one run in one attrib class ("heap", "heap_untracked", "static", "stack",
 * "tls", "anon", "file", "unknown": attrib_class_name()), absolute. */
int store_put_access_class(struct store *s, int64_t run_id, const char *cls,
			   uint64_t samples, uint64_t est);
/* The access source the run uses (pebs|ibs|spe|soft; NULL: none opened) and why the
 * others did not open, one reason per line (may be NULL). Overwrites. */
int store_run_access(struct store *s, int64_t run_id, const char *source,
		     const char *reasons);

enum store_data_sort { STORE_DATA_SORT_ACCESSES = 0, STORE_DATA_SORT_DENSITY,
		       STORE_DATA_SORT_SIZE };

struct store_data_filter {
	const char *binary;      /* build-id hex or path; NULL for all */
	int64_t since_ns, until_ns; /* on the run's started_ns, 0 for open */
	int64_t now_ns;          /* where runs still recording (ended_ns 0) end; 0: they
	                          * count as observed for 0 ns */
	enum store_data_sort sort; /* largest first; default access_samples */
	unsigned limit;          /* 0 = no limit */
};

/* A symbol combined over the runs that match the filter: counts summed, observed_ns
 * the summed duration (ended_ns - started_ns) of the runs that have a row for it. */
struct store_data_row {
	const char *build_id, *binary, *symbol, *section;  /* section may be NULL */
	uint64_t address, size;
	uint64_t access_samples, est_accesses;
	uint64_t runs;           /* runs with a row for it */
	uint64_t observed_ns;
};
typedef int (*store_data_cb)(const struct store_data_row *row, void *arg);
/* Symbols in the requested order (ties: build-id, path, symbol, address); stops early if
 * cb returns non-zero (and returns that value). An older schema has none (returns 0). */
int store_query_data(struct store *s, const struct store_data_filter *f, store_data_cb cb,
		     void *arg);
/* Estimated accesses per byte per second observed (the seed's unit): size 0 counts
 * as 1 byte and observed time at least 1 ms; store_query_data() sorts by it. */
double store_data_density(uint64_t est_accesses, uint64_t size, uint64_t observed_ns);

struct store_access_class_row {
	int64_t run_id;
	const char *cls;
	uint64_t samples, est_accesses;
};
typedef int (*store_access_class_cb)(const struct store_access_class_row *row, void *arg);
/* One run's classes (run_id > 0) or every run's (run_id 0), by run id descending then
 * class name. An older schema has none (returns 0). */
int store_query_access_classes(struct store *s, int64_t run_id, store_access_class_cb cb,
			       void *arg);

/* Static-data samples at addresses no symbol of their binary covers, per run and binary
 * (run_id 0: every run), most samples first; `query data` never lists them. */
struct store_unsym_row {
	int64_t run_id;
	const char *build_id, *binary;
	uint64_t samples, est_accesses;
};
typedef int (*store_unsym_cb)(const struct store_unsym_row *row, void *arg);
int store_query_unsymbolized(struct store *s, int64_t run_id, store_unsym_cb cb, void *arg);

/* ---- the overhead governor of a daemon run (store/governor.c) ----
 * One record per run, rewritten at every governor tick (absolute values), so `memprofd
 * query status` shows what the governor measured and did. */
#define STORE_GOV_MAX_SOURCES 8
struct store_gov_source {
	const char *name;        /* "alloc", "access" */
	double scale;            /* multiplier of the configured rate */
	double rate;             /* rate in force, in unit; < 0 when the run cannot change it */
	const char *unit;        /* "Hz", ...; NULL without a rate */
	uint64_t events;         /* events in the last tick */
};
/* The daemon's targets at the tick (schema v8 table daemon_targets; zero in an older
 * store): processes traced, selected ones without libmemprofd_sampler (sampled mode; not
 * profiled), selected ones skipped over max_processes. */
struct store_gov_targets {
	uint64_t traced, unsampled, skipped;
	const char *unsampled_list;  /* "PID EXE" a line, the newest few; NULL if none */
};
struct store_governor {
	int64_t at_ns;           /* CLOCK_REALTIME of the last tick */
	double budget;           /* CPU allowed, fraction of one CPU (0.01 = 1%) */
	double cpu;              /* CPU used in the last tick, same unit */
	double min_scale;
	uint64_t ticks, lowered, raised;
	const char *action;      /* "hold", "lower", "raise", "at_floor" */
	int64_t changed_ns;      /* CLOCK_REALTIME of the last rate change, 0: none */
	const char *decision;    /* the last tick's decision in words */
	const char *history;     /* recent rate changes, newest first, newline separated */
	uint64_t rss_bytes;      /* the daemon's resident memory at the tick */
	uint64_t cache_bytes;    /* its SQLite page cache */
	uint64_t procs_held;     /* processes it holds state for */
	uint64_t aggs_held;      /* aggregates held in memory */
	struct store_gov_source src[STORE_GOV_MAX_SOURCES];
	unsigned nsrc;
	struct store_gov_targets targets;
};
/* Replaces run_id's governor record (inside store_begin/store_commit). */
int store_put_governor(struct store *s, int64_t run_id, const struct store_governor *g);
typedef int (*store_governor_cb)(int64_t run_id, const struct store_governor *g, void *arg);
/* run_id's record (run_id 0: every run's, newest run first); strings are valid during
 * the callback. A store without the governor tables (an older schema) has none: 0. */
int store_query_governor(struct store *s, int64_t run_id, store_governor_cb cb, void *arg);

/* ---- retention, compaction, size bound, checkpoints (store/retention.c) ----
 * Writer-side maintenance the daemon runs between flushes, each step one IMMEDIATE
 * transaction: a crash leaves the store as before the step or after it. Deleting rows
 * drops the writer's id caches (store__forget_ids), so the next flush re-resolves them. */
struct store_maint_stats {
	uint64_t mib_deleted;        /* rows removed by retention or the size bound */
	uint64_t mib_compacted;      /* rows folded into coarser buckets */
	uint64_t mib_created;        /* coarse rows written by compaction */
	uint64_t procs_deleted, contexts_deleted, stacks_deleted, frames_deleted, binaries_deleted;
	uint64_t used_before, used_after;   /* bytes of used pages */
};
/* Deletes MIB rows with bucket_start < cutoff_ns, then what no longer has rows. */
int store_retention_delete(struct store *s, int64_t cutoff_ns, struct store_maint_stats *st);
/* Combines rows with bucket_start < cutoff_ns into width_ns-wide buckets (aligned to
 * multiples of width_ns), with mib_combine()'s semantics; idempotent. */
int store_compact(struct store *s, int64_t cutoff_ns, int64_t width_ns,
		  struct store_maint_stats *st);
/* While the used pages exceed max_bytes, deletes the oldest buckets until they fit in
 * STORE_SIZE_LOW_WATER of it; the newest bucket is never deleted. */
#define STORE_SIZE_LOW_WATER 0.9
int store_enforce_size(struct store *s, uint64_t max_bytes, struct store_maint_stats *st);
/* Bytes of used pages ((page_count - freelist_count) * page_size) and of the file. */
int store_used_bytes(struct store *s, uint64_t *used, uint64_t *file);
/* Removes rows nothing refers to any more: exited processes, contexts, stacks, frames
 * and binaries without MIB rows. */
int store_gc(struct store *s, struct store_maint_stats *st);
/* PRAGMA wal_checkpoint(TRUNCATE); -EBUSY if a reader kept it from completing. */
int store_checkpoint(struct store *s);
/* PRAGMA incremental_vacuum when the DB uses auto_vacuum = INCREMENTAL; else 0. */
int store_incremental_vacuum(struct store *s);
/* PRAGMA integrity_check: 0 when "ok", else -EUCLEAN with the first problem in msg. */
int store_integrity_check(struct store *s, char *msg, size_t msgsz);
/* Internal to store/: see store.c. */
int store__forget_ids(struct store *s);
struct sqlite3 *store__db(struct store *s);

/* ---- rows from elsewhere (the fleet's ClickHouse: fleet/fleet_read.c) ----
 * A store opened by store_open_rows() has no database: store_query_contexts(), _buckets(),
 * _binaries() and _data() hand its ops the same filter and callback, and the ops must
 * give the same rows in the same order as those readers do on a store holding the same
 * data (`memprofd merge` of the same stores); every other reader fails with an error.
 * store_close() calls ops->close(ctx). */
struct store_rows_ops {
	int (*contexts)(void *ctx, struct store *s, const struct store_ctx_filter *f,
			store_ctx_cb cb, void *arg);
	int (*buckets)(void *ctx, struct store *s, const struct store_ctx_filter *f,
		       store_bucket_cb cb, void *arg);
	int (*binaries)(void *ctx, struct store *s, store_binary_cb cb, void *arg);
	int (*data)(void *ctx, struct store *s, const struct store_data_filter *f,
		    store_data_cb cb, void *arg);
	/* store_query_runs() and store_query_access_classes() (the evidence rule's inputs,
	 * reporter/classify.c); NULL: those readers fail like the others. */
	int (*runs)(void *ctx, struct store *s, store_run_cb cb, void *arg);
	int (*access_classes)(void *ctx, struct store *s, int64_t run_id,
			      store_access_class_cb cb, void *arg);
	void (*close)(void *ctx);
};
int store_open_rows(struct store **out, const struct store_rows_ops *ops, void *ctx);
/* For the ops: sets the store's one-line error (store_errmsg()) and returns err. */
int store_rows_error(struct store *s, int err, const char *msg);

/* Internal to store/: the ops of a store_open_rows() store (NULL for a database). */
const struct store_rows_ops *store__rows(struct store *s, void **ctx);
