/* `memprofd export html`: one self-contained HTML report (no network at view time: the
 * styles, the data and the vanilla-JS viewer, reporter/html_viewer.js, are all inline).
 * The summary, the top-contexts table (whole stacks with file:line, inline chains in the
 * tooltips, estimates with their samples and intervals), the objects live at exit and
 * the hot and cold data symbols are rendered here, so they read without JavaScript; the
 * script sorts the tables, draws the heap over time (bytes live by class and for the top
 * contexts per time bucket, reporter/heap_live.c's estimate, on a real time axis) and the flame graph (top-down or
 * bottom-up, zoom, search) from the JSON data block. Every byte from the store is
 * escaped for its context: HTML text, attributes, or JSON inside <script>. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reporter/classify.h"
#include "reporter/estimate.h"
#include "reporter/export.h"
#include "reporter/format.h"
#include "reporter/heap_live.h"
#include "reporter/progress.h"
#include "reporter/strtab.h"
#include "base/array.h"

#define HTML_TOP_CONTEXTS 200     /* rows of the top-contexts table */
#define HTML_FLAME_CONTEXTS 20000 /* contexts drawn in the flame graph; the rest as one */
#define HTML_NAME_MAX 512         /* longest frame name shown */
#define HTML_DATA_SYMBOLS 100     /* rows of each hot/cold data symbol table */
#define HTML_CHART_CONTEXTS HEAP_LIVE_TOP  /* top contexts drawn as lines in the heap chart */
#define HTML_BUCKET_NS 60000000000LL     /* the store's time bucket (daemon/attrib's AGG_BUCKET_SECONDS) */
#define HTML_CLASSES 4            /* classes the report keeps apart (classify_name's) */

#include "reporter/html_viewer.h" /* html_script[]: reporter/html_viewer.js, generated */

/* ---- escaping ---- */

static void html_text(FILE *out, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default:
			fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, out);
		}
	}
}

/* A JSON string that cannot end the <script> element it sits in. */
static void json_in_script(FILE *out, const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m) {
		fputs("\"\"", out);
		return;
	}
	fmt_json_str(m, s ? s : "");
	fclose(m);
	for (size_t i = 0; i < len; i++) {
		switch (buf[i]) {
		case '<': fputs("\\u003c", out); break;
		case '>': fputs("\\u003e", out); break;
		case '&': fputs("\\u0026", out); break;
		default: fputc(buf[i], out);
		}
	}
	free(buf);
}

/* ---- collection ---- */

struct ctx_class {
	int64_t id;
	enum classify_class cls;
};

struct html {
	FILE *out;
	const struct export_opts *o;
	struct progress pr;
	FILE *rows, *stacks;           /* memstreams: table rows, flame JSON */
	char *rows_buf, *stacks_buf;
	size_t rows_len, stacks_len;
	struct strtab names;
	struct ctx_class *classes;
	size_t nclasses, classes_cap;
	unsigned n;                    /* contexts seen */
	struct mib total;
	struct classify_evidence ev;   /* the store's, for every context's class */
	uint64_t class_bytes[HTML_CLASSES], class_ctx[HTML_CLASSES], other[3];
	int64_t top_ids[HTML_CHART_CONTEXTS];
	char *top_names[HTML_CHART_CONTEXTS];
	FILE *leaks;                   /* memstream: the live-at-exit table's rows */
	char *leaks_buf;
	size_t leaks_len;
	unsigned nleaks;
	int err;
};

/* A flame frame's interned key: name, file:line (empty when unknown) and "1" when the
 * line is an inlined callee, NUL-separated; returns the key's length. */
static int frame_key(char *key, size_t n, const char *name, const struct export_line *l,
		     bool inlined)
{
	char where[2 * HTML_NAME_MAX] = "";
	int len;

	if (l && l->file && *l->file && l->line)
		snprintf(where, sizeof(where), "%.*s:%" PRId64, HTML_NAME_MAX, l->file, l->line);
	len = snprintf(key, n, "%s%c%s%c%s", name, 0, where, 0, inlined ? "1" : "");
	return len < 0 ? 0 : (size_t)len >= n ? (int)n - 1 : len;
}

static void frame_names(struct html *h, const struct store_ctx_row *r, bool root_first,
			FILE *out, const char *sep, bool as_index)
{
	bool first = true;

	for (unsigned j = 0; j < r->nframes; j++) {
		unsigned i = root_first ? r->nframes - 1 - j : j;
		struct export_line lines[EXPORT_MAX_INLINE];
		unsigned n = export_frame_lines(&r->frames[i], lines, EXPORT_MAX_INLINE);

		for (unsigned q = 0; q < (n ? n : 1); q++) {
			/* Root first: caller (last line) before the inlined callees. */
			unsigned k = root_first ? (n ? n - 1 - q : 0) : q;
			char name[HTML_NAME_MAX], key[3 * HTML_NAME_MAX];
			const struct export_line *l = n ? &lines[k] : NULL;
			size_t idx;
			int len;

			export_frame_name(name, sizeof(name), &r->frames[i], l);
			if (!first)
				fputs(sep, out);
			first = false;
			if (!as_index) {
				html_text(out, name);
				continue;
			}
			/* The flame graph's frame: name NUL file:line NUL inlined ("1" or ""). */
			len = frame_key(key, sizeof(key), name, l, l && k + 1 < n);
			if (strtab_intern(&h->names, key, (size_t)len, &idx) < 0) {
				h->err = -ENOMEM;
				return;
			}
			fprintf(out, "%zu", idx);
		}
	}
}

/* A context's stack for people, leaf first: "fn file:line", inlined callees marked, one
 * entry per source line; sep between entries (HTML). */
static void frame_where(FILE *out, const struct store_ctx_row *r, const char *sep)
{
	bool first = true;

	for (unsigned i = 0; i < r->nframes; i++) {
		struct export_line lines[EXPORT_MAX_INLINE];
		const struct store_frame *f = &r->frames[i];
		unsigned n = export_frame_lines(f, lines, EXPORT_MAX_INLINE);

		for (unsigned k = 0; k < (n ? n : 1); k++) {
			char name[HTML_NAME_MAX], where[HTML_NAME_MAX];
			const struct export_line *l = n ? &lines[k] : NULL;

			export_frame_name(name, sizeof(name), f, l);
			where[0] = '\0';
			if (l && l->file && l->line)
				snprintf(where, sizeof(where), " %s:%" PRId64, l->file, l->line);
			fputs(first ? "" : sep, out);
			first = false;
			html_text(out, name);
			if (where[0]) {
				fputs("<span class=\"where\">", out);
				html_text(out, where);
				fputs("</span>", out);
			}
			if (l && k + 1 < n)
				fputs(" <span class=\"inl\">[inlined]</span>", out);
		}
	}
	if (first)
		fputs("(no frames)", out);
}

/* The same as plain text for a title attribute: one entry a line. */
static void frame_where_title(FILE *out, const struct store_ctx_row *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return;
	frame_where(m, r, "\n");
	fclose(m);
	/* Strip the spans: the title is text. */
	for (char *p = buf; p && *p; p++) {
		if (*p == '<') {
			while (*p && *p != '>')
				p++;
			if (!*p)
				break;
			continue;
		}
		fputs(*p == '\n' ? "&#10;" : *p == '"' ? "&quot;" : (char[]){ *p, 0 }, out);
	}
	free(buf);
}

/* An estimate's cell: the value, "±N%" of its 95% interval, data-v for sorting. */
static void est_cells(FILE *out, const struct estimate *e, const char *shown)
{
	double pct = estimate_rel_pct(e);

	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td><td class=\"pm\" data-v=\"%.3f\">", e->value,
		shown, pct < 0 ? 0 : pct);
	if (e->kind == ESTIMATE_UNKNOWN)
		fputs("?", out);
	else if (pct >= 0)
		fprintf(out, "\u00b1%.0f%%", pct);
	fputs("</td>", out);
}

static void table_row(struct html *h, FILE *out, const struct store_ctx_row *r, unsigned rank)
{
	const struct mib *m = &r->mib;
	char b1[FMT_BUF], b2[FMT_BUF], b3[FMT_BUF], b4[FMT_BUF], b5[FMT_BUF], b6[FMT_BUF];
	uint64_t freed = m->alloc_count - (m->live_at_exit_count < m->alloc_count ?
					   m->live_at_exit_count : m->alloc_count);
	uint64_t life = freed ? (m->total_lifetime_ns - (m->live_at_exit_lifetime_ns <
			m->total_lifetime_ns ? m->live_at_exit_lifetime_ns : m->total_lifetime_ns)) /
			freed : 0;
	double dens = classify_density(m);
	const char *cls = classify_name(classify_mib(m, &h->ev));
	struct estimate cnt, byt, acc;

	(void)h;
	estimate_mib(m, &cnt, &byt, &acc);
	fprintf(out, "<tr class=\"%s\"><td data-v=\"%u\">%u</td>", cls, rank, rank);
	est_cells(out, &byt, fmt_bytes(b1, m->total_size));
	est_cells(out, &cnt, fmt_count(b2, m->alloc_count));
	if (cnt.kind == ESTIMATE_UNKNOWN)
		fputs("<td data-v=\"0\">?</td>", out);
	else
		fprintf(out, "<td data-v=\"%" PRIu64 "\">%" PRIu64 "%s</td>", m->alloc_samples,
			m->alloc_samples, estimate_weak(&cnt, &acc) ? " <span class=\"few\">few</span>" : "");
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", life,
		freed ? fmt_duration_ns(b3, life) : "at exit");
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", m->live_at_exit_bytes,
		m->live_at_exit_bytes ? fmt_bytes(b6, m->live_at_exit_bytes) : "-");
	est_cells(out, &acc, fmt_count(b4, m->total_access_count));
	fprintf(out, "<td data-v=\"%.9g\">%s</td>", dens, fmt_density(b5, dens));
	fprintf(out, "<td class=\"cls\">%s</td><td class=\"stack\" title=\"", cls);
	frame_where_title(out, r);
	fputs("\">", out);
	frame_where(out, r, " <span class=\"sep\">&lt;</span> ");
	fputs("</td></tr>\n", out);
}

static int ctx_cb(const struct store_ctx_row *r, void *arg)
{
	struct html *h = arg;
	const struct mib *m = &r->mib;
	enum classify_class c = classify_mib(m, &h->ev);

	progress_step(&h->pr);
	mib_combine(&h->total, m);
	if ((unsigned)c < HTML_CLASSES) {
		h->class_bytes[c] += m->total_size;
		h->class_ctx[c]++;
	}
	if (ARRAY_GROW(h->classes, h->classes_cap, h->nclasses, 1024) < 0)
		return -ENOMEM;
	h->classes[h->nclasses++] = (struct ctx_class){ .id = r->context_id, .cls = c };
	if (h->n < HTML_TOP_CONTEXTS)
		table_row(h, h->rows, r, h->n + 1);
	if (h->n < HTML_CHART_CONTEXTS) {
		/* The chart's legend: the allocation site, "fn file:line". */
		struct export_line lines[EXPORT_MAX_INLINE];
		unsigned n = r->nframes ? export_frame_lines(&r->frames[0], lines,
							      EXPORT_MAX_INLINE) : 0;
		char name[HTML_NAME_MAX];

		if (r->nframes)
			export_frame_name(name, sizeof(name), &r->frames[0], n ? &lines[0] : NULL);
		else
			snprintf(name, sizeof(name), "(no frames)");
		if (n && lines[0].file && lines[0].line &&
		    asprintf(&h->top_names[h->n], "%s %s:%" PRId64, name, lines[0].file,
			     lines[0].line) < 0)
			h->top_names[h->n] = NULL;
		else if (!h->top_names[h->n])
			h->top_names[h->n] = strdup(name);
		h->top_ids[h->n] = r->context_id;
	}
	if (h->n < HTML_FLAME_CONTEXTS) {
		fprintf(h->stacks, "%s[[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],[", h->n ? ",\n" : "",
			m->total_size, m->alloc_count, m->total_access_count);
		frame_names(h, r, true, h->stacks, ",", true);
		fputs("]]", h->stacks);
	} else {
		h->other[0] += m->total_size;
		h->other[1] += m->alloc_count;
		h->other[2] += m->total_access_count;
	}
	h->n++;
	return h->err;
}

/* The heap chart's column of a class: hot, notcold, cold (unknown goes with notcold). */
static unsigned html_column(enum classify_class c)
{
	return c == CLASSIFY_HOT ? 0 : c == CLASSIFY_COLD ? 2 : 1;
}

static int cmp_class(const void *a, const void *b)
{
	int64_t x = ((const struct ctx_class *)a)->id, y = ((const struct ctx_class *)b)->id;

	return (x > y) - (x < y);
}

struct bucket_out {
	struct html *h;
	bool any;
	int64_t first, last;           /* the first and last bucket with objects ending */
	struct heap_live live;
	FILE *top[HTML_CHART_CONTEXTS];  /* memstreams: each top context's [t, bytes] points */
	char *top_buf[HTML_CHART_CONTEXTS];
	size_t top_len[HTML_CHART_CONTEXTS];
};

static int bucket_cb(const struct store_bucket_row *r, void *arg)
{
	struct bucket_out *b = arg;
	struct ctx_class key = { .id = r->context_id }, *c;
	int top = -1;

	if (!b->any)
		b->first = r->bucket_start;
	b->any = true;
	b->last = r->bucket_start;
	c = b->h->nclasses ? bsearch(&key, b->h->classes, b->h->nclasses, sizeof(key), cmp_class)
			   : NULL;   /* bsearch may not take a NULL array either */
	for (unsigned i = 0; i < HTML_CHART_CONTEXTS && i < b->h->n; i++)
		if (b->h->top_ids[i] == r->context_id)
			top = (int)i;
	/* The chart has hot, notcold and cold columns: unknown (no decision) is not cold. */
	return heap_live_add(&b->live, r->bucket_start, r->total_size, r->alloc_count,
			     r->total_lifetime_ns, html_column(c ? c->cls : CLASSIFY_UNKNOWN), top);
}

/* ---- static data symbols ---- */

struct data_out {
	FILE *rows[2];                 /* hot, cold: table rows */
	char *buf[2];
	size_t len[2];
	unsigned n[2], total;
	int pass;                      /* 0: hot, 1: cold */
};

static void data_row(FILE *out, const struct store_data_row *r)
{
	char b1[FMT_BUF], b2[FMT_BUF], b3[FMT_BUF], b4[FMT_BUF], addr[32];
	double dens = store_data_density(r->est_accesses, r->size, r->observed_ns);

	snprintf(addr, sizeof(addr), "0x%" PRIx64, r->address);
	fputs("<tr><td class=\"sym\">", out);
	html_text(out, r->symbol && *r->symbol ? r->symbol : addr);
	fputs("</td><td class=\"sect\">", out);
	html_text(out, r->section && *r->section ? r->section : "-");
	fprintf(out, "</td><td data-v=\"%" PRIu64 "\">%s</td><td data-v=\"%" PRIu64 "\">%s</td>"
		"<td data-v=\"%" PRIu64 "\">%s</td><td data-v=\"%.9g\">%s</td></tr>\n",
		r->size, fmt_bytes(b1, r->size), r->access_samples, fmt_count(b2, r->access_samples),
		r->est_accesses, fmt_count(b3, r->est_accesses), dens, fmt_density(b4, dens));
}

/* One walk per table: hot symbols by density, cold ones by size (the biggest are what a
 * cold section saves); each table keeps its first HTML_DATA_SYMBOLS. */
static int data_cb(const struct store_data_row *r, void *arg)
{
	struct data_out *d = arg;
	enum classify_class c = classify_data(r->est_accesses, r->size, r->observed_ns);
	int i = d->pass;

	if (i == 0)
		d->total++;
	if (c != (i == 0 ? CLASSIFY_HOT : CLASSIFY_COLD))
		return 0;
	if (d->n[i]++ < HTML_DATA_SYMBOLS)
		data_row(d->rows[i], r);
	return 0;
}

static void data_table(FILE *out, const struct data_out *d, int i, const char *what)
{
	fprintf(out, "<h3>%s (%u)</h3>\n", what, d->n[i]);
	if (!d->n[i]) {
		fprintf(out, "<p class=\"empty\">No %s data symbols.</p>\n", what);
		return;
	}
	fprintf(out, "<table id=\"data-%s\" class=\"sortable\"><thead><tr><th class=\"l\">symbol"
		"</th><th class=\"l\">section</th><th>size</th><th>samples</th><th>est. accesses</th>"
		"<th>density</th></tr></thead>\n<tbody>\n", what);
	fwrite(d->buf[i], 1, d->len[i], out);
	fputs("</tbody></table>\n", out);
}

/* ---- the page ---- */

static const char html_style[] =
	"body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
	"h1{font-size:20px;overflow-wrap:anywhere}h2{font-size:16px;margin-top:28px;"
	"border-bottom:1px solid #ddd}p.note{color:#555;max-width:70em}"
	".scroll{overflow-x:auto}table{border-collapse:collapse}"
	"td,th{padding:3px 8px;text-align:right;border-bottom:1px solid #eee;white-space:nowrap;"
	"vertical-align:top}th{background:#f4f4f4;cursor:pointer;user-select:none}"
	"th.asc:after{content:' \\25b2'}th.desc:after{content:' \\25bc'}"
	"td.stack{text-align:left;font-family:monospace;white-space:normal;min-width:24em;"
	"overflow-wrap:anywhere}td.stack .where{color:#777}td.stack .inl{color:#a0a}"
	"td.stack .sep{color:#bbb}td.pm{color:#777;font-size:12px}.few{color:#b9770e;"
	"font-size:11px}td.cls{text-align:left}tr.hot td.cls{color:#c0392b}"
	"tr.cold td.cls{color:#2471a3}table.kv td:first-child{text-align:left;color:#666}"
	"table.kv td{text-align:left;white-space:normal;overflow-wrap:anywhere}"
	"th.l,td.sym,td.sect{text-align:left}td.sym{white-space:normal;overflow-wrap:anywhere}"
	".empty{color:#888;font-style:italic}"
	"#flame-graph{position:relative;width:100%;overflow:hidden;font:11px monospace}"
	"#flame-graph .fr{position:absolute;height:17px;box-sizing:border-box;border:1px solid"
	" #fff;overflow:hidden;white-space:nowrap;padding:0 2px;cursor:pointer}"
	"#flame-graph .fr.dim{opacity:.35}.controls{margin:6px 0;display:flex;flex-wrap:wrap;"
	"gap:12px;align-items:center}#flame-found{color:#555}"
	"#heap-chart{width:100%}#heap-chart svg text{font:11px sans-serif;fill:#333}"
	"#heap-chart .grid{stroke:#eee}#heap-chart .axis{stroke:#999}"
	"#heap-legend .key{display:inline-block;border-left:12px solid;padding:0 10px 0 4px;"
	"margin:2px 8px 2px 0;font-size:12px;overflow-wrap:anywhere}";

static void iso_utc(char *buf, size_t n, int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, n, "?");
}

static void kv(FILE *out, const char *k, const char *v)
{
	fputs("<tr><td>", out);
	html_text(out, k);
	fputs("</td><td>", out);
	html_text(out, v);
	fputs("</td></tr>\n", out);
}

static void summary(FILE *out, const struct html *h, const struct bucket_out *b)
{
	const struct export_opts *o = h->o;
	char v[256], b1[FMT_BUF], b2[FMT_BUF], t1[64], t2[64];

	fputs("<section id=\"summary\"><h2>Summary</h2><table class=\"kv\">\n", out);
	kv(out, "binary", o->path && *o->path ? o->path : "?");
	kv(out, "build-id", o->build_id && *o->build_id ? o->build_id : "none");
	snprintf(v, sizeof(v), "%u", h->n);
	kv(out, "allocation contexts", v);
	snprintf(v, sizeof(v), "%s in %s objects (%" PRIu64 " bytes)",
		 fmt_bytes(b1, h->total.total_size), fmt_count(b2, h->total.alloc_count),
		 h->total.total_size);
	kv(out, "allocated", v);
	snprintf(v, sizeof(v), "%s estimated from %" PRIu64 " samples",
		 fmt_count(b1, h->total.total_access_count), h->total.access_samples);
	kv(out, "accesses", v);
	for (int c = HTML_CLASSES - 1; c >= 0; c--) {
		snprintf(v, sizeof(v), "%" PRIu64 " contexts, %s", h->class_ctx[c],
			 fmt_bytes(b1, h->class_bytes[c]));
		kv(out, classify_name((enum classify_class)c), v);
	}
	if (b->any) {
		iso_utc(t1, sizeof(t1), b->first);
		iso_utc(t2, sizeof(t2), b->last);
		snprintf(v, sizeof(v), "%s to %s", t1, t2);
		kv(out, "time buckets", v);
	}
	iso_utc(t1, sizeof(t1), o->now_ns);
	kv(out, "generated", t1);
	fputs("</table></section>\n", out);
}

/* Live at exit, by bytes (schema >= 9): rows while any byte was. */
static int leak_cb(const struct store_ctx_row *r, void *arg)
{
	struct html *h = arg;

	if (!r->mib.live_at_exit_bytes || h->nleaks >= HTML_TOP_CONTEXTS)
		return 1;
	table_row(h, h->leaks, r, ++h->nleaks);
	return 0;
}

static const char ctx_head[] =
	"<div class=\"scroll\"><table id=\"%s\" class=\"sortable\"><thead><tr><th>#</th>"
	"<th>bytes</th><th title=\"half-width of the 95%% Poisson interval\">&#177;</th>"
	"<th>objects</th><th>&#177;</th><th title=\"objects observed behind the estimate\">"
	"samples</th><th title=\"of the objects freed\">avg lifetime</th>"
	"<th title=\"bytes still allocated when their process exited\">at exit</th>"
	"<th>accesses</th><th>&#177;</th><th title=\"estimated accesses per byte per second "
	"of average lifetime\">density</th><th class=\"l\">class</th>"
	"<th class=\"l\">stack (leaf first, file:line)</th></tr></thead>\n<tbody>\n";

static void page_sections(FILE *out, const struct html *h, const struct data_out *d)
{
	fprintf(out, "<section id=\"contexts\"><h2>Top allocation contexts (%u of %u, by "
		"bytes)</h2>\n<p class=\"note\">Sampled estimates carry the samples behind them "
		"and the half-width of their 95%% Poisson interval (&#177;); \"few\" marks fewer "
		"than %d samples. Hover a stack for its frames one a line.</p>\n",
		h->n < HTML_TOP_CONTEXTS ? h->n : HTML_TOP_CONTEXTS, h->n, ESTIMATE_FEW_SAMPLES);
	if (h->n) {
		fprintf(out, ctx_head, "ctx-table");
		fwrite(h->rows_buf, 1, h->rows_len, out);
		fputs("</tbody></table></div>\n", out);
	} else {
		fputs("<p class=\"empty\">No allocation contexts recorded.</p>\n", out);
	}
	fprintf(out, "</section>\n<section id=\"leaks\"><h2>Live at exit (%u contexts)</h2>\n"
		"<p class=\"note\">Objects still allocated when their process exited: leaks, or "
		"memory freed by the exit itself. Their lifetimes are kept apart: avg lifetime "
		"is of the freed objects only.</p>\n", h->nleaks);
	if (h->nleaks) {
		fprintf(out, ctx_head, "leak-table");
		fwrite(h->leaks_buf, 1, h->leaks_len, out);
		fputs("</tbody></table></div>\n", out);
	} else {
		fputs("<p class=\"empty\">No object was live at exit (or the store predates "
		      "schema 9).</p>\n", out);
	}
	fputs("</section>\n<section id=\"heap\"><h2>Heap over time</h2>\n<p class=\"note\">Bytes "
	      "live, averaged over each bar's time span, by class, and the top contexts as "
	      "lines. Estimated: the store keeps, per context and minute in which objects ended "
	      "(were freed, or their process exited), their count, bytes and total lifetime, "
	      "not each object's times; each such group is drawn as ending mid-minute after its "
	      "mean lifetime. Its bytes &#215; seconds are exact when its objects share a size "
	      "and a lifetime; where they were allocated within the minute is not known. "
	      "Objects live at exit count until their process exited.</p>\n"
	      "<div id=\"heap-legend\"></div><div id=\"heap-chart\"></div>\n</section>\n", out);
	fputs("<section id=\"flame\"><h2>Flame graph</h2>\n<div class=\"controls\"><label>"
	      "view <select id=\"flame-mode\"><option value=\"top-down\">top-down (callers "
	      "first)</option><option value=\"bottom-up\">bottom-up (allocation sites first)"
	      "</option></select></label><label>weight <select id=\"flame-weight\"><option>"
	      "bytes</option><option>objects</option><option>accesses</option></select>"
	      "</label><label>search <input id=\"flame-search\" type=\"search\" "
	      "placeholder=\"function\"></label><button id=\"flame-reset\">reset</button>"
	      "<span id=\"flame-found\"></span></div>\n<p class=\"note\">Click a frame to zoom, "
	      "again to zoom out.</p>\n<div id=\"flame-graph\"></div>\n</section>\n", out);
	fputs("<section id=\"data\"><h2>Hot and cold data symbols</h2>\n", out);
	if (d->total) {
		data_table(out, d, 0, "hot");
		data_table(out, d, 1, "cold");
	} else {
		fputs("<p class=\"empty\">No static data accesses recorded.</p>\n", out);
	}
	fputs("</section>\n", out);
}

static void page_data(FILE *out, const struct html *h, const struct bucket_out *b,
		      const char *tl_buf, size_t tl_len, int64_t width_ns)
{
	static const enum classify_class order[] = { CLASSIFY_HOT, CLASSIFY_NOTCOLD,
						     CLASSIFY_COLD };

	fputs("<script type=\"application/json\" id=\"mpd-data\">{\"weight\": ", out);
	json_in_script(out, export_weight_name(h->o->weight));
	fprintf(out, ",\n\"bucket_s\": %" PRId64 ",\n\"classes\": [", width_ns / 1000000000);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		fputs(i ? "," : "", out);
		json_in_script(out, classify_name(order[i]));
	}
	/* names[i], where[i] ("file:line" or ""), inl[i] (1: an inlined callee): frame i. */
	fputs("],\n\"names\": [", out);
	for (size_t i = 0; i < h->names.n; i++) {
		fputs(i ? ",\n" : "", out);
		json_in_script(out, strtab_key(&h->names, i));
	}
	fputs("],\n\"where\": [", out);
	for (size_t i = 0; i < h->names.n; i++) {
		const char *k = strtab_key(&h->names, i);

		fputs(i ? ",\n" : "", out);
		json_in_script(out, k + strlen(k) + 1);
	}
	fputs("],\n\"inl\": [", out);
	for (size_t i = 0; i < h->names.n; i++) {
		const char *k = strtab_key(&h->names, i), *w = k + strlen(k) + 1;

		fprintf(out, "%s%d", i ? "," : "", w[strlen(w) + 1] == '1');
	}
	fputs("],\n\"stacks\": [", out);
	fwrite(h->stacks_buf, 1, h->stacks_len, out);
	fprintf(out, "],\n\"other\": [%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\n\"buckets\": [",
		h->other[0], h->other[1], h->other[2]);
	fwrite(tl_buf, 1, tl_len, out);
	fputs("],\n\"top\": [", out);
	for (unsigned i = 0; i < HTML_CHART_CONTEXTS && i < h->n; i++) {
		fputs(i ? ",\n{\"name\": " : "{\"name\": ", out);
		json_in_script(out, h->top_names[i] ? h->top_names[i] : "?");
		fputs(", \"series\": [", out);
		if (b->top_buf[i])
			fwrite(b->top_buf[i], 1, b->top_len[i], out);
		fputs("]}", out);
	}
	fputs("]}</script>\n", out);
}

int export_html(FILE *out, struct store *s, const struct export_opts *o)
{
	struct store_ctx_filter f = { .binary = o->binary, .sort = STORE_SORT_BYTES };
	struct html h = { .out = out, .o = o };
	char *tl_buf = NULL;
	size_t tl_len = 0;
	FILE *tl = NULL;
	struct bucket_out b = { .h = &h, .live = { .bucket_ns = HTML_BUCKET_NS } };
	int64_t width_ns = HTML_BUCKET_NS;
	struct data_out d = {0};
	int r = 0;

	r = classify_evidence_load(s, &h.ev);
	if (r < 0)
		return r;
	_Static_assert(HTML_CLASSES == CLASSIFY_NCLASSES, "one row per class");
	h.rows = open_memstream(&h.rows_buf, &h.rows_len);
	h.leaks = open_memstream(&h.leaks_buf, &h.leaks_len);
	for (int i = 0; i < 2; i++)
		if (!(d.rows[i] = open_memstream(&d.buf[i], &d.len[i])))
			r = -ENOMEM;
	for (int i = 0; i < HTML_CHART_CONTEXTS; i++)
		if (!(b.top[i] = open_memstream(&b.top_buf[i], &b.top_len[i])))
			r = -ENOMEM;
	h.stacks = open_memstream(&h.stacks_buf, &h.stacks_len);
	tl = open_memstream(&tl_buf, &tl_len);
	if (!h.rows || !h.leaks || !h.stacks || !tl)
		r = -ENOMEM;
	if (r == 0) {
		progress_start(&h.pr, "export html", o->contexts, EXPORT_PROGRESS_MIN_CONTEXTS,
			       o->progress);
		r = store_query_contexts(s, &f, ctx_cb, &h);
		progress_end(&h.pr);
	}
	if (r == 0 && store_schema_version(s) >= 9) {
		struct store_ctx_filter lf = f;

		lf.sort = STORE_SORT_LIVE;
		r = store_query_contexts(s, &lf, leak_cb, &h);
		r = r > 0 ? 0 : r;   /* 1: the rest lived not at all */
	}
	if (r == 0) {
		if (h.nclasses)   /* none: h.classes is NULL, which qsort may not take */
			qsort(h.classes, h.nclasses, sizeof(*h.classes), cmp_class);
		r = store_query_buckets(s, &f, bucket_cb, &b);
		if (r == 0)
			r = heap_live_write(&b.live, tl, b.top, &width_ns);
	}
	for (d.pass = 0; d.pass < 2 && r == 0; d.pass++) {
		struct store_data_filter df = { .binary = o->binary, .now_ns = o->now_ns,
			.sort = d.pass ? STORE_DATA_SORT_SIZE : STORE_DATA_SORT_DENSITY };

		r = store_query_data(s, &df, data_cb, &d);
	}
	for (int i = 0; i < 2; i++)
		if (d.rows[i])
			fclose(d.rows[i]);
	for (int i = 0; i < HTML_CHART_CONTEXTS; i++)
		if (b.top[i])
			fclose(b.top[i]);
	if (h.rows)
		fclose(h.rows);
	if (h.leaks)
		fclose(h.leaks);
	if (h.stacks)
		fclose(h.stacks);
	if (tl)
		fclose(tl);
	if (r == 0) {
		const char *name = o->path && *o->path ? o->path : o->build_id ? o->build_id : "?";

		fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		      "<meta name=\"viewport\" content=\"width=device-width\">\n"
		      "<meta name=\"generator\" content=\"memprofd export html\">\n<title>memprofd: ",
		      out);
		html_text(out, name);
		fprintf(out, "</title>\n<style>%s</style>\n</head><body>\n<h1>memprofd report: ",
			html_style);
		html_text(out, name);
		fputs("</h1>\n", out);
		summary(out, &h, &b);
		page_sections(out, &h, &d);
		page_data(out, &h, &b, tl_buf, tl_len, width_ns);
		fprintf(out, "<script>%s</script>\n</body></html>\n", html_script);
		if (ferror(out))
			r = -EIO;
	}
	free(h.rows_buf);
	free(h.leaks_buf);
	free(h.stacks_buf);
	free(tl_buf);
	free(d.buf[0]);
	free(d.buf[1]);
	for (int i = 0; i < HTML_CHART_CONTEXTS; i++) {
		free(b.top_buf[i]);
		free(h.top_names[i]);
	}
	free(h.classes);
	heap_live_free(&b.live);
	strtab_free(&h.names);
	return r;
}
