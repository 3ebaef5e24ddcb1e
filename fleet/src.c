/* The fleet's ClickHouse as a store (fleet/src.h): opening (schema check, the hosts in
 * first-push order, every binary with the merged store's id), and the binaries and data
 * readers. Each reader is one aggregating query: ClickHouse groups the rows of every
 * host's latest complete push, only the groups come back, and they are ordered here or
 * there exactly as store/query.c orders the merged store's. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/src.h"

#define FLEET_MAX_HOSTS 1000000

static int ch_fail(struct store *s, struct fleet_src *x, int r)
{
	return store_rows_error(s, r, ch_errmsg(x->ch));
}

static int bad_answer(struct store *s, struct fleet_src *x)
{
	char msg[300];

	snprintf(msg, sizeof(msg), "ClickHouse at %s: malformed answer", ch_url(x->ch));
	return store_rows_error(s, -EPROTO, msg);
}

static int cmp_bin(const void *a, const void *b)
{
	return strcmp(((const struct fleet_bin *)a)->key, ((const struct fleet_bin *)b)->key);
}

const struct fleet_bin *fleet_bin_find(const struct fleet_src *x, const char *key)
{
	struct fleet_bin k = { .key = (char *)key };

	return x->nbins ? bsearch(&k, x->bins, x->nbins, sizeof(k), cmp_bin) : NULL;
}

bool fleet_bin_keys(const struct fleet_src *x, const char *binary, struct tsv_buf *out)
{
	bool any = false;

	tsv_raw(out, "(", 1);
	for (size_t i = 0; i < x->nbins; i++) {
		const struct fleet_bin *b = &x->bins[i];

		if (strcmp(b->build_id, binary) && strcmp(b->path, binary))
			continue;
		if (any)
			tsv_raw(out, ",", 1);
		tsv_sql_str(out, b->key);
		any = true;
	}
	tsv_raw(out, ")", 1);
	return any;
}

void fleet_rows_where(const struct fleet_src *x, const struct store_ctx_filter *f,
		      struct tsv_buf *out)
{
	int64_t since = f->since_ns ? f->since_ns : x->since_ns;
	int64_t until = f->until_ns ? f->until_ns : x->until_ns;

	tsv_printf(out, " alloc_count > 0 AND %s", x->facts);
	if (since)
		tsv_printf(out, " AND bucket_start >= %" PRId64, since);
	if (until)
		tsv_printf(out, " AND bucket_start < %" PRId64, until);
}

/* A shell glob as an anchored RE2 pattern: * and ? become .* and ., [...] and [!...] stay
 * classes, the rest is literal. */
static void glob_regex(struct tsv_buf *b, const char *glob)
{
	tsv_raw(b, "^", 1);
	for (const char *p = glob; *p; p++) {
		if (*p == '*') {
			tsv_raw(b, ".*", 2);
		} else if (*p == '?') {
			tsv_raw(b, ".", 1);
		} else if (*p == '[' && strchr(p + 1, ']')) {    /* [abc], [!abc]: a class */
			const char *end = strchr(p + 2, ']');

			end = end ? end : strchr(p + 1, ']');
			tsv_raw(b, "[", 1);
			if (p[1] == '!') {
				tsv_raw(b, "^", 1);
				p++;
			}
			for (p++; p < end; p++) {
				if (*p == '\\' || *p == '[' || *p == '^')
					tsv_raw(b, "\\", 1);
				tsv_raw(b, p, 1);
			}
			tsv_raw(b, "]", 1);
		} else if (strchr("\\.+()[]{}|^$", *p)) {
			tsv_printf(b, "\\%c", *p);
		} else {
			tsv_raw(b, p, 1);
		}
	}
	tsv_raw(b, "$", 1);
}

/* The hosts in first-push order (their rank), and the visibility conditions. */
static int load_hosts(struct fleet_src *x, const char *glob, char *err, size_t errsz)
{
	struct tsv_buf cond = { 0 }, re = { 0 }, q = { 0 }, rank = { 0 };
	const struct tsv_buf *resp;
	struct tsv_cur cur;
	int r;

	if (glob) {
		glob_regex(&re, glob);
		tsv_raw(&cond, "match(host, ", 12);
		tsv_sql_str(&cond, re.p);
		tsv_raw(&cond, ")", 1);
	} else {
		tsv_raw(&cond, "1", 1);
	}
	tsv_printf(&q, "SELECT host FROM " FLEET_DB ".pushes WHERE %s GROUP BY host"
		   " ORDER BY min(push_id), host", cond.p);
	r = q.oom || cond.oom ? -ENOMEM : ch_exec(x->ch, q.p, NULL, &resp);
	if (r) {
		snprintf(err, errsz, "%s", r == -ENOMEM ? "out of memory" : ch_errmsg(x->ch));
		goto out;
	}
	/* indexOf(['a', 'b'], host); no host at all (nothing pushed, or none matches): 0,
	 * and the conditions below select nothing. */
	tsv_raw(&rank, "indexOf([''", 11);
	tsv_cur_init(&cur, resp);
	for (size_t n = 0; tsv_next_row(&cur) && n < FLEET_MAX_HOSTS; n++) {
		tsv_raw(&rank, ",", 1);
		tsv_sql_str(&rank, tsv_get_str(&cur));
	}
	tsv_raw(&rank, "], host) - 1", 12);
	tsv_reset(&q);
	tsv_printf(&q, "(host, push_id) GLOBAL IN (SELECT host, max(push_id) FROM " FLEET_DB
		   ".pushes WHERE %s GROUP BY host)", cond.p);
	x->dims = q.oom ? NULL : strdup(q.p);
	tsv_reset(&q);
	tsv_printf(&q, "(host, run_id, push_id) GLOBAL IN (SELECT host, run_id, max(push_id) FROM "
		   FLEET_DB ".pushes WHERE %s GROUP BY host, run_id)", cond.p);
	x->facts = q.oom ? NULL : strdup(q.p);
	x->rank = rank.oom ? NULL : strdup(rank.p);
	if (!x->dims || !x->facts || !x->rank) {
		snprintf(err, errsz, "out of memory");
		r = -ENOMEM;
	}
out:
	tsv_free(&cond);
	tsv_free(&re);
	tsv_free(&q);
	tsv_free(&rank);
	return r;
}

static int add_bin(struct fleet_src *x, struct tsv_cur *cur)
{
	struct fleet_bin *v = realloc(x->bins, (x->nbins + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	x->bins = v;
	v = &x->bins[x->nbins];
	v->key = strdup(tsv_get_str(cur));
	v->build_id = strdup(tsv_get_str(cur));
	v->path = strdup(tsv_get_str(cur));
	v->processes = 0;
	v->id = (int64_t)++x->nbins;
	return v->key && v->build_id && v->path ? 0 : -ENOMEM;
}

/* Every binary, numbered as merge numbers them: by (host rank, the host's own id). */
static int load_bins(struct fleet_src *x, char *err, size_t errsz)
{
	const struct tsv_buf *resp = NULL;
	struct tsv_cur cur;
	int r = ch_query(x->ch, &resp, "SELECT bin_key, argMin(build_id, o), argMin(path, o) FROM"
			 " (SELECT bin_key, build_id, path, tuple(%s, src_id) AS o FROM " FLEET_DB
			 ".binaries WHERE %s) GROUP BY bin_key ORDER BY min(o)", x->rank, x->dims);

	for (tsv_cur_init(&cur, resp); !r && tsv_next_row(&cur);)
		r = add_bin(x, &cur);
	if (!r && !cur.bad && x->nbins)
		qsort(x->bins, x->nbins, sizeof(*x->bins), cmp_bin);
	if (!r && !cur.bad)
		r = ch_query(x->ch, &resp, "SELECT bin_key, count() FROM " FLEET_DB ".processes"
			     " WHERE %s GROUP BY bin_key", x->dims);
	for (tsv_cur_init(&cur, resp); !r && tsv_next_row(&cur);) {
		const struct fleet_bin *b = fleet_bin_find(x, tsv_get_str(&cur));
		uint64_t n = tsv_get_u64(&cur);

		if (b)
			((struct fleet_bin *)b)->processes = n;
	}
	if (r || cur.bad)
		snprintf(err, errsz, "%s", r == -ENOMEM ? "out of memory" : r ? ch_errmsg(x->ch) :
			 "malformed answer from ClickHouse");
	return r ? r : cur.bad ? -EPROTO : 0;
}

/* ---- binaries ---- */

struct bin_row { const struct fleet_bin *b; uint64_t contexts, alloc_count, total_size; };

static int cmp_bin_row(const void *pa, const void *pb)
{
	const struct bin_row *a = pa, *b = pb;

	if (a->total_size != b->total_size)      /* ORDER BY ts DESC, b.id */
		return (int64_t)a->total_size > (int64_t)b->total_size ? -1 : 1;
	return a->b->id < b->b->id ? -1 : a->b->id > b->b->id;
}

static int read_bin_sums(struct fleet_src *x, struct bin_row *rows, const char *sql)
{
	const struct tsv_buf *resp;
	struct tsv_cur cur;
	int r = ch_exec(x->ch, sql, NULL, &resp);

	if (r)
		return r;
	for (tsv_cur_init(&cur, resp); tsv_next_row(&cur);) {
		const struct fleet_bin *b = fleet_bin_find(x, tsv_get_str(&cur));
		uint64_t v1 = tsv_get_u64(&cur), v2 = tsv_get_u64(&cur), v3 = tsv_get_u64(&cur);

		if (!b)
			continue;
		struct bin_row *row = &rows[b - x->bins];

		row->contexts += v1;
		row->alloc_count += v2;
		row->total_size += v3;
	}
	return cur.bad ? -EPROTO : 0;
}

static int src_binaries(void *ctx, struct store *s, store_binary_cb cb, void *arg)
{
	struct fleet_src *x = ctx;
	struct bin_row *rows = calloc(x->nbins + 1, sizeof(*rows));
	struct tsv_buf q = { 0 };
	size_t n = 0;
	int r;

	if (!rows)
		return store_rows_error(s, -ENOMEM, "out of memory");
	tsv_printf(&q, "SELECT bin_key, count(), 0, 0 FROM (SELECT DISTINCT bin_key, stack_hash FROM "
		   FLEET_DB ".contexts WHERE %s) GROUP BY bin_key", x->dims);
	r = q.oom ? -ENOMEM : read_bin_sums(x, rows, q.p);
	tsv_reset(&q);
	tsv_printf(&q, "SELECT bin_key, 0, sum(alloc_count), sum(total_size) FROM " FLEET_DB ".mib"
		   " WHERE %s GROUP BY bin_key", x->facts);
	if (!r)
		r = q.oom ? -ENOMEM : read_bin_sums(x, rows, q.p);
	tsv_free(&q);
	if (r) {
		free(rows);
		return r == -EPROTO ? bad_answer(s, x) : r == -ENOMEM ?
			store_rows_error(s, r, "out of memory") : ch_fail(s, x, r);
	}
	for (size_t i = 0; i < x->nbins; i++)
		if (x->bins[i].processes) {
			rows[i].b = &x->bins[i];
			rows[n++] = rows[i];
		}
	qsort(rows, n, sizeof(*rows), cmp_bin_row);
	for (size_t i = 0; !r && i < n; i++) {
		struct store_binary_row row = {
			.id = rows[i].b->id, .build_id = rows[i].b->build_id, .path = rows[i].b->path,
			.processes = rows[i].b->processes, .contexts = rows[i].contexts,
			.alloc_count = rows[i].alloc_count, .total_size = rows[i].total_size,
		};
		r = cb(&row, arg);
	}
	free(rows);
	return r;
}

/* ---- data symbols ---- */

struct data_row { struct store_data_row r; double density; };

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* store/query.c's ORDER BY key DESC, build_id, path, symbol, address (SQLite compares
 * the integers as int64 and the text bytewise). */
static int cmp_data(const struct data_row *a, const struct data_row *b, enum store_data_sort sort)
{
	int c = 0;

	switch (sort) {
	case STORE_DATA_SORT_DENSITY:
		c = a->density > b->density ? -1 : a->density < b->density;
		break;
	case STORE_DATA_SORT_SIZE:
		c = -cmp_i64((int64_t)a->r.size, (int64_t)b->r.size);
		break;
	default:
		c = -cmp_i64((int64_t)a->r.access_samples, (int64_t)b->r.access_samples);
		if (!c)
			c = -cmp_i64((int64_t)a->r.est_accesses, (int64_t)b->r.est_accesses);
	}
	if (!c)
		c = strcmp(a->r.build_id, b->r.build_id);
	if (!c)
		c = strcmp(a->r.binary, b->r.binary);
	if (!c)
		c = strcmp(a->r.symbol, b->r.symbol);
	return c ? c : cmp_i64((int64_t)a->r.address, (int64_t)b->r.address);
}

static int cmp_data_q(const void *a, const void *b, void *sort)
{
	return cmp_data(a, b, *(const enum store_data_sort *)sort);
}

static int data_query(struct fleet_src *x, const struct store_data_filter *f, struct tsv_buf *q)
{
	int64_t since = f->since_ns ? f->since_ns : x->since_ns;
	int64_t until = f->until_ns ? f->until_ns : x->until_ns;

	tsv_printf(q, "SELECT bin_key, symbol, address, max(has_section), maxIf(section, has_section = 1),"
		   " max(size), sum(access_samples), sum(est_accesses), count(), sum(greatest("
		   "if(run_ended > 0, run_ended, toInt64(%" PRId64 ")) - run_started, toInt64(0)))"
		   " FROM " FLEET_DB ".data WHERE %s AND symbol != ''", f->now_ns, x->facts);
	if (f->binary) {
		tsv_raw(q, " AND bin_key IN ", 16);
		if (!fleet_bin_keys(x, f->binary, q))
			return 1;
	}
	if (since)
		tsv_printf(q, " AND run_started >= %" PRId64, since);
	if (until)
		tsv_printf(q, " AND run_started < %" PRId64, until);
	tsv_raw(q, " GROUP BY bin_key, symbol, address", 34);
	return q->oom ? -ENOMEM : 0;
}

static int read_data(struct fleet_src *x, struct tsv_cur *cur, struct data_row *d)
{
	const struct fleet_bin *b = fleet_bin_find(x, tsv_get_str(cur));
	struct store_data_row *r = &d->r;

	r->symbol = tsv_get_str(cur);
	r->address = tsv_get_u64(cur);
	bool has_section = tsv_get_u64(cur);

	r->section = tsv_get_str(cur);
	if (!has_section)
		r->section = NULL;
	r->size = tsv_get_u64(cur);
	r->access_samples = tsv_get_u64(cur);
	r->est_accesses = tsv_get_u64(cur);
	r->runs = tsv_get_u64(cur);
	r->observed_ns = (uint64_t)tsv_get_i64(cur);
	if (!b)
		return -EPROTO;
	r->build_id = b->build_id;
	r->binary = b->path;
	/* DATA_DENSITY_SQL's arithmetic, in its order. */
	d->density = (double)(int64_t)r->est_accesses / (double)((int64_t)r->size > 1 ?
		(int64_t)r->size : 1) / fmax((double)(int64_t)r->observed_ns / 1e9, 0.001);
	return cur->bad ? -EPROTO : 0;
}

static int src_data(void *ctx, struct store *s, const struct store_data_filter *f,
		    store_data_cb cb, void *arg)
{
	static const struct store_data_filter all;
	struct fleet_src *x = ctx;
	struct tsv_buf q = { 0 };
	const struct tsv_buf *resp;
	struct data_row *rows = NULL;
	size_t n = 0, cap = 0;
	struct tsv_cur cur;
	int r;

	if (!f)
		f = &all;
	r = data_query(x, f, &q);
	if (r == 0)
		r = ch_exec(x->ch, q.p, NULL, &resp);
	tsv_free(&q);
	if (r)
		return r > 0 ? 0 : r == -ENOMEM ? store_rows_error(s, r, "out of memory") :
			ch_fail(s, x, r);
	for (tsv_cur_init(&cur, resp); !r && tsv_next_row(&cur); n++) {
		if (n == cap) {
			struct data_row *v = realloc(rows, (cap = cap ? 2 * cap : 256) * sizeof(*v));

			if (!v) {
				free(rows);
				return store_rows_error(s, -ENOMEM, "out of memory");
			}
			rows = v;
		}
		r = read_data(x, &cur, &rows[n]);
	}
	if (r) {
		free(rows);
		return bad_answer(s, x);
	}
	if (n)
		qsort_r(rows, n, sizeof(*rows), cmp_data_q, (void *)&f->sort);
	for (size_t i = 0; !r && i < n && (!f->limit || i < f->limit); i++)
		r = cb(&rows[i].r, arg);
	free(rows);
	return r;
}

/* ---- open, close ---- */

static void src_close(void *ctx)
{
	struct fleet_src *x = ctx;

	if (!x)
		return;
	ch_close(x->ch);
	for (size_t i = 0; i < x->nbins; i++) {
		free(x->bins[i].key);
		free(x->bins[i].build_id);
		free(x->bins[i].path);
	}
	free(x->bins);
	free(x->rank);
	free(x->dims);
	free(x->facts);
	fleet_fcache_free(x->fc);
	free(x);
}

static const struct store_rows_ops src_ops = {
	.contexts = fleet_src_contexts, .buckets = fleet_src_buckets,
	.binaries = src_binaries, .data = src_data, .runs = fleet_src_runs,
	.access_classes = fleet_src_access_classes, .close = src_close,
};

int fleet_open_store(struct store **out, const struct fleet_src_opts *o, char *err, size_t errsz)
{
	struct fleet_src *x = calloc(1, sizeof(*x));
	int r;

	*out = NULL;
	if (!x) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	x->since_ns = o->since_ns;
	x->until_ns = o->until_ns;
	r = ch_open(&x->ch, o->url, err, errsz);
	if (!r)
		r = fleet_check_schema(x->ch, err, errsz);
	if (!r)
		r = load_hosts(x, o->host_glob, err, errsz);
	if (!r)
		r = load_bins(x, err, errsz);
	if (!r && (r = store_open_rows(out, &src_ops, x)) < 0)
		snprintf(err, errsz, "out of memory");
	if (r)
		src_close(x);
	return r;
}
