/* The store's connection, transactions and writer. Invariant: every id in the intern
 * caches names a row that is committed or belongs to the open transaction: entries
 * added inside a transaction are journaled and dropped when it rolls back (explicitly,
 * or by SQLite itself after an I/O error), so a retried flush never writes a dangling
 * id. Hot path of store_put_mib(): one cache hit per natural key, one mib upsert. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>

#include "store/store.h"
#include "base/cleanup.h"
#include "store/stmt.h"
#include "base/hash.h"

#define STMT_CACHE_MAX 32        /* distinct read statements a store may cache */
#define IDMAP_INITIAL_BUCKETS 256 /* grows by doubling at load factor 1 */
#define KEY_INLINE 512           /* natural keys up to this long are built on the stack */

/* ---- intern caches: natural key bytes -> rowid ---- */

struct idnode {
	struct idnode *next;     /* bucket chain */
	struct idnode *jnext;    /* journal of entries added in the open transaction */
	uint64_t hash;
	int64_t id;
	size_t klen;
	unsigned char key[];
};

struct idmap {
	struct idnode **b;
	size_t nb, n;
	struct idnode *journal;
};

static uint64_t hash_bytes(const void *key, size_t n)
{
	uint64_t h = fnv1a(key, n);      /* FNV-1a, then a final avalanche */

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static struct idnode *idmap_find(const struct idmap *m, const void *key, size_t klen,
				 uint64_t h)
{
	if (!m->nb)
		return NULL;
	for (struct idnode *n = m->b[h & (m->nb - 1)]; n; n = n->next)
		if (n->hash == h && n->klen == klen && !memcmp(n->key, key, klen))
			return n;
	return NULL;
}

static int idmap_grow(struct idmap *m)
{
	size_t nb = m->nb ? m->nb * 2 : IDMAP_INITIAL_BUCKETS;
	struct idnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->nb; i++) {
		for (struct idnode *n = m->b[i], *next; n; n = next) {
			next = n->next;
			n->next = b[n->hash & (nb - 1)];
			b[n->hash & (nb - 1)] = n;
		}
	}
	free(m->b);
	m->b = b;
	m->nb = nb;
	return 0;
}

static int idmap_add(struct idmap *m, const void *key, size_t klen, uint64_t h, int64_t id,
		     bool journal)
{
	struct idnode *n;

	if (m->n >= m->nb && idmap_grow(m) < 0)
		return -ENOMEM;
	n = malloc(sizeof(*n) + klen);
	if (!n)
		return -ENOMEM;
	n->hash = h;
	n->id = id;
	n->klen = klen;
	memcpy(n->key, key, klen);
	n->next = m->b[h & (m->nb - 1)];
	m->b[h & (m->nb - 1)] = n;
	n->jnext = NULL;
	if (journal) {
		n->jnext = m->journal;
		m->journal = n;
	}
	m->n++;
	return 0;
}

static void idmap_commit(struct idmap *m)
{
	m->journal = NULL;
}

static void idmap_rollback(struct idmap *m)
{
	for (struct idnode *n = m->journal, *jnext; n; n = jnext) {
		struct idnode **pp = &m->b[n->hash & (m->nb - 1)];

		jnext = n->jnext;
		while (*pp != n)
			pp = &(*pp)->next;
		*pp = n->next;
		free(n);
		m->n--;
	}
	m->journal = NULL;
}

static void idmap_free(struct idmap *m)
{
	for (size_t i = 0; i < m->nb; i++)
		for (struct idnode *n = m->b[i], *next; n; n = next) {
			next = n->next;
			free(n);
		}
	free(m->b);
	*m = (struct idmap){0};
}

/* ---- the store ---- */

enum {
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
	ST_BIN_GET_BUILD_ID, ST_BIN_GET_PATH, ST_BIN_INS, ST_FRAME_PUT,
	ST_STACK_GET, ST_STACK_INS, ST_CTX_GET, ST_CTX_INS,
	ST_BIN_NAME, ST_PROC_GET, ST_PROC_INS, ST_PROC_EXIT, ST_MIB_PUT, ST_RUN_INS, ST_RUN_UPD,
	ST_LINE_PUT, ST_DATA_PUT, ST_CLASS_PUT, ST_RUN_ACCESS,
	ST__COUNT
};

#define MIB_COL(f, agg) ", " #f
#define MIB_QMARK(f, agg) ", ?"
#define MIB_SET(f, agg) ", " #f " = excluded." #f

static const char *const write_sql[ST__COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_BIN_GET_BUILD_ID] = "SELECT id FROM binaries WHERE build_id = ?1 AND build_id <> ''",
	[ST_BIN_GET_PATH] = "SELECT id FROM binaries WHERE path = ?1 AND build_id = ''",
	[ST_BIN_INS] = "INSERT INTO binaries(build_id, path) VALUES (?1, ?2)",
	[ST_BIN_NAME] = "UPDATE binaries SET path = ?2 WHERE id = ?1 AND path = ''",
	[ST_FRAME_PUT] = "INSERT INTO frames(binary_id, offset, function, mangled) "
		"VALUES (?1, ?2, ?3, ?4) ON CONFLICT(binary_id, offset) DO UPDATE SET "
		"function = coalesce(function, excluded.function), "
		"mangled = coalesce(mangled, excluded.mangled) RETURNING id",
	[ST_STACK_GET] = "SELECT id FROM stacks WHERE hash = ?1",
	[ST_STACK_INS] = "INSERT INTO stacks(hash, nframes, frames) VALUES (?1, ?2, ?3)",
	[ST_CTX_GET] = "SELECT id FROM contexts WHERE stack_id = ?1 AND binary_id = ?2",
	[ST_CTX_INS] = "INSERT INTO contexts(stack_id, binary_id) VALUES (?1, ?2)",
	[ST_PROC_GET] = "SELECT id FROM processes WHERE pid = ?1 AND start_ns = ?2",
	[ST_PROC_INS] = "INSERT INTO processes(pid, start_ns, ppid, exe, binary_id, comm, run_id) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_PROC_EXIT] = "UPDATE processes SET exit_ns = ?2 WHERE id = ?1",
	/* DO UPDATE rewrites every mib column. alloc_count is named twice: SQLite keeps
	 * the rightmost assignment, and it spares a no-op write of a key column. */
	[ST_MIB_PUT] = "INSERT INTO mib(context_id, process_id, run_id, bucket_start"
		STORE__MIB_FIELDS(MIB_COL) STORE__MIB_V9_FIELDS(MIB_COL)
		STORE__MIB_V12_FIELDS(MIB_COL) STORE__MIB_V13_FIELDS(MIB_COL)
		STORE__MIB_V16_FIELDS(MIB_COL) STORE__MIB_V17_FIELDS(MIB_COL)
		", access_hist) VALUES (?, ?, ?, ?"
		STORE__MIB_FIELDS(MIB_QMARK) STORE__MIB_V9_FIELDS(MIB_QMARK)
		STORE__MIB_V12_FIELDS(MIB_QMARK) STORE__MIB_V13_FIELDS(MIB_QMARK)
		STORE__MIB_V16_FIELDS(MIB_QMARK) STORE__MIB_V17_FIELDS(MIB_QMARK) ", ?) "
		"ON CONFLICT(context_id, process_id, run_id, bucket_start) DO UPDATE SET "
		"alloc_count = excluded.alloc_count" STORE__MIB_FIELDS(MIB_SET)
		STORE__MIB_V9_FIELDS(MIB_SET) STORE__MIB_V12_FIELDS(MIB_SET)
		STORE__MIB_V13_FIELDS(MIB_SET) STORE__MIB_V16_FIELDS(MIB_SET)
		STORE__MIB_V17_FIELDS(MIB_SET)
		", access_hist = excluded.access_hist",
	[ST_RUN_INS] = "INSERT INTO runs(command, alloc_mode, access_mode, settings, started_ns,"
		" writer_pid, writer_start) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	/* Lines are facts of (binary, offset): the first writer's stay. */
	[ST_LINE_PUT] = "INSERT OR IGNORE INTO frame_lines(frame_id, depth, function, mangled,"
		" file, line, col, decl_line, inlined) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	/* Absolute values per run: the recorder rewrites its running totals. */
	[ST_DATA_PUT] = "INSERT INTO data_access(run_id, binary_id, symbol, address, section, size,"
		" access_samples, est_accesses) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
		" ON CONFLICT(run_id, binary_id, symbol, address) DO UPDATE SET"
		" section = excluded.section, size = excluded.size,"
		" access_samples = excluded.access_samples, est_accesses = excluded.est_accesses",
	[ST_CLASS_PUT] = "INSERT INTO access_classes(run_id, class, samples, est_accesses)"
		" VALUES (?1, ?2, ?3, ?4) ON CONFLICT(run_id, class) DO UPDATE SET"
		" samples = excluded.samples, est_accesses = excluded.est_accesses",
	[ST_RUN_ACCESS] = "UPDATE runs SET access_source = ?2, access_reasons = ?3 WHERE id = ?1",
	[ST_RUN_UPD] = "UPDATE runs SET ended_ns = ?2, events = ?3, drops_ringbuf = ?4, "
		"drops_live_full = ?5, drops_state_full = ?6, drops_stack = ?7, "
		"unmatched_frees = ?8, overwritten = ?9, unresolved_frames = ?10, "
		"status = coalesce(?11, status), missed_exec = ?12, missed_late = ?13, "
		"missed_unknown = ?14, flushed_ns = ?15 WHERE id = ?1",
};

struct store {
	sqlite3 *db;
	bool rdwr, in_txn;
	int version;               /* user_version once read (0: not yet); set only at open */
	struct idmap binaries, frames, stacks, contexts, procs;
	sqlite3_stmt *st[ST__COUNT];
	struct { const char *sql; sqlite3_stmt *st; } cache[STMT_CACHE_MAX];
	unsigned ncache;
	char err[512];
	const struct store_rows_ops *rows;  /* store_open_rows(): no db, readers served here */
	void *rows_ctx;
};

static struct idmap *store_maps(struct store *s, unsigned i)
{
	struct idmap *maps[] = { &s->binaries, &s->frames, &s->stacks, &s->contexts, &s->procs };

	return i < sizeof(maps) / sizeof(maps[0]) ? maps[i] : NULL;
}

static void caches_commit(struct store *s)
{
	for (unsigned i = 0; store_maps(s, i); i++)
		idmap_commit(store_maps(s, i));
}

static void caches_rollback(struct store *s)
{
	for (unsigned i = 0; store_maps(s, i); i++)
		idmap_rollback(store_maps(s, i));
}

int store__errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK: case SQLITE_ROW: case SQLITE_DONE: return 0;
	case SQLITE_BUSY: case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_READONLY: return -EROFS;
	case SQLITE_INTERRUPT: return -EINTR;
	case SQLITE_CORRUPT: return -EUCLEAN;
	case SQLITE_NOTADB: return -EBADMSG;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_CANTOPEN: return -ENOENT;
	case SQLITE_PROTOCOL: return -EPROTO;
	case SQLITE_TOOBIG: return -E2BIG;
	case SQLITE_CONSTRAINT: case SQLITE_MISMATCH: case SQLITE_MISUSE: case SQLITE_RANGE:
		return -EINVAL;
	case SQLITE_NOLFS: return -EFBIG;
	case SQLITE_AUTH: case SQLITE_PERM: return -EACCES;
	default: return -EIO;
	}
}

int store__error(struct store *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return err;
}

int store__fail(struct store *s, int rc, const char *what)
{
	snprintf(s->err, sizeof(s->err), "%s: %s", what, sqlite3_errmsg(s->db));
	/* After some errors (SQLITE_FULL, IOERR, NOMEM) SQLite rolls back by itself. */
	if (s->in_txn && sqlite3_get_autocommit(s->db)) {
		caches_rollback(s);
		s->in_txn = false;
	}
	int r = store__errno(rc);

	return r ? r : -EIO;
}

sqlite3_stmt *store__stmt(struct store *s, const char *sql)
{
	sqlite3_stmt *st;
	unsigned i;

	if (!s->db) {
		store__error(s, -EOPNOTSUPP, "not available from this source");
		return NULL;
	}
	for (i = 0; i < s->ncache; i++)
		if (s->cache[i].sql == sql) {
			st = s->cache[i].st;
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return st;
		}
	if (s->ncache == STMT_CACHE_MAX) {
		store__error(s, -ENOSPC, "statement cache full (%d)", STMT_CACHE_MAX);
		return NULL;
	}
	int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);

	if (rc != SQLITE_OK) {
		store__fail(s, rc, "preparing a query");
		return NULL;
	}
	s->cache[s->ncache].sql = sql;
	s->cache[s->ncache++].st = st;
	return st;
}

const char *store_errmsg(const struct store *s)
{
	return s ? s->err : "no store";
}

void store_close(struct store *s)
{
	if (!s)
		return;
	if (s->rows && s->rows->close)
		s->rows->close(s->rows_ctx);
	for (unsigned i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	for (unsigned i = 0; i < s->ncache; i++)
		sqlite3_finalize(s->cache[i].st);
	sqlite3_close_v2(s->db);  /* rolls back an open transaction */
	for (unsigned i = 0; store_maps(s, i); i++)
		idmap_free(store_maps(s, i));
	free(s);
}

/* ---- SQL aggregate mib_hist_merge(blob): MIB histograms combined by mib_hist_merge()
 * (NULLs skipped; NULL when nothing is left), for GROUP BYs over mib rows. */

static void hist_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct mib_hist *h = sqlite3_aggregate_context(ctx, sizeof(*h));
	int r;

	(void)argc;
	if (!h) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	if (sqlite3_value_type(argv[0]) == SQLITE_NULL)
		return;
	r = mib_hist_merge_blob(h, sqlite3_value_blob(argv[0]),
				(size_t)sqlite3_value_bytes(argv[0]));
	if (r == -ENOMEM)
		sqlite3_result_error_nomem(ctx);
	else if (r)
		sqlite3_result_error(ctx, "mib_hist_merge: not a histogram blob", -1);
}

static void hist_final(sqlite3_context *ctx)
{
	struct mib_hist *h = sqlite3_aggregate_context(ctx, 0);
	void *blob;

	if (!h || !h->len) {
		sqlite3_result_null(ctx);
		if (h)
			mib_hist_free(h);
		return;
	}
	blob = sqlite3_malloc64((sqlite3_uint64)h->len * 8);
	if (blob) {
		mib_hist_to_blob(h, blob);
		sqlite3_result_blob64(ctx, blob, (sqlite3_uint64)h->len * 8, sqlite3_free);
	} else {
		sqlite3_result_error_nomem(ctx);
	}
	mib_hist_free(h);
}

int store_open(struct store **out, const char *path, unsigned flags, char *err, size_t errsz)
{
	char ignored[1], why[400];
	bool rdwr = flags & STORE_RDWR;
	int rc, r;

	if (!err || !errsz) {
		err = ignored;
		errsz = sizeof(ignored);
	}
	*out = NULL;
	err[0] = '\0';
	if (!path || !*path) {
		snprintf(err, errsz, "empty database path");
		return -EINVAL;
	}
	if (!rdwr) {
		struct stat st;

		/* SQLite would say only "unable to open database file". */
		if (stat(path, &st) < 0) {
			r = -errno;
			snprintf(err, errsz, "%s: %s", path, strerror(-r));
			return r;
		}
		if (S_ISDIR(st.st_mode)) {
			snprintf(err, errsz, "%s: is a directory", path);
			return -EISDIR;
		}
	}

	_cleanup_(store_closep) struct store *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errsz, "%s: out of memory", path);
		return -ENOMEM;
	}
	s->rdwr = rdwr;
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_NOMUTEX |
			     (rdwr ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY),
			     NULL);
	if (rc != SQLITE_OK) {
		int sys = s->db ? sqlite3_system_errno(s->db) : 0;

		snprintf(err, errsz, "%s: %s", path, sys ? strerror(sys) :
			 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		return sys ? -sys : store__errno(rc);
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
	rc = sqlite3_create_function_v2(s->db, "mib_hist_merge", 1,
					SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY,
					NULL, NULL, hist_step, hist_final, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errsz, "%s: registering mib_hist_merge: %s", path,
			 sqlite3_errmsg(s->db));
		return store__errno(rc);
	}
	r = store__schema_open(s->db, rdwr, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errsz, "%s: %s", path, why);
		return r;
	}
	for (unsigned i = 0; rdwr && i < ST__COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, write_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			snprintf(err, errsz, "%s: preparing statements: %s", path,
				 sqlite3_errmsg(s->db));
			return store__errno(rc);
		}
	}
	*out = s;
	s = NULL;
	return 0;
}

int store_open_rows(struct store **out, const struct store_rows_ops *ops, void *ctx)
{
	struct store *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return -ENOMEM;
	s->rows = ops;
	s->rows_ctx = ctx;
	s->version = STORE_SCHEMA_VERSION;   /* what its rows stand for; never read */
	return 0;
}

int store_rows_error(struct store *s, int err, const char *msg)
{
	snprintf(s->err, sizeof(s->err), "%s", msg);
	return err;
}

const struct store_rows_ops *store__rows(struct store *s, void **ctx)
{
	*ctx = s->rows_ctx;
	return s->rows;
}

int store_schema_version(struct store *s)
{
	sqlite3_stmt *st;
	int rc, v;

	/* Only opening migrates, and it runs before any caller asks: cache the answer. */
	if (s->version > 0)
		return s->version;
	rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return store__fail(s, rc, "reading the schema version");
	rc = sqlite3_step(st);
	v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : store__fail(s, rc, "reading the schema version");
	sqlite3_finalize(st);
	if (v > 0)
		s->version = v;
	return v;
}

int store_set_cache(struct store *s, uint64_t bytes)
{
	char sql[64];
	int rc;

	/* A negative cache_size is in KiB: a byte bound whatever the page size. */
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%llu",
		 (unsigned long long)(bytes + 1023) / 1024);
	rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store__fail(s, rc, "setting the page cache size");
}

void store_set_busy_timeout(struct store *s, int ms)
{
	sqlite3_busy_timeout(s->db, ms > 0 ? ms : 0);
}

uint64_t store_cache_used(struct store *s)
{
	int cur = 0, hi = 0;

	sqlite3_db_status(s->db, SQLITE_DBSTATUS_CACHE_USED, &cur, &hi, 0);
	return cur > 0 ? (uint64_t)cur : 0;
}

static int need_writer(struct store *s)
{
	return s->rdwr ? 0 : store__error(s, -EROFS, "the store is open read-only");
}

/* Steps a statement that returns no row. */
static int step_done(struct store *s, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, what);
}

/* Steps a statement that returns at most one id: 1 and *id if a row, 0 if none. */
static int step_id(struct store *s, sqlite3_stmt *st, int64_t *id, const char *what)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		return 1;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, what);
}

static sqlite3_stmt *hot(struct store *s, unsigned i)
{
	sqlite3_reset(s->st[i]);
	return s->st[i];
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int cache_add(struct store *s, struct idmap *m, const void *key, size_t klen,
		     uint64_t h, int64_t id)
{
	if (idmap_add(m, key, klen, h, id, s->in_txn) < 0)
		return store__error(s, -ENOMEM, "out of memory");
	return 0;
}

int store_begin(struct store *s)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (s->in_txn)
		return store__error(s, -EBUSY, "a transaction is already open");
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_BEGIN);

	r = step_done(s, st, "BEGIN");
	if (r == 0)
		s->in_txn = true;
	return r;
}

int store_commit(struct store *s)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (!s->in_txn)
		return store__error(s, -EINVAL, "no transaction is open");
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_COMMIT);

	r = step_done(s, st, "COMMIT");
	if (r == 0) {
		caches_commit(s);
		s->in_txn = false;
	}
	return r;
}

int store_rollback(struct store *s)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	/* Forget the ids first: whatever ROLLBACK says, those rows are gone or going. */
	caches_rollback(s);
	s->in_txn = false;
	if (sqlite3_get_autocommit(s->db))
		return 0;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_ROLLBACK);

	return step_done(s, st, "ROLLBACK");
}

/* ---- interning: natural key -> rowid, cache first ---- */


static int intern_binary(struct store *s, const char *build_id, const char *path, int64_t *id)
{
	build_id = build_id ? build_id : "";
	path = path ? path : "";

	const char *name = *build_id ? build_id : path;
	size_t klen = strlen(name) + 1;
	unsigned char inline_key[KEY_INLINE], *key = inline_key;
	_cleanup_free_ unsigned char *heap_key = NULL;
	int r;

	if (klen > sizeof(inline_key)) {
		key = heap_key = malloc(klen);
		if (!key)
			return store__error(s, -ENOMEM, "out of memory");
	}
	/* 'b': a build-id looked up without a path; 'B': with one, which names a row
	 * stored without a path (a binary's path learned from any process names it). */
	key[0] = *build_id ? (*path ? 'B' : 'b') : 'P';
	memcpy(key + 1, name, klen - 1);

	uint64_t h = hash_bytes(key, klen);
	struct idnode *n = idmap_find(&s->binaries, key, klen, h);

	if (n) {
		*id = n->id;
		return 0;
	}
	{
		_cleanup_reset_ sqlite3_stmt *st = hot(s, *build_id ? ST_BIN_GET_BUILD_ID :
						       ST_BIN_GET_PATH);

		bind_text(st, 1, name);
		r = step_id(s, st, id, "looking up a binary");
		if (r < 0)
			return r;
	}
	if (r == 1 && *path && *build_id) {
		/* Named since it was first stored without a path (a library's frames). */
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_BIN_NAME);

		sqlite3_bind_int64(st, 1, *id);
		bind_text(st, 2, path);
		if ((r = step_done(s, st, "naming a binary")) < 0)
			return r;
		r = 1;
	}
	if (r == 0) {
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_BIN_INS);

		bind_text(st, 1, build_id);
		bind_text(st, 2, path);
		r = step_done(s, st, "inserting a binary");
		if (r < 0)
			return r;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	if (!*path && *build_id)
		return 0;   /* not cached until a frame names it (looked up in SQL till then) */
	return cache_add(s, &s->binaries, key, klen, h, *id);
}

/* The frame's row (its names kept where set: coalesce) and its lines (the first writer's
 * stay): what a put writes for a new frame, and what symbolization adds to a bare one. */
static int frame_put(struct store *s, int64_t bin, const struct store_frame *f, int64_t *id)
{
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_FRAME_PUT);
	int r;

	sqlite3_bind_int64(st, 1, bin);
	sqlite3_bind_int64(st, 2, (int64_t)f->offset);
	bind_text(st, 3, f->function);
	bind_text(st, 4, f->mangled);
	r = step_id(s, st, id, "inserting a frame");
	if (r == 0)
		return store__error(s, -EIO, "inserting a frame: no id returned");
	if (r < 0)
		return r;
	for (unsigned i = 0; i < f->nlines && i < STORE_MAX_LINES; i++) {
		const struct store_line *l = &f->lines[i];
		_cleanup_reset_ sqlite3_stmt *ls = hot(s, ST_LINE_PUT);

		sqlite3_bind_int64(ls, 1, *id);
		sqlite3_bind_int(ls, 2, (int)i);
		bind_text(ls, 3, l->function);
		bind_text(ls, 4, l->mangled);
		bind_text(ls, 5, l->file);
		sqlite3_bind_int64(ls, 6, l->line);
		sqlite3_bind_int64(ls, 7, l->column);
		sqlite3_bind_int64(ls, 8, l->decl_line);
		sqlite3_bind_int(ls, 9, l->inlined);
		int rc = sqlite3_step(ls);
		if (rc != SQLITE_DONE)
			return store__fail(s, rc, "inserting a frame line");
	}
	return 0;
}

static int intern_frame(struct store *s, const struct store_frame *f, int64_t *id)
{
	int64_t bin;
	int r = intern_binary(s, f->build_id, f->path, &bin);

	if (r < 0)
		return r;

	uint64_t key[2] = { (uint64_t)bin, f->offset };
	uint64_t h = hash_bytes(key, sizeof(key));
	struct idnode *n = idmap_find(&s->frames, key, sizeof(key), h);

	if (n) {
		*id = n->id;
		return 0;
	}
	r = frame_put(s, bin, f, id);
	if (r < 0)
		return r;
	return cache_add(s, &s->frames, key, sizeof(key), h, *id);
}

int store_put_frame_symbols(struct store *s, const struct store_frame *f)
{
	int64_t bin, id;
	int r = intern_binary(s, f->build_id, f->path, &bin);

	return r < 0 ? r : frame_put(s, bin, f, &id);
}

static int intern_stack(struct store *s, uint64_t hash, const struct store_frame *frames,
			unsigned nframes, int64_t *id)
{
	uint64_t h = hash_bytes(&hash, sizeof(hash));
	struct idnode *n = idmap_find(&s->stacks, &hash, sizeof(hash), h);
	int r;

	if (n) {
		*id = n->id;
		return 0;
	}
	{
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_STACK_GET);

		sqlite3_bind_int64(st, 1, (int64_t)hash);
		r = step_id(s, st, id, "looking up a stack");
		if (r < 0)
			return r;
	}
	if (r == 0) {
		if (nframes > STORE_MAX_FRAMES)
			return store__error(s, -E2BIG, "stack of %u frames (at most %d)",
					    nframes, STORE_MAX_FRAMES);

		_cleanup_free_ uint64_t *blob = malloc((nframes ? nframes : 1) * sizeof(*blob));

		if (!blob)
			return store__error(s, -ENOMEM, "out of memory");
		for (unsigned i = 0; i < nframes; i++) {
			int64_t fid = 0;

			r = intern_frame(s, &frames[i], &fid);
			if (r < 0)
				return r;
			blob[i] = htole64((uint64_t)fid);
		}

		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_STACK_INS);

		sqlite3_bind_int64(st, 1, (int64_t)hash);
		sqlite3_bind_int(st, 2, (int)nframes);
		if (nframes)
			sqlite3_bind_blob(st, 3, blob, (int)(nframes * sizeof(*blob)), SQLITE_STATIC);
		else
			sqlite3_bind_zeroblob(st, 3, 0);
		r = step_done(s, st, "inserting a stack");
		if (r < 0)
			return r;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return cache_add(s, &s->stacks, &hash, sizeof(hash), h, *id);
}

static int intern_context(struct store *s, int64_t stack, int64_t bin, int64_t *id)
{
	int64_t key[2] = { stack, bin };
	uint64_t h = hash_bytes(key, sizeof(key));
	struct idnode *n = idmap_find(&s->contexts, key, sizeof(key), h);
	int r;

	if (n) {
		*id = n->id;
		return 0;
	}
	{
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_CTX_GET);

		sqlite3_bind_int64(st, 1, stack);
		sqlite3_bind_int64(st, 2, bin);
		r = step_id(s, st, id, "looking up a context");
		if (r < 0)
			return r;
	}
	if (r == 0) {
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_CTX_INS);

		sqlite3_bind_int64(st, 1, stack);
		sqlite3_bind_int64(st, 2, bin);
		r = step_done(s, st, "inserting a context");
		if (r < 0)
			return r;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return cache_add(s, &s->contexts, key, sizeof(key), h, *id);
}

/* The process row, and (always) the id of its executable's binary. */
static int intern_proc(struct store *s, const struct store_proc *p, int64_t *id, int64_t *bin)
{
	int64_t key[2] = { p->pid, (int64_t)p->start_ns };
	uint64_t h = hash_bytes(key, sizeof(key));
	int r = intern_binary(s, p->build_id, p->exe, bin);

	if (r < 0)
		return r;

	struct idnode *n = idmap_find(&s->procs, key, sizeof(key), h);

	if (n) {
		*id = n->id;
		return 0;
	}
	{
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_PROC_GET);

		sqlite3_bind_int(st, 1, p->pid);
		sqlite3_bind_int64(st, 2, (int64_t)p->start_ns);
		r = step_id(s, st, id, "looking up a process");
		if (r < 0)
			return r;
	}
	if (r == 0) {
		_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_PROC_INS);

		sqlite3_bind_int(st, 1, p->pid);
		sqlite3_bind_int64(st, 2, (int64_t)p->start_ns);
		sqlite3_bind_int(st, 3, p->ppid);
		bind_text(st, 4, p->exe);
		sqlite3_bind_int64(st, 5, *bin);
		bind_text(st, 6, p->comm);
		if (p->run_id > 0)
			sqlite3_bind_int64(st, 7, p->run_id);
		else
			sqlite3_bind_null(st, 7);
		r = step_done(s, st, "inserting a process");
		if (r < 0)
			return r;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return cache_add(s, &s->procs, key, sizeof(key), h, *id);
}

int store_put_mib(struct store *s, const struct store_proc *p, uint64_t stack_hash,
		  const struct store_frame *frames, unsigned nframes, int64_t bucket_start,
		  const struct mib *m)
{
	return store_put_mib_hist(s, p, stack_hash, frames, nframes, bucket_start, m, NULL);
}

int store_put_mib_hist(struct store *s, const struct store_proc *p, uint64_t stack_hash,
		       const struct store_frame *frames, unsigned nframes, int64_t bucket_start,
		       const struct mib *m, const struct mib_hist *h)
{
	int64_t proc = 0, bin = 0, stack = 0, ctx = 0;
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (!p || !m || (nframes && !frames))
		return store__error(s, -EINVAL, "store_put_mib: missing argument");
	r = intern_proc(s, p, &proc, &bin);
	if (r < 0)
		return r;
	r = intern_stack(s, stack_hash, frames, nframes, &stack);
	if (r < 0)
		return r;
	r = intern_context(s, stack, bin, &ctx);
	if (r < 0)
		return r;

	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_MIB_PUT);
	int col = 1;

	sqlite3_bind_int64(st, col++, ctx);
	sqlite3_bind_int64(st, col++, proc);
	sqlite3_bind_int64(st, col++, p->run_id);   /* each recording owns its rows */
	sqlite3_bind_int64(st, col++, bucket_start);
#define MIB_BIND(f, agg) sqlite3_bind_int64(st, col++, (int64_t)m->f);
	STORE__MIB_FIELDS(MIB_BIND)
	STORE__MIB_V9_FIELDS(MIB_BIND)
#undef MIB_BIND
#define MIB_BIND_D(f, agg) (m->has_density ? sqlite3_bind_double(st, col, m->f) : \
			     sqlite3_bind_null(st, col)), col++;
	STORE__MIB_V12_FIELDS(MIB_BIND_D)
#undef MIB_BIND_D
#define MIB_BIND(f, agg) sqlite3_bind_int64(st, col++, (int64_t)m->f);
	STORE__MIB_V13_FIELDS(MIB_BIND)
	STORE__MIB_V16_FIELDS(MIB_BIND)
	STORE__MIB_V17_FIELDS(MIB_BIND)
#undef MIB_BIND
	if (!h || !h->len) {
		sqlite3_bind_null(st, col);   /* hot statements keep their last bindings */
		return step_done(s, st, "writing a MIB");
	}
	if (h->len > MIB_HIST_MAX_LEN)
		return store__error(s, -E2BIG, "histogram of %u entries (at most %d)", h->len,
				    MIB_HIST_MAX_LEN);

	_cleanup_free_ void *blob = malloc((size_t)h->len * 8);

	if (!blob)
		return store__error(s, -ENOMEM, "out of memory");
	mib_hist_to_blob(h, blob);
	sqlite3_bind_blob(st, col, blob, (int)(h->len * 8), SQLITE_STATIC);
	return step_done(s, st, "writing a MIB");
}

int store_proc_exit(struct store *s, const struct store_proc *p, int64_t exit_ns)
{
	int64_t proc = 0, bin = 0;
	int r = need_writer(s);

	if (r < 0)
		return r;
	r = intern_proc(s, p, &proc, &bin);
	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_PROC_EXIT);

	sqlite3_bind_int64(st, 1, proc);
	sqlite3_bind_int64(st, 2, exit_ns);
	return step_done(s, st, "marking a process exited");
}

int store_run_begin(struct store *s, const struct store_run *run, int64_t *run_id)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_RUN_INS);

	bind_text(st, 1, run->command ? run->command : "");
	bind_text(st, 2, run->alloc_mode);
	bind_text(st, 3, run->access_mode);
	bind_text(st, 4, run->settings);
	sqlite3_bind_int64(st, 5, run->started_ns);
	sqlite3_bind_int64(st, 6, (int64_t)getpid());
	sqlite3_bind_int64(st, 7, (int64_t)store__self_start_ticks());
	r = step_done(s, st, "recording a run");
	if (r == 0)
		*run_id = sqlite3_last_insert_rowid(s->db);
	return r;
}

int store_run_update(struct store *s, int64_t run_id, const struct store_run_stats *rs)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_RUN_UPD);
	const uint64_t v[] = { rs->events, rs->drops_ringbuf, rs->drops_live_full,
			       rs->drops_state_full, rs->drops_stack, rs->unmatched_frees,
			       rs->overwritten, rs->unresolved_frames };

	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, rs->ended_ns);
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		sqlite3_bind_int64(st, 3 + (int)i, (int64_t)v[i]);
	bind_text(st, 11, rs->status);
	sqlite3_bind_int64(st, 12, (int64_t)rs->missed_exec);
	sqlite3_bind_int64(st, 13, (int64_t)rs->missed_late);
	sqlite3_bind_int64(st, 14, (int64_t)rs->missed_unknown);
	sqlite3_bind_int64(st, 15, rs->flushed_ns);
	r = step_done(s, st, "updating a run");
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return store__error(s, -ENOENT, "updating a run: no run %lld", (long long)run_id);
	return r;
}

int store_put_data(struct store *s, int64_t run_id, const struct store_data *d)
{
	int64_t bin = 0;
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (!d)
		return store__error(s, -EINVAL, "store_put_data: missing argument");
	r = intern_binary(s, d->build_id, d->path, &bin);
	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_DATA_PUT);

	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, bin);
	bind_text(st, 3, d->symbol ? d->symbol : "");
	sqlite3_bind_int64(st, 4, (int64_t)d->address);
	bind_text(st, 5, d->section);
	sqlite3_bind_int64(st, 6, (int64_t)d->size);
	sqlite3_bind_int64(st, 7, (int64_t)d->access_samples);
	sqlite3_bind_int64(st, 8, (int64_t)d->est_accesses);
	return step_done(s, st, "writing a data symbol");
}

int store_put_access_class(struct store *s, int64_t run_id, const char *cls,
			   uint64_t samples, uint64_t est)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (!cls || !*cls)
		return store__error(s, -EINVAL, "store_put_access_class: missing class");
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_CLASS_PUT);

	sqlite3_bind_int64(st, 1, run_id);
	bind_text(st, 2, cls);
	sqlite3_bind_int64(st, 3, (int64_t)samples);
	sqlite3_bind_int64(st, 4, (int64_t)est);
	return step_done(s, st, "writing an access class");
}

int store_run_access(struct store *s, int64_t run_id, const char *source, const char *reasons)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	_cleanup_reset_ sqlite3_stmt *st = hot(s, ST_RUN_ACCESS);

	sqlite3_bind_int64(st, 1, run_id);
	bind_text(st, 2, source);
	bind_text(st, 3, reasons);
	r = step_done(s, st, "recording the access source");
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return store__error(s, -ENOENT, "recording the access source: no run %lld",
				    (long long)run_id);
	return r;
}

int store_forget_process(struct store *s, int32_t pid, uint64_t start_ns)
{
	int64_t key[2] = { pid, (int64_t)start_ns };
	uint64_t h = hash_bytes(key, sizeof(key));
	struct idnode *n = idmap_find(&s->procs, key, sizeof(key), h), **pp;

	if (!n)
		return 0;
	if (s->in_txn)
		return store__error(s, -EBUSY, "forgetting a process inside a transaction");
	for (pp = &s->procs.b[h & (s->procs.nb - 1)]; *pp != n; pp = &(*pp)->next)
		;
	*pp = n->next;
	free(n);
	s->procs.n--;
	return 0;
}

/* For store/retention.c: after rows were deleted, forget every cached id so that no
 * later put reuses an id whose row is gone. Only between transactions. */
int store__forget_ids(struct store *s)
{
	if (s->in_txn)
		return store__error(s, -EBUSY, "forgetting ids inside a transaction");
	for (unsigned i = 0; store_maps(s, i); i++)
		idmap_free(store_maps(s, i));
	return 0;
}

struct sqlite3 *store__db(struct store *s)
{
	return s->db;
}

static const char stack_truncated_sql[] = "UPDATE stacks SET truncated = 1 WHERE hash = ?1";

int store_mark_truncated(struct store *s, uint64_t stack_hash)
{
	int r = need_writer(s);

	if (r < 0)
		return r;
	if (store_schema_version(s) < 10)
		return 0;
	sqlite3_stmt *st = store__stmt(s, stack_truncated_sql);
	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;
	sqlite3_bind_int64(st, 1, (int64_t)stack_hash);
	return step_done(s, st, "marking a stack truncated");
}
