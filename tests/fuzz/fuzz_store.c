/* libFuzzer target: every reader of a store (query's five views in JSON, every export
 * format, merge) over a damaged or hostile copy of a valid store, at every schema version.
 * The template is a store made by bench/gen_store (MEMPROFD_FUZZ_STORE names it;
 * run_fuzzers.sh makes one); the older versions' templates are built from it at start-up
 * by store/schema.c's first v migrations and a copy of the columns version v has. The
 * first input byte picks the version (bits 1..: 0 is the current one, k is k versions
 * older, modulo) and the damage (bit 0):
 *   even: raw patches over the file's bytes ({u32 offset, u8 len, len bytes}...), what a
 *         torn page, a bad disk or a hand-edited file gives;
 *   odd:  hostile values written through SQLite ({u8 table, u8 column, u8 row, u8 kind,
 *         u16 len, len bytes}...): strings with quotes, escapes and invalid UTF-8,
 *         oversized or short blobs, negative and huge integers, NULLs, in any column.
 * A reader may refuse such a store with an error; it must never crash, hang or leak. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sqlite3.h>

#include "store/store.h"

int cmd_query(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_merge(int argc, char **argv);

#define FUZZ_MAX_TEMPLATE (64u << 20)   /* bytes of the template store kept in memory */
#define FUZZ_MAX_TABLES 32
#define FUZZ_MAX_COLUMNS 32
#define FUZZ_DATA_ROWS_S "2000"   /* data_access rows kept in the template */
#define FUZZ_SQL_MAX 4096          /* one column-copying statement */

/* A valid store of one schema version, kept in memory; each input damages a copy. */
struct tmpl {
	unsigned char *db;
	size_t len;
	char tables[FUZZ_MAX_TABLES][64];
	size_t ntables;
	char build_id[80];
};

static struct tmpl tmpls[STORE_SCHEMA_VERSION + 1];   /* by version, [0] unused */
static const struct tmpl *t;                          /* this input's */
static char dir[64], db[96], merged[96], out[96];

static int read_template(const char *path, struct tmpl *to)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) || st.st_size <= 0 || (size_t)st.st_size > FUZZ_MAX_TEMPLATE)
		return -1;
	to->len = (size_t)st.st_size;
	to->db = malloc(to->len);
	if (!to->db || read(fd, to->db, to->len) != (ssize_t)to->len)
		return -1;
	close(fd);
	return 0;
}

/* The template's tables and one build-id for export's --binary. */
static int learn_template(const char *path, struct tmpl *to)
{
	sqlite3 *h;
	sqlite3_stmt *st;

	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(h, "SELECT name FROM sqlite_master WHERE type = 'table' "
			       "AND name NOT LIKE 'sqlite_%' ORDER BY name", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW && to->ntables < FUZZ_MAX_TABLES)
			snprintf(to->tables[to->ntables++], sizeof(to->tables[0]), "%s",
				 sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
	}
	/* A build-id whose binary has MIB rows: an old template that lost its rows in the
	 * copy would fuzz nothing but empty readers. */
	if (sqlite3_prepare_v2(h, "SELECT b.build_id FROM binaries b JOIN contexts c ON "
			       "c.binary_id = b.id JOIN mib m ON m.context_id = c.id LIMIT 1", -1,
			       &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
			snprintf(to->build_id, sizeof(to->build_id), "%s", sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
	return to->ntables && to->build_id[0] ? 0 : -1;
}

/* A private copy of the template with FUZZ_DATA_ROWS_S data rows: each input runs every
 * reader, and gen_store's 2,000 rows made an input ~1.3-2x as slow as 512 (the exports'
 * cost is n log n in sampled symbols since ldgen_add folds by sorting). */
static int shrink_template(const char *path, char *copy, size_t copysz)
{
	struct tmpl whole = { 0 };
	sqlite3 *h;
	int fd, rc;

	if (read_template(path, &whole))
		return -1;
	snprintf(copy, copysz, "/tmp/fuzz_store_template.%d.db", (int)getpid());
	fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, whole.db, whole.len) != (ssize_t)whole.len)
		return -1;
	close(fd);
	free(whole.db);
	if (sqlite3_open(copy, &h) != SQLITE_OK)
		return -1;
	rc = sqlite3_exec(h, "PRAGMA journal_mode = DELETE; "
			  "DELETE FROM data_access WHERE (run_id, binary_id, symbol, address) NOT IN "
			  "(SELECT run_id, binary_id, symbol, address FROM data_access LIMIT "
			  FUZZ_DATA_ROWS_S "); VACUUM",
			  NULL, NULL, NULL);
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : -1;
}

/* "a, b, c": the columns table has in both main (version v) and cur (the current one). */
static int common_columns(sqlite3 *h, const char *table, char *cols, size_t cap)
{
	sqlite3_stmt *st;
	size_t len = 0;

	cols[0] = 0;
	if (sqlite3_prepare_v2(h, "SELECT a.name FROM pragma_table_info(?1, 'main') a "
			       "JOIN pragma_table_info(?1, 'cur') b ON a.name = b.name", -1, &st,
			       NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW && len + 80 < cap)
		len += (size_t)snprintf(cols + len, cap - len, "%s\"%s\"", len ? ", " : "",
					(const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return len ? 0 : -1;
}

/* The template as schema `version` had it: that version's migrations, then the rows of
 * the current template in the columns that version has. ctx_totals is left to the
 * triggers (v >= 2) that mib's rows fire, so mib comes after contexts. */
static int old_template(const char *cur, int version, char *path, size_t pathsz)
{
	static const char *const order[] = { "runs", "binaries", "processes", "frames", "stacks",
		"contexts", "frame_lines", "data_access", "access_classes", "governor",
		"governor_sources", "daemon_targets", "mib" };
	char sql[FUZZ_SQL_MAX], cols[FUZZ_SQL_MAX / 2];
	sqlite3 *h;
	int rc = SQLITE_OK;

	snprintf(path, pathsz, "/tmp/fuzz_store_template.%d.v%d.db", (int)getpid(), version);
	unlink(path);
	if (sqlite3_open(path, &h) != SQLITE_OK)
		return -1;
	for (int v = 0; v < version && rc == SQLITE_OK; v++)
		rc = sqlite3_exec(h, store__migration_sql(v), NULL, NULL, NULL);
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; ATTACH '%s' AS cur", version, cur);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && rc == SQLITE_OK; i++) {
		if (common_columns(h, order[i], cols, sizeof(cols)))
			continue;   /* not in this version */
		snprintf(sql, sizeof(sql), "INSERT OR IGNORE INTO main.\"%s\"(%s) SELECT %s FROM "
			 "cur.\"%s\"", order[i], cols, cols, order[i]);
		rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(h, "DETACH cur", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		fprintf(stderr, "fuzz_store: schema %d template: %s\n", version, sqlite3_errmsg(h));
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : -1;
}

/* tmpls[1..STORE_SCHEMA_VERSION] from the gen_store template at path. */
static int make_templates(const char *path)
{
	char small[128], old[128];

	if (shrink_template(path, small, sizeof(small)) ||
	    read_template(small, &tmpls[STORE_SCHEMA_VERSION]) ||
	    learn_template(small, &tmpls[STORE_SCHEMA_VERSION]))
		return -1;
	for (int v = 1; v < STORE_SCHEMA_VERSION; v++) {
		int r = old_template(small, v, old, sizeof(old));

		if (!r)
			r = read_template(old, &tmpls[v]) || learn_template(old, &tmpls[v]);
		unlink(old);
		if (r)
			return -1;
	}
	unlink(small);
	return 0;
}

/* At exit: the work directory and whatever the readers left in it (flat: no reader
 * makes folders). A crash leaves it, with the reproducer libFuzzer writes. */
static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *path = getenv("MEMPROFD_FUZZ_STORE");
	int devnull = open("/dev/null", O_WRONLY);

	if (!path || make_templates(path)) {
		fprintf(stderr, "fuzz_store: MEMPROFD_FUZZ_STORE must name a store from bench/gen_store\n");
		exit(2);
	}
	/* tmpfs where there is one: the exports and merge fsync what they write. */
	snprintf(dir, sizeof(dir), "%s/fuzz_store.XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	if (!mkdtemp(dir))
		exit(2);
	atexit(remove_dir);
	snprintf(db, sizeof(db), "%s/in.db", dir);
	snprintf(merged, sizeof(merged), "%s/merged.db", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	/* The readers print their results: keep libFuzzer's own output readable. */
	if (devnull >= 0)
		dup2(devnull, STDOUT_FILENO);
	return 0;
}

static void write_db(const uint8_t *patches, size_t n)
{
	unsigned char *img = malloc(t->len);
	int fd;

	memcpy(img, t->db, t->len);
	while (n >= 5) {
		uint32_t off;
		size_t len = patches[4];

		memcpy(&off, patches, 4);
		patches += 5, n -= 5;
		len = len < n ? len : n;
		off %= t->len;
		if (len > t->len - off)
			len = t->len - off;
		memcpy(img + off, patches, len);
		patches += len, n -= len;
	}
	unlink(db);
	fd = open(db, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, img, t->len) != (ssize_t)t->len)
			unlink(db);
		close(fd);
	}
	free(img);
}

/* A hostile value of kind k from the input's bytes. */
static void bind_value(sqlite3_stmt *st, int k, const uint8_t *b, size_t len)
{
	static const int64_t ints[] = { 0, -1, 1, INT64_MIN, INT64_MAX, 1LL << 62, -(1LL << 40) };

	switch (k % 6) {
	case 0: sqlite3_bind_text(st, 1, (const char *)b, (int)len, SQLITE_TRANSIENT); break;
	case 1: sqlite3_bind_blob(st, 1, b, (int)len, SQLITE_TRANSIENT); break;
	case 2: sqlite3_bind_int64(st, 1, ints[(len ? b[0] : 0) % (sizeof(ints) / sizeof(ints[0]))]); break;
	case 3: sqlite3_bind_null(st, 1); break;
	case 4: sqlite3_bind_double(st, 1, len ? -1e300 * b[0] : 0.0 / 0.0); break;
	default: sqlite3_bind_zeroblob(st, 1, 1 << 20); break;   /* an oversized blob */
	}
}

static void hostile_values(const uint8_t *p, size_t n)
{
	sqlite3 *h;

	write_db(NULL, 0);
	if (sqlite3_open(db, &h) != SQLITE_OK) {
		sqlite3_close(h);
		return;
	}
	while (n >= 6) {
		const char *tb = t->tables[p[0] % t->ntables];
		char sql[512], col[64] = "";
		sqlite3_stmt *st;
		size_t len = (size_t)p[4] | (size_t)p[5] << 8;
		int c = p[1] % FUZZ_MAX_COLUMNS, row = p[2], kind = p[3];

		p += 6, n -= 6;
		len = len < n ? len : n;
		snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info('%s') WHERE cid = %d", tb, c);
		if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				snprintf(col, sizeof(col), "%s", sqlite3_column_text(st, 0));
			sqlite3_finalize(st);
		}
		if (col[0]) {
			/* By value, not rowid: some tables are WITHOUT ROWID. Rows that share
			 * the chosen row's value change together. */
			snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = ?1 WHERE \"%s\" IS "
				 "(SELECT \"%s\" FROM \"%s\" LIMIT 1 OFFSET %d)", tb, col, col, col, tb, row);
			if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
				bind_value(st, kind, p, len);
				sqlite3_step(st);   /* a constraint may refuse it: fine */
				sqlite3_finalize(st);
			}
		}
		p += len, n -= len;
	}
	sqlite3_close(h);
}

static void run(int (*fn)(int, char **), char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	optind = 0;
	fn(argc, argv);
}

static void run_readers(void)
{
	static const char *const views[] = { "contexts", "data", "binaries", "processes", "status" };
	static const char *const formats[] = { "pprof", "folded", "html", "memprof-raw",
		"memprof-yaml", "hints", "ld-script", "symbol-order", "section-prefixes" };

	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		char *argv[] = { "query", (char *)views[i], "--db", db, "--format", "json", NULL };
		run(cmd_query, argv);
	}
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		char *argv[] = { "export", (char *)formats[i], "--db", db, "--binary",
				 (char *)t->build_id, "-o", out, NULL };
		run(cmd_export, argv);
	}
	unlink(merged);
	char *argv[] = { "merge", "-o", merged, db, NULL };
	run(cmd_merge, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const leftovers[] = { "", "-wal", "-shm", "-journal" };

	if (!size)
		return 0;
	t = &tmpls[STORE_SCHEMA_VERSION - (data[0] >> 1) % STORE_SCHEMA_VERSION];
	if (data[0] & 1)
		hostile_values(data + 1, size - 1);
	else
		write_db(data + 1, size - 1);
	run_readers();
	for (size_t i = 0; i < sizeof(leftovers) / sizeof(leftovers[0]); i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s%s", db, leftovers[i]);
		unlink(path);
	}
	unlink(out);
	return 0;
}
