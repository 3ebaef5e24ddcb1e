/* The fleet's runs and access classes (fleet/src.h): the inputs of the evidence rule
 * (reporter/classify.c), read from every host's latest push of each run, so the fleet
 * classifies as `memprofd merge` of the same stores does. Runs are numbered 1.. in
 * (host's first-push order, run id) order, as merge appends them, and come most recent
 * (highest number) first; access classes come summed per class (run_id 0), which is all
 * the evidence rule reads. One query each; the answer is kept while callbacks run. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "fleet/fleet.h"
#include "fleet/src.h"

#define FLEET_MAX_RUNS 10000000

static int fail(struct store *s, struct fleet_src *x, int r)
{
	return r == -ENOMEM ? store_rows_error(s, r, "out of memory") :
		store_rows_error(s, r, ch_errmsg(x->ch));
}

static int malformed(struct store *s, struct fleet_src *x)
{
	char msg[300];

	snprintf(msg, sizeof(msg), "ClickHouse at %s: malformed answer", ch_url(x->ch));
	return store_rows_error(s, -EPROTO, msg);
}

/* One answer, owned: it outlives the callbacks' own use of the connection. */
static int fetch(struct fleet_src *x, struct tsv_buf *q, struct tsv_buf *out)
{
	const struct tsv_buf *resp;
	int r = q->oom ? -ENOMEM : ch_exec(x->ch, q->p, NULL, &resp);

	tsv_free(q);
	if (!r)
		ch_take_response(x->ch, out);
	return r;
}

int fleet_src_runs(void *ctx, struct store *s, store_run_cb cb, void *arg)
{
	struct fleet_src *x = ctx;
	struct tsv_buf q = { 0 }, ans = { 0 };
	struct tsv_cur cur;
	size_t n = 0;
	int r;

	tsv_printf(&q, "SELECT command, alloc_mode, started_ns, ended_ns, status FROM " FLEET_DB
		   ".runs WHERE %s ORDER BY %s DESC, run_id DESC LIMIT %d", x->facts, x->rank,
		   FLEET_MAX_RUNS);
	r = fetch(x, &q, &ans);
	if (r)
		return fail(s, x, r);
	/* Numbered from the last row (the first run) up: one row per line (TSV escapes a
	 * newline inside a field), so the rows are counted first. */
	for (size_t i = 0; i < ans.len; i++)
		n += ans.p[i] == '\n';
	tsv_cur_init(&cur, &ans);
	while (!r && tsv_next_row(&cur)) {
		struct store_run_row row = { .id = (int64_t)n-- };

		row.run.command = tsv_get_str(&cur);
		row.run.alloc_mode = tsv_get_str(&cur);
		row.run.started_ns = tsv_get_i64(&cur);
		row.stats.ended_ns = tsv_get_i64(&cur);
		row.stats.status = tsv_get_str(&cur);
		if (cur.bad)
			break;
		r = cb(&row, arg);
	}
	bool bad = cur.bad;

	tsv_free(&ans);
	return !r && bad ? malformed(s, x) : r;
}

int fleet_src_access_classes(void *ctx, struct store *s, int64_t run_id,
			     store_access_class_cb cb, void *arg)
{
	struct fleet_src *x = ctx;
	struct tsv_buf q = { 0 }, ans = { 0 };
	struct tsv_cur cur;
	int r;

	if (run_id)
		return store_rows_error(s, -EOPNOTSUPP, "one run's access classes: not available "
					"from the fleet (only their sums)");
	tsv_printf(&q, "SELECT class, sum(samples), sum(est_accesses) FROM " FLEET_DB
		   ".access_classes WHERE %s GROUP BY class ORDER BY class", x->facts);
	r = fetch(x, &q, &ans);
	if (r)
		return fail(s, x, r);
	tsv_cur_init(&cur, &ans);
	while (!r && tsv_next_row(&cur)) {
		struct store_access_class_row row = { .run_id = 0 };

		row.cls = tsv_get_str(&cur);
		row.samples = tsv_get_u64(&cur);
		row.est_accesses = tsv_get_u64(&cur);
		if (cur.bad)
			break;
		r = cb(&row, arg);
	}
	bool bad = cur.bad;

	tsv_free(&ans);
	return !r && bad ? malformed(s, x) : r;
}
