/* Fleet readers of allocation contexts (fleet/src.h): store_query_contexts() and
 * store_query_buckets() over ClickHouse. One query aggregates the MIB rows by context
 * (bin_key, stack_hash) as mib_combine() and mib_hist_merge() do (sum, min, max, the row
 * whose last object died last by argMax over (dealloc_ts, alloc_ts, alloc_cpu,
 * dealloc_cpu), sumForEach of the histograms), joins each context's merged-store id and
 * frames (the first pushed host's stack, as merge keeps the first input's), and orders and limits there; frames are then read FLEET_IN_BATCH at a time
 * for the contexts of each chunk and kept for the life of the store. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/src.h"
#include "store/alloc_trim.h"

#define FLEET_CTX_CHUNK 5000       /* contexts parsed and emitted per round of frame reads */
#define FLEET_PREFETCH_MIN 2000    /* from this many contexts on, all frames in one query */

/* ---- frames, by (binary key, offset) ---- */

struct cframe { char *key; uint64_t offset; struct store_frame f; };

struct fleet_fcache {
	struct cframe *v;
	size_t n, cap;
	uint32_t *slots;               /* index + 1, 0 empty; load factor <= 1/2 */
	size_t nslots;
};

static size_t fslot(const struct fleet_fcache *c, const char *key, uint64_t off)
{
	uint64_t h = fleet_fnv(fleet_fnv(FLEET_FNV_SEED, key, strlen(key)), &off, sizeof(off));

	return (size_t)h & (c->nslots - 1);
}

static struct cframe *fc_get(struct fleet_fcache *c, const char *key, uint64_t off)
{
	if (!c || !c->nslots)
		return NULL;
	for (size_t i = fslot(c, key, off);; i = (i + 1) & (c->nslots - 1)) {
		uint32_t v = c->slots[i];

		if (!v)
			return NULL;
		if (c->v[v - 1].offset == off && !strcmp(c->v[v - 1].key, key))
			return &c->v[v - 1];
	}
}

static int fc_rehash(struct fleet_fcache *c)
{
	size_t ns = c->nslots ? 2 * c->nslots : 4096;
	uint32_t *sl = calloc(ns, sizeof(*sl));

	if (!sl)
		return -ENOMEM;
	free(c->slots);
	c->slots = sl;
	c->nslots = ns;
	for (size_t k = 0; k < c->n; k++) {
		size_t i = fslot(c, c->v[k].key, c->v[k].offset);

		while (c->slots[i])
			i = (i + 1) & (ns - 1);
		c->slots[i] = (uint32_t)k + 1;
	}
	return 0;
}

/* Adds a frame (the cache owns what f points to from now on). */
static int fc_put(struct fleet_fcache *c, struct cframe *f)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct cframe *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	if (2 * (c->n + 1) > c->nslots && fc_rehash(c))
		return -ENOMEM;
	size_t i = fslot(c, f->key, f->offset);

	while (c->slots[i])
		i = (i + 1) & (c->nslots - 1);
	c->v[c->n] = *f;
	c->slots[i] = (uint32_t)++c->n;
	return 0;
}

static void frame_free(struct cframe *f)
{
	for (unsigned i = 0; i < f->f.nlines; i++) {
		free((char *)f->f.lines[i].function);
		free((char *)f->f.lines[i].mangled);
		free((char *)f->f.lines[i].file);
	}
	free((void *)f->f.lines);
	free((char *)f->f.function);
	free((char *)f->f.mangled);
	free(f->key);
}

void fleet_fcache_free(struct fleet_fcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		frame_free(&c->v[i]);
	free(c->v);
	free(c->slots);
	free(c);
}

static char *dup_if(bool has, const char *s, bool *oom)
{
	char *d;

	if (!has)
		return NULL;
	d = strdup(s);
	*oom |= !d;
	return d;
}

/* The ten line arrays of one frames answer row, in schema.sql's order, into f's lines. */
static int read_lines(struct tsv_cur *cur, struct cframe *f, bool *oom)
{
	char *fn[STORE_MAX_LINES], *mg[STORE_MAX_LINES], *file[STORE_MAX_LINES];
	uint64_t num[7][STORE_MAX_LINES];   /* has_fn, has_mg, has_file, line, col, decl, inl */
	unsigned n[10] = { 0 };
	char **strs[3] = { fn, mg, file };

	for (int a = 0; a < 10; a++) {
		bool str = a == 0 || a == 2 || a == 4;

		tsv_arr_begin(cur);
		while (tsv_arr_more(cur)) {
			char *s = str ? tsv_arr_get_str(cur) : NULL;
			uint64_t v = str ? 0 : tsv_arr_get_u64(cur);

			if (n[a] >= STORE_MAX_LINES)
				continue;
			if (str)
				strs[a / 2][n[a]] = s;
			else
				num[a < 6 ? a / 2 : a - 3][n[a]] = v;
			n[a]++;
		}
		tsv_arr_end(cur);
	}
	if (!n[0])
		return 0;
	struct store_line *l = calloc(n[0], sizeof(*l));

	if (!l)
		return -ENOMEM;
	for (unsigned i = 0; i < n[0]; i++)
		l[i] = (struct store_line){
			.function = dup_if(num[0][i], fn[i], oom),
			.mangled = dup_if(num[1][i], mg[i], oom),
			.file = dup_if(num[2][i], file[i], oom),
			.line = (uint32_t)num[3][i], .column = (uint32_t)num[4][i],
			.decl_line = (uint32_t)num[5][i], .inlined = num[6][i] != 0 };
	f->f.lines = l;
	f->f.nlines = n[0];
	return 0;
}

static int read_frame_row(struct fleet_src *x, struct tsv_cur *cur)
{
	struct cframe f = { 0 };
	bool oom = false;
	char *key = tsv_get_str(cur);
	const struct fleet_bin *b = fleet_bin_find(x, key);

	f.offset = tsv_get_u64(cur);
	bool hf = tsv_get_u64(cur);
	char *fn = tsv_get_str(cur);
	bool hm = tsv_get_u64(cur);
	char *mg = tsv_get_str(cur);

	f.key = strdup(key);
	f.f.offset = f.offset;
	f.f.function = dup_if(hf, fn, &oom);
	f.f.mangled = dup_if(hm, mg, &oom);
	f.f.build_id = b ? b->build_id : "";
	f.f.path = b ? b->path : "";
	int r = read_lines(cur, &f, &oom);

	if (!r && (oom || !f.key))
		r = -ENOMEM;
	if (!r && cur->bad)
		r = -EPROTO;
	if (!r && !fc_get(x->fc, f.key, f.offset))
		return fc_put(x->fc, &f) ? (frame_free(&f), -ENOMEM) : 0;
	frame_free(&f);
	return r;
}

#define LINE_ARR(c) ", argMinIf(" c ", r, n > 0)"
/* Reads the frames that `cond` selects (an SQL condition on bin_key, offset) into the
 * cache; the ones cached already are skipped. */
static int read_frames(struct fleet_src *x, const char *cond)
{
	struct tsv_buf q = { 0 };
	const struct tsv_buf *resp;
	struct tsv_cur cur;
	int r;

	tsv_printf(&q, "SELECT bin_key, offset, max(has_function), argMinIf(function, r, has_function = 1),"
		   " max(has_mangled), argMinIf(mangled, r, has_mangled = 1)"
		   LINE_ARR("l_function") LINE_ARR("l_has_function") LINE_ARR("l_mangled")
		   LINE_ARR("l_has_mangled") LINE_ARR("l_file") LINE_ARR("l_has_file")
		   LINE_ARR("l_line") LINE_ARR("l_col") LINE_ARR("l_decl") LINE_ARR("l_inlined")
		   " FROM (SELECT bin_key, offset, has_function, function, has_mangled, mangled,"
		   " l_function, l_has_function, l_mangled, l_has_mangled, l_file, l_has_file, l_line,"
		   " l_col, l_decl, l_inlined, %s AS r, length(l_function) AS n FROM " FLEET_DB ".frames"
		   " WHERE %s AND %s) GROUP BY bin_key, offset", x->rank, x->dims, cond);
	r = q.oom ? -ENOMEM : ch_exec(x->ch, q.p, NULL, &resp);
	tsv_free(&q);
	for (tsv_cur_init(&cur, resp); !r && tsv_next_row(&cur);)
		r = read_frame_row(x, &cur);
	return r;
}

/* ---- contexts ---- */

struct pctx {                      /* one parsed context of the answer */
	int64_t id;
	struct mib mib;
	struct mib_hist hist;
	const char *bin_key;
	char **fkey;
	uint64_t *foff;
	unsigned nframes;
	bool truncated;                /* cut on any host (merge: truncated if any input's is) */
};

static void pctx_free(struct pctx *p)
{
	mib_hist_free(&p->hist);
	free(p->fkey);
	free(p->foff);
}

static int parse_frames(struct tsv_cur *cur, struct pctx *p)
{
	size_t cap = 0;

	for (int pass = 0; pass < 2; pass++) {
		unsigned n = 0;

		tsv_arr_begin(cur);
		while (tsv_arr_more(cur)) {
			if (n >= STORE_MAX_FRAMES)
				return -E2BIG;
			if (n == cap) {
				cap = cap ? 2 * cap : 32;
				char **k = realloc(p->fkey, cap * sizeof(*k));
				uint64_t *o = k ? realloc(p->foff, cap * sizeof(*o)) : NULL;

				if (k)
					p->fkey = k;
				if (!k || !o)
					return -ENOMEM;
				p->foff = o;
			}
			if (pass)
				p->foff[n++] = tsv_arr_get_u64(cur);
			else
				p->fkey[n++] = tsv_arr_get_str(cur);
		}
		tsv_arr_end(cur);
		p->nframes = n;
	}
	return cur->bad ? -EPROTO : 0;
}

/* The histogram array into p->hist, as it came (ClickHouse's sumForEach already merged). */
static int parse_hist(struct tsv_cur *cur, struct pctx *p)
{
	uint32_t cap = 0;

	tsv_arr_begin(cur);
	while (tsv_arr_more(cur)) {
		if (p->hist.len >= MIB_HIST_MAX_LEN)
			return -E2BIG;
		if (p->hist.len == cap) {
			cap = cap ? 2 * cap : 64;
			uint64_t *v = realloc(p->hist.v, (size_t)cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			p->hist.v = v;
		}
		p->hist.v[p->hist.len++] = tsv_arr_get_u64(cur);
	}
	tsv_arr_end(cur);
	return 0;
}

/* A density extreme from its bits (fleet/push.c col_density). */
static double density_of(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

static int parse_ctx(struct tsv_cur *cur, struct pctx *p)
{
	int r;

	memset(p, 0, sizeof(*p));
	p->bin_key = tsv_get_str(cur);
	tsv_get_str(cur);                /* stack_hash */
	p->id = tsv_get_i64(cur);
#define READ_FIELD(f, agg) p->mib.f = tsv_get_u64(cur);
	STORE__MIB_FIELDS(READ_FIELD)
	STORE__MIB_V9_FIELDS(READ_FIELD)
#undef READ_FIELD
	r = parse_hist(cur, p);
	if (!r) {
		p->mib.has_density = tsv_get_u64(cur) != 0;
		p->mib.min_access_density = density_of(tsv_get_u64(cur));
		p->mib.max_access_density = density_of(tsv_get_u64(cur));
		p->mib.min_lifetime_access_density = density_of(tsv_get_u64(cur));
		p->mib.max_lifetime_access_density = density_of(tsv_get_u64(cur));
		p->mib.watch_hits = tsv_get_u64(cur);
		p->mib.watch_ns = tsv_get_u64(cur);
		p->mib.access_est_err = tsv_get_u64(cur);
		p->mib.total_access_bytes = tsv_get_u64(cur);
		r = parse_frames(cur, p);
	}
	if (!r)
		p->truncated = tsv_get_u64(cur) != 0;
	return r ? r : cur->bad ? -EPROTO : 0;
}

/* Reads the frames of a list "(bin_key, offset) IN (('k',1),...)". */
static int read_listed(struct fleet_src *x, struct tsv_buf *in)
{
	tsv_raw(in, ")", 1);
	return in->oom ? -ENOMEM : read_frames(x, in->p);
}

/* The frames of the chunk's contexts that are not cached yet, FLEET_IN_BATCH a query. */
static int fetch_frames(struct fleet_src *x, struct pctx *v, size_t n)
{
	struct tsv_buf in = { 0 };
	size_t k = 0;
	int r = 0;

	for (size_t i = 0; !r && i < n; i++)
		for (unsigned j = 0; !r && j < v[i].nframes; j++) {
			if (fc_get(x->fc, v[i].fkey[j], v[i].foff[j]))
				continue;
			if (k++)
				tsv_raw(&in, ",", 1);
			else
				tsv_printf(&in, "(bin_key, offset) IN (");
			tsv_raw(&in, "(", 1);
			tsv_sql_str(&in, v[i].fkey[j]);
			tsv_printf(&in, ",%" PRIu64 ")", v[i].foff[j]);
			if (k == FLEET_IN_BATCH) {
				r = read_listed(x, &in);
				tsv_reset(&in);
				k = 0;
			}
		}
	if (!r && k)
		r = read_listed(x, &in);
	tsv_free(&in);
	return r;
}

static int emit(struct fleet_src *x, struct store *s, struct pctx *p, struct store_frame **row,
		unsigned *row_cap, store_ctx_cb cb, void *arg)
{
	const struct fleet_bin *b = fleet_bin_find(x, p->bin_key);

	if (p->nframes > *row_cap) {
		struct store_frame *v = realloc(*row, p->nframes * sizeof(*v));

		if (!v)
			return store_rows_error(s, -ENOMEM, "out of memory");
		*row = v;
		*row_cap = p->nframes;
	}
	for (unsigned i = 0; i < p->nframes; i++) {
		const struct cframe *f = fc_get(x->fc, p->fkey[i], p->foff[i]);

		if (!f)
			return store_rows_error(s, -EUCLEAN, "ClickHouse: a context names a frame "
						"that was never pushed");
		(*row)[i] = f->f;
	}
	if (p->nframes)   /* as store_query_contexts: no allocator inlined into the leaf */
		alloc_trim_leaf(&(*row)[0]);
	struct store_ctx_row r = {
		.context_id = p->id, .build_id = b ? b->build_id : "", .binary = b ? b->path : "",
		.frames = *row, .nframes = p->nframes, .mib = p->mib, .hist = p->hist,
		.truncated = p->truncated,
	};
	return cb(&r, arg);
}

/* (bin_key, stack_hash, id): every context of the selected hosts numbered as merge numbers
 * them, by (host rank, the host's own context id); sorted inside one array, so the
 * numbering does not depend on how ClickHouse streams the rows. */
static void ids_sql(const struct fleet_src *x, struct tsv_buf *q)
{
	tsv_printf(q, "(SELECT tupleElement(t, 1) AS bin_key, tupleElement(t, 2) AS stack_hash,"
		   " n AS id FROM (SELECT arraySort(e -> tupleElement(e, 3), groupArray(tuple(bin_key,"
		   " stack_hash, o))) AS a FROM (SELECT bin_key, stack_hash, min(tuple(%s, src_id)) AS o"
		   " FROM " FLEET_DB ".contexts WHERE %s GROUP BY bin_key, stack_hash))"
		   " ARRAY JOIN a AS t, arrayEnumerate(a) AS n)", x->rank, x->dims);
}

static const char *const sort_key[] = {
	[STORE_SORT_BYTES] = "s_ts", [STORE_SORT_COUNT] = "s_ac",
	[STORE_SORT_LIFETIME] = "s_tl", [STORE_SORT_ACCESSES] = "s_tac",
	[STORE_SORT_LIVE] = "s_lb",
	/* store_lifetime_access_density(), in its order of operations */
	[STORE_SORT_DENSITY] = "if(s_tac = 0 OR s_ts = 0, 0., toFloat64(s_tac) / s_ts"
		" / greatest(toFloat64(s_tl) / (s_ac * 1e9), 0.001))",
};

/* The contexts' answer: aggregates, merged-store id, frames; ordered and limited. */
static int ctx_query(struct fleet_src *x, const struct store_ctx_filter *f, struct tsv_buf *q)
{
	struct tsv_buf keys = { 0 };

	if (f->binary) {
		tsv_raw(&keys, " AND bin_key IN ", 16);
		if (!fleet_bin_keys(x, f->binary, &keys)) {
			tsv_free(&keys);
			return 1;
		}
	}
	tsv_printf(q, "SELECT bin_key, stack_hash, id, s_ac, s_ts, s_mins, s_maxs, s_tl, s_minl, s_maxl,"
		   " tupleElement(s_last, 1), tupleElement(s_last, 2), tupleElement(s_last, 3),"
		   " tupleElement(s_last, 4), s_mig, s_ovl, s_sac, s_sdc, s_as, s_tac, s_minac, s_maxac,"
		   " s_asm, s_lc, s_lb, s_ll, s_hist, s_hd, s_mind, s_maxd, s_minld, s_maxld, s_wh, s_wn, s_ee, s_ab,"
		   " fb, fo,"
		   " tr FROM (SELECT * FROM (SELECT bin_key, stack_hash, sum(alloc_count) AS s_ac,"
		   " sum(total_size) AS s_ts, min(min_size) AS s_mins, max(max_size) AS s_maxs,"
		   " sum(total_lifetime_ns) AS s_tl, min(min_lifetime_ns) AS s_minl,"
		   " max(max_lifetime_ns) AS s_maxl, argMax(tuple(alloc_ts_ns, dealloc_ts_ns, alloc_cpu,"
		   " dealloc_cpu), tuple(dealloc_ts_ns, alloc_ts_ns, alloc_cpu, dealloc_cpu)) AS s_last,"
		   " sum(num_migrated_cpu) AS s_mig, sum(num_lifetime_overlaps) AS s_ovl,"
		   " sum(num_same_alloc_cpu) AS s_sac, sum(num_same_dealloc_cpu) AS s_sdc,"
		   " sum(access_samples) AS s_as, sum(total_access_count) AS s_tac,"
		   " min(min_access_count) AS s_minac, max(max_access_count) AS s_maxac,"
		   " sum(alloc_samples) AS s_asm, sum(live_at_exit_count) AS s_lc,"
		   " sum(live_at_exit_bytes) AS s_lb, sum(live_at_exit_lifetime_ns) AS s_ll, %s AS s_hist,"
		   /* merge's rule: a context's extremes are unknown if any row's is */
		   " min(has_density) AS s_hd, min(min_access_density_bits) AS s_mind,"
		   " max(max_access_density_bits) AS s_maxd,"
		   " min(min_lifetime_access_density_bits) AS s_minld,"
		   " max(max_lifetime_access_density_bits) AS s_maxld,"
		   " sum(watch_hits) AS s_wh, sum(watch_ns) AS s_wn, sum(access_est_err) AS s_ee,"
		   " sum(total_access_bytes) AS s_ab"
		   " FROM " FLEET_DB ".mib WHERE", f->hist ? "sumForEach(hist)" : "emptyArrayUInt64()");
	fleet_rows_where(x, f, q);
	tsv_printf(q, "%s GROUP BY bin_key, stack_hash) ANY LEFT JOIN ", keys.p ? keys.p : "");
	ids_sql(x, q);
	/* truncated is the stack's, as merge keeps it (stacks.truncated, one row per hash):
	 * cut on any selected host under any binary, whatever --binary selects. */
	tsv_printf(q, " USING (bin_key, stack_hash)) ANY LEFT JOIN (SELECT bin_key, stack_hash, fb, fo,"
		   " tr FROM (SELECT bin_key, stack_hash, argMin(f_bin, o) AS fb, argMin(f_off, o)"
		   " AS fo FROM (SELECT bin_key, stack_hash, f_bin, f_off,"
		   " tuple(%s, src_id) AS o FROM "
		   FLEET_DB ".contexts WHERE %s%s) GROUP BY bin_key, stack_hash) ANY LEFT JOIN (SELECT"
		   " stack_hash, max(truncated) AS tr FROM " FLEET_DB ".contexts WHERE %s GROUP BY"
		   " stack_hash) USING (stack_hash)) USING (bin_key, stack_hash)"
		   " ORDER BY %s DESC, id", x->rank, x->dims, keys.p ? keys.p : "", x->dims,
		   sort_key[f->sort]);
	if (f->limit && !f->accept)
		tsv_printf(q, " LIMIT %u", f->limit);
	tsv_free(&keys);
	return q->oom || keys.oom ? -ENOMEM : 0;
}

/* Parses, reads frames for and emits the answer's contexts, FLEET_CTX_CHUNK at a time. */
static int emit_all(struct fleet_src *x, struct store *s, const struct store_ctx_filter *f,
		    struct tsv_cur *cur, store_ctx_cb cb, void *arg)
{
	struct pctx *v = calloc(FLEET_CTX_CHUNK, sizeof(*v));
	struct store_frame *row = NULL;
	unsigned row_cap = 0, emitted = 0;
	int r = v ? 0 : store_rows_error(s, -ENOMEM, "out of memory");

	while (!r && tsv_next_row(cur)) {
		size_t n = 0;

		while (!r && n < FLEET_CTX_CHUNK && tsv_next_row(cur)) {
			r = parse_ctx(cur, &v[n]);
			if (!r && f->accept && !f->accept(&v[n].mib, f->accept_arg))
				pctx_free(&v[n]);
			else
				n++;
		}
		if (!r)
			r = fetch_frames(x, v, n);
		if (r)
			r = r == -ENOMEM ? store_rows_error(s, r, "out of memory") :
				r == -EPROTO || r == -E2BIG ? store_rows_error(s, r, "ClickHouse: "
				"malformed contexts answer") : store_rows_error(s, r, ch_errmsg(x->ch));
		for (size_t i = 0; !r && i < n; i++) {
			r = emit(x, s, &v[i], &row, &row_cap, cb, arg);
			if (!r && f->limit && ++emitted >= f->limit)
				r = INT32_MAX;     /* done */
		}
		for (size_t i = 0; i < n; i++)
			pctx_free(&v[i]);
	}
	free(v);
	free(row);
	return r == INT32_MAX ? 0 : r;
}

/* A long answer: every frame of the selected binaries' contexts in one query, instead of
 * lists of FLEET_IN_BATCH. keys: " AND bin_key IN (...)" or "". */
static int prefetch_frames(struct fleet_src *x, const struct store_ctx_filter *f)
{
	struct tsv_buf cond = { 0 };
	int r;

	tsv_printf(&cond, "(bin_key, offset) GLOBAL IN (SELECT tupleElement(fr, 1), tupleElement(fr, 2)"
		   " FROM (SELECT DISTINCT arrayJoin(arrayMap((b, o) -> tuple(b, o), f_bin, f_off)) AS fr"
		   " FROM " FLEET_DB ".contexts WHERE %s", x->dims);
	if (f->binary) {
		tsv_raw(&cond, " AND bin_key IN ", 16);
		fleet_bin_keys(x, f->binary, &cond);
	}
	tsv_raw(&cond, "))", 2);
	r = cond.oom ? -ENOMEM : read_frames(x, cond.p);
	tsv_free(&cond);
	return r;
}

static size_t count_rows(const struct tsv_buf *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->len; i++)
		n += b->p[i] == '\n';
	return n;
}

int fleet_src_contexts(void *ctx, struct store *s, const struct store_ctx_filter *f,
		       store_ctx_cb cb, void *arg)
{
	struct fleet_src *x = ctx;
	struct tsv_buf q = { 0 }, ans = { 0 };
	struct tsv_cur cur;
	int r;

	if (f->pid)
		return store_rows_error(s, -EOPNOTSUPP, "--pid: fleet processes are not told apart");
	if ((unsigned)f->sort >= sizeof(sort_key) / sizeof(sort_key[0]))
		return store_rows_error(s, -EINVAL, "unknown sort order");
	if (!x->fc && !(x->fc = calloc(1, sizeof(*x->fc))))
		return store_rows_error(s, -ENOMEM, "out of memory");
	r = ctx_query(x, f, &q);
	if (r == 0)
		r = ch_exec(x->ch, q.p, NULL, NULL);
	tsv_free(&q);
	if (r)
		return r > 0 ? 0 : r == -ENOMEM ? store_rows_error(s, r, "out of memory") :
			store_rows_error(s, r, ch_errmsg(x->ch));
	ch_take_response(x->ch, &ans);
	if (count_rows(&ans) > FLEET_PREFETCH_MIN && (r = prefetch_frames(x, f))) {
		tsv_free(&ans);
		return store_rows_error(s, r, r == -ENOMEM ? "out of memory" : ch_errmsg(x->ch));
	}
	tsv_cur_init(&cur, &ans);
	r = emit_all(x, s, f, &cur, cb, arg);
	tsv_free(&ans);
	return r;
}

/* ---- time buckets ---- */

int fleet_src_buckets(void *ctx, struct store *s, const struct store_ctx_filter *f,
		      store_bucket_cb cb, void *arg)
{
	static const struct store_ctx_filter all;
	struct fleet_src *x = ctx;
	struct tsv_buf q = { 0 }, keys = { 0 };
	const struct tsv_buf *resp;
	struct tsv_cur cur;
	int r = 0;

	if (!f)
		f = &all;
	if (f->pid)
		return store_rows_error(s, -EOPNOTSUPP, "--pid: fleet processes are not told apart");
	if (f->binary) {
		tsv_raw(&keys, " AND bin_key IN ", 16);
		if (!fleet_bin_keys(x, f->binary, &keys)) {
			tsv_free(&keys);
			return 0;
		}
	}
	tsv_printf(&q, "SELECT bucket_start, id, ac, ts, tac, tl FROM (SELECT bucket_start, bin_key,"
		   " stack_hash, sum(alloc_count) AS ac, sum(total_size) AS ts, sum(total_access_count)"
		   " AS tac, sum(total_lifetime_ns) AS tl FROM " FLEET_DB ".mib WHERE");
	fleet_rows_where(x, f, &q);
	tsv_printf(&q, "%s GROUP BY bucket_start, bin_key, stack_hash) ANY LEFT JOIN ",
		   keys.p ? keys.p : "");
	ids_sql(x, &q);
	tsv_printf(&q, " USING (bin_key, stack_hash) ORDER BY bucket_start, id");
	r = q.oom || keys.oom ? -ENOMEM : ch_exec(x->ch, q.p, NULL, &resp);
	tsv_free(&q);
	tsv_free(&keys);
	if (r)
		return r == -ENOMEM ? store_rows_error(s, r, "out of memory") :
			store_rows_error(s, r, ch_errmsg(x->ch));
	for (tsv_cur_init(&cur, resp); !r && tsv_next_row(&cur);) {
		struct store_bucket_row row = { .bucket_start = tsv_get_i64(&cur) };

		row.context_id = tsv_get_i64(&cur);
		row.alloc_count = tsv_get_u64(&cur);
		row.total_size = tsv_get_u64(&cur);
		row.total_access_count = tsv_get_u64(&cur);
		row.total_lifetime_ns = tsv_get_u64(&cur);
		r = cur.bad ? store_rows_error(s, -EPROTO, "ClickHouse: malformed buckets answer") :
			cb(&row, arg);
	}
	return r;
}
