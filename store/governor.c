/* The overhead governor's record per daemon run (schema v7 tables governor and
 * governor_sources, v8 daemon_targets). The writer replaces a run's record at every tick,
 * sources and targets included, so a reader sees one consistent tick; readers check that
 * the tables exist instead of comparing schema numbers, so an older store simply has no
 * governor records (or no targets in them). */
#include <errno.h>
#include <string.h>
#include <sqlite3.h>

#include "store/store.h"
#include "base/cleanup.h"
#include "store/stmt.h"

static const char put_sql[] =
	"INSERT OR REPLACE INTO governor(run_id, at_ns, budget, cpu, min_scale, ticks, lowered,"
	" raised, action, changed_ns, decision, history, rss_bytes, cache_bytes, procs_held,"
	" aggs_held) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";
static const char del_src_sql[] = "DELETE FROM governor_sources WHERE run_id = ?1";
static const char put_src_sql[] =
	"INSERT INTO governor_sources(run_id, source, scale, rate, unit, events)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
static const char put_tgt_sql[] =
	"INSERT OR REPLACE INTO daemon_targets(run_id, traced, unsampled, skipped, unsampled_list)"
	" VALUES (?1, ?2, ?3, ?4, ?5)";
static const char get_tgt_sql[] =
	"SELECT traced, unsampled, skipped, unsampled_list FROM daemon_targets WHERE run_id = ?1";
static const char get_sql[] =
	"SELECT run_id, at_ns, budget, cpu, min_scale, ticks, lowered, raised, action,"
	" changed_ns, decision, history, rss_bytes, cache_bytes, procs_held, aggs_held"
	" FROM governor WHERE ?1 = 0 OR run_id = ?1 ORDER BY run_id DESC";
static const char get_src_sql[] =
	"SELECT source, scale, rate, unit, events FROM governor_sources WHERE run_id = ?1"
	" ORDER BY source";

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int step_done(struct store *s, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, what);
}

int store_put_governor(struct store *s, int64_t run_id, const struct store_governor *g)
{
	if (run_id <= 0 || !g || !g->action || !g->decision || g->nsrc > STORE_GOV_MAX_SOURCES)
		return store__error(s, -EINVAL, "store_put_governor: bad arguments");
	sqlite3_stmt *st = store__stmt(s, put_sql);
	int r;

	if (!st)
		return -EIO;
	{
		_cleanup_reset_ sqlite3_stmt *guard = st;
		const int64_t ints[] = { (int64_t)g->ticks, (int64_t)g->lowered, (int64_t)g->raised };

		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int64(st, 2, g->at_ns);
		sqlite3_bind_double(st, 3, g->budget);
		sqlite3_bind_double(st, 4, g->cpu);
		sqlite3_bind_double(st, 5, g->min_scale);
		for (int i = 0; i < 3; i++)
			sqlite3_bind_int64(st, 6 + i, ints[i]);
		bind_text(st, 9, g->action);
		sqlite3_bind_int64(st, 10, g->changed_ns);
		bind_text(st, 11, g->decision);
		bind_text(st, 12, g->history && *g->history ? g->history : NULL);
		sqlite3_bind_int64(st, 13, (int64_t)g->rss_bytes);
		sqlite3_bind_int64(st, 14, (int64_t)g->cache_bytes);
		sqlite3_bind_int64(st, 15, (int64_t)g->procs_held);
		sqlite3_bind_int64(st, 16, (int64_t)g->aggs_held);
		if ((r = step_done(s, st, "writing the governor record")))
			return r;
	}
	if (!(st = store__stmt(s, del_src_sql)))
		return -EIO;
	{
		_cleanup_reset_ sqlite3_stmt *guard = st;

		sqlite3_bind_int64(st, 1, run_id);
		if ((r = step_done(s, st, "writing the governor record")))
			return r;
	}
	if (!(st = store__stmt(s, put_tgt_sql)))
		return -EIO;
	{
		_cleanup_reset_ sqlite3_stmt *guard = st;
		const struct store_gov_targets *t = &g->targets;

		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int64(st, 2, (int64_t)t->traced);
		sqlite3_bind_int64(st, 3, (int64_t)t->unsampled);
		sqlite3_bind_int64(st, 4, (int64_t)t->skipped);
		bind_text(st, 5, t->unsampled_list && *t->unsampled_list ? t->unsampled_list : NULL);
		if ((r = step_done(s, st, "writing the daemon's targets")))
			return r;
	}
	for (unsigned i = 0; i < g->nsrc; i++) {
		const struct store_gov_source *src = &g->src[i];

		if (!src->name || !*src->name)
			return store__error(s, -EINVAL, "store_put_governor: a source without a name");
		if (!(st = store__stmt(s, put_src_sql)))
			return -EIO;
		_cleanup_reset_ sqlite3_stmt *guard = st;

		sqlite3_bind_int64(st, 1, run_id);
		bind_text(st, 2, src->name);
		sqlite3_bind_double(st, 3, src->scale);
		if (src->rate >= 0)
			sqlite3_bind_double(st, 4, src->rate);
		bind_text(st, 5, src->rate >= 0 ? src->unit : NULL);
		sqlite3_bind_int64(st, 6, (int64_t)src->events);
		if ((r = step_done(s, st, "writing a governor source")))
			return r;
	}
	return 0;
}

/* 1 with the governor tables (*targets: daemon_targets too), 0 without, or -errno. */
static int has_tables(struct store *s, bool *targets)
{
	int r = store__has(s, "governor", NULL), t;

	if (r > 0)
		r = store__has(s, "governor_sources", NULL);
	if (r <= 0)
		return r;
	if ((t = store__has(s, "daemon_targets", NULL)) < 0)
		return t;
	*targets = t > 0;
	return 1;
}

/* The run's targets into g (a copy of the list, sqlite3_free'd by free_sources). */
static int load_targets(struct store *s, int64_t run_id, struct store_governor *g)
{
	sqlite3_stmt *st = store__stmt(s, get_tgt_sql);
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *list = (const char *)sqlite3_column_text(st, 3);

		g->targets = (struct store_gov_targets){
			.traced = (uint64_t)sqlite3_column_int64(st, 0),
			.unsampled = (uint64_t)sqlite3_column_int64(st, 1),
			.skipped = (uint64_t)sqlite3_column_int64(st, 2),
			.unsampled_list = list ? sqlite3_mprintf("%s", list) : NULL,
		};
		return 0;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "reading the daemon's targets");
}

static int load_sources(struct store *s, int64_t run_id, struct store_governor *g)
{
	sqlite3_stmt *st = store__stmt(s, get_src_sql);
	int rc;

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	g->nsrc = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && g->nsrc < STORE_GOV_MAX_SOURCES) {
		struct store_gov_source *src = &g->src[g->nsrc++];
		bool has_rate = sqlite3_column_type(st, 2) != SQLITE_NULL;

		/* Pointers into the row: valid until the next step, hence the copy below. */
		*src = (struct store_gov_source){
			.name = (const char *)sqlite3_column_text(st, 0),
			.scale = sqlite3_column_double(st, 1),
			.rate = has_rate ? sqlite3_column_double(st, 2) : -1,
			.unit = (const char *)sqlite3_column_text(st, 3),
			.events = (uint64_t)sqlite3_column_int64(st, 4),
		};
		src->name = src->name ? sqlite3_mprintf("%s", src->name) : NULL;
		src->unit = src->unit ? sqlite3_mprintf("%s", src->unit) : NULL;
	}
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store__fail(s, rc, "reading governor sources");
}

static void free_sources(struct store_governor *g)
{
	for (unsigned i = 0; i < g->nsrc; i++) {
		sqlite3_free((void *)g->src[i].name);
		sqlite3_free((void *)g->src[i].unit);
	}
	g->nsrc = 0;
	sqlite3_free((void *)g->targets.unsampled_list);
	g->targets.unsampled_list = NULL;
}

int store_query_governor(struct store *s, int64_t run_id, store_governor_cb cb, void *arg)
{
	bool targets = false;
	int rc = has_tables(s, &targets);

	if (rc <= 0)
		return rc;
	sqlite3_stmt *st = store__stmt(s, get_sql);

	if (!st)
		return -EIO;
	_cleanup_reset_ sqlite3_stmt *guard = st;

	sqlite3_bind_int64(st, 1, run_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_governor g = {
			.at_ns = sqlite3_column_int64(st, 1),
			.budget = sqlite3_column_double(st, 2),
			.cpu = sqlite3_column_double(st, 3),
			.min_scale = sqlite3_column_double(st, 4),
			.ticks = (uint64_t)sqlite3_column_int64(st, 5),
			.lowered = (uint64_t)sqlite3_column_int64(st, 6),
			.raised = (uint64_t)sqlite3_column_int64(st, 7),
			.action = (const char *)sqlite3_column_text(st, 8),
			.changed_ns = sqlite3_column_int64(st, 9),
			.decision = (const char *)sqlite3_column_text(st, 10),
			.history = (const char *)sqlite3_column_text(st, 11),
			.rss_bytes = (uint64_t)sqlite3_column_int64(st, 12),
			.cache_bytes = (uint64_t)sqlite3_column_int64(st, 13),
			.procs_held = (uint64_t)sqlite3_column_int64(st, 14),
			.aggs_held = (uint64_t)sqlite3_column_int64(st, 15),
		};
		int64_t id = sqlite3_column_int64(st, 0);
		int r = load_sources(s, id, &g);

		if (!r && targets)
			r = load_targets(s, id, &g);
		if (!r)
			r = cb(id, &g, arg);
		free_sources(&g);
		if (r)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : store__fail(s, rc, "reading the governor record");
}
