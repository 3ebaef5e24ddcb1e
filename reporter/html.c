/* `memprofd export html`: one self-contained HTML report (no network at view time: the
 * styles, the data and the small vanilla-JS viewer are all inline). The summary, the
 * top-contexts table and the hot and cold data symbols are rendered here, so they read
 * without JavaScript; the script sorts the tables (also from a #sort=TABLE:COLUMN[:asc]
 * view link) and draws the flame graph and the heap map (bytes allocated by class per
 * time bucket) from the JSON data block. Every byte from the store is escaped for
 * its context: HTML text, attributes, or JSON inside <script>. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reporter/classify.h"
#include "reporter/export.h"
#include "reporter/format.h"
#include "reporter/progress.h"
#include "reporter/strtab.h"
#include "base/array.h"

#define HTML_TOP_CONTEXTS 200     /* rows of the top-contexts table */
#define HTML_FLAME_CONTEXTS 20000 /* contexts drawn in the flame graph; the rest as one */
#define HTML_NAME_MAX 512         /* longest frame name shown */
#define HTML_DATA_SYMBOLS 100     /* rows of each hot/cold data symbol table */

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
	uint64_t class_bytes[CLASSIFY_NCLASSES], class_ctx[CLASSIFY_NCLASSES], other[3];
	int err;
};

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
			char name[HTML_NAME_MAX];
			size_t idx;

			export_frame_name(name, sizeof(name), &r->frames[i], n ? &lines[k] : NULL);
			if (!first)
				fputs(sep, out);
			first = false;
			if (!as_index) {
				html_text(out, name);
				continue;
			}
			if (strtab_intern(&h->names, name, strlen(name), &idx) < 0) {
				h->err = -ENOMEM;
				return;
			}
			fprintf(out, "%zu", idx);
		}
	}
}

static void table_row(struct html *h, const struct store_ctx_row *r)
{
	const struct mib *m = &r->mib;
	FILE *out = h->rows;
	char b1[FMT_BUF], b2[FMT_BUF], b3[FMT_BUF], b4[FMT_BUF], b5[FMT_BUF];
	uint64_t life = classify_avg_lifetime_ns(m);
	double dens = classify_density(m);
	const char *cls = classify_name(classify_mib(m, &h->ev));

	fprintf(out, "<tr class=\"%s\"><td data-v=\"%u\">%u</td>", cls, h->n + 1, h->n + 1);
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", m->total_size, fmt_bytes(b1, m->total_size));
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", m->alloc_count,
		fmt_count(b2, m->alloc_count));
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", life, fmt_duration_ns(b3, life));
	fprintf(out, "<td data-v=\"%" PRIu64 "\">%s</td>", m->total_access_count,
		fmt_count(b4, m->total_access_count));
	fprintf(out, "<td data-v=\"%.9g\">%s</td>", dens, fmt_density(b5, dens));
	fprintf(out, "<td class=\"cls\">%s</td><td class=\"stack\" title=\"", cls);
	frame_names(h, r, false, out, "&#10;", false);
	fputs("\">", out);
	if (r->nframes)
		frame_names(h, r, false, out, " &lt; ", false);
	else
		fputs("(no frames)", out);
	fputs("</td></tr>\n", out);
}

static int ctx_cb(const struct store_ctx_row *r, void *arg)
{
	struct html *h = arg;
	const struct mib *m = &r->mib;
	enum classify_class c = classify_mib(m, &h->ev);

	progress_step(&h->pr);
	mib_combine(&h->total, m);
	h->class_bytes[c] += m->total_size;
	h->class_ctx[c]++;
	if (ARRAY_GROW(h->classes, h->classes_cap, h->nclasses, 1024) < 0)
		return -ENOMEM;
	h->classes[h->nclasses++] = (struct ctx_class){ .id = r->context_id, .cls = c };
	if (h->n < HTML_TOP_CONTEXTS)
		table_row(h, r);
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

static int cmp_class(const void *a, const void *b)
{
	int64_t x = ((const struct ctx_class *)a)->id, y = ((const struct ctx_class *)b)->id;

	return (x > y) - (x < y);
}

struct bucket_out {
	struct html *h;
	FILE *out;
	bool any;
	int64_t cur, first, last;
	uint64_t bytes[3];
};

static void bucket_flush(struct bucket_out *b)
{
	if (!b->any)
		return;
	fprintf(b->out, "%s[%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
		b->cur == b->first ? "" : ",\n", b->cur, b->bytes[CLASSIFY_HOT],
		b->bytes[CLASSIFY_NOTCOLD], b->bytes[CLASSIFY_COLD]);
	memset(b->bytes, 0, sizeof(b->bytes));
}

static int bucket_cb(const struct store_bucket_row *r, void *arg)
{
	struct bucket_out *b = arg;
	struct ctx_class key = { .id = r->context_id }, *c;

	if (!b->any || r->bucket_start != b->cur) {
		bucket_flush(b);
		if (!b->any)
			b->first = r->bucket_start;
		b->any = true;
		b->cur = b->last = r->bucket_start;
	}
	c = bsearch(&key, b->h->classes, b->h->nclasses, sizeof(key), cmp_class);
	/* The map has hot, notcold and cold columns: unknown (no decision) is not cold. */
	b->bytes[c && c->cls != CLASSIFY_UNKNOWN ? c->cls : CLASSIFY_NOTCOLD] += r->total_size;
	return 0;
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
	"h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}"
	"table{border-collapse:collapse}td,th{padding:3px 8px;text-align:right;"
	"border-bottom:1px solid #eee;white-space:nowrap}th{background:#f4f4f4;cursor:pointer;"
	"user-select:none}th.asc:after{content:' \\25b2'}th.desc:after{content:' \\25bc'}"
	"td.stack{text-align:left;font-family:monospace;max-width:640px;overflow:hidden;"
	"text-overflow:ellipsis}td.cls{text-align:left}tr.hot td.cls{color:#c0392b}"
	"tr.cold td.cls{color:#2471a3}table.kv td:first-child{text-align:left;color:#666}"
	"table.kv td{text-align:left}th.l,td.sym,td.sect{text-align:left}"
	".empty{color:#888;font-style:italic}"
	"#flame-graph{position:relative;width:100%;overflow:hidden;font:11px monospace}"
	"#flame-graph .fr{position:absolute;height:17px;box-sizing:border-box;border:1px solid"
	" #fff;overflow:hidden;white-space:nowrap;padding:0 2px;cursor:pointer}"
	"#heap-map svg text{font:11px sans-serif}";

/* The viewer: sortable table, flame graph (icicle, root on top, click to zoom), heap map. */
static const char html_script[] =
	"(function(){'use strict';\n"
	"var D=JSON.parse(document.getElementById('mpd-data').textContent);\n"
	"function fmtB(v){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(v>=1024&&i<4){v/=1024;i++}"
	"return (i?v.toFixed(1):v)+' '+u[i]}\n"
	"function fmtN(v){return v>=1e6?(v/1e6).toFixed(1)+'M':v>=1e4?(v/1e3).toFixed(1)+'k':''+v}\n"
	/* sortable tables */
	"document.querySelectorAll('table.sortable').forEach(function(t){\n"
	" t.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(){\n"
	"  var desc=!th.classList.contains('desc');t.querySelectorAll('th').forEach(function(x){"
	"x.classList.remove('asc','desc')});th.classList.add(desc?'desc':'asc');\n"
	"  var tb=t.tBodies[0],rows=Array.prototype.slice.call(tb.rows);\n"
	"  rows.sort(function(a,b){var x=a.cells[col],y=b.cells[col];var p=x.dataset.v,q=y.dataset.v;\n"
	"   var c=(p!==undefined&&q!==undefined)?(parseFloat(p)-parseFloat(q)):"
	"x.textContent.localeCompare(y.textContent);return desc?-c:c});\n"
	"  rows.forEach(function(r){tb.appendChild(r)})})})});\n"
	/* #sort=TABLE:COLUMN[:asc|desc] opens the page sorted (a link to a view) */
	"var sm=/^#sort=([\\w-]+):(\\d+)(?::(asc|desc))?$/.exec(location.hash);\n"
	"if(sm){var st=document.getElementById(sm[1]),sh=st&&st.tHead.rows[0].cells[+sm[2]];"
	"if(sh){if(sm[3]==='asc')sh.classList.add('desc');sh.click()}}\n"
	/* flame graph */
	"var W={bytes:0,objects:1,accesses:2},fg=document.getElementById('flame-graph'),"
	"sel=document.getElementById('flame-weight');\n"
	"function tree(){var root={n:'all',v:[0,0,0],c:{}};\n"
	" D.stacks.forEach(function(s){var node=root;add(node,s[0]);s[1].forEach(function(i){"
	"var k=D.names[i];node=node.c[k]||(node.c[k]={n:k,v:[0,0,0],c:{}});add(node,s[0])})});\n"
	" if(D.other[0]||D.other[1]||D.other[2]){var o=root.c['(other contexts)']={n:'(other contexts)',"
	"v:D.other.slice(),c:{}};add(root,D.other)}\n"
	" return root}\n"
	"function add(n,v){for(var i=0;i<3;i++)n.v[i]+=v[i]}\n"
	"var ROOT=tree(),zoom=ROOT;\n"
	"function color(s){var h=0;for(var i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;"
	"return 'hsl('+(10+h%45)+','+(60+h%30)+'%,'+(55+h%15)+'%)'}\n"
	"function draw(){var w=W[sel.value]||0,width=fg.clientWidth||1200,tot=zoom.v[w],maxd=0;"
	"fg.textContent='';\n"
	" if(!tot){fg.innerHTML='<p class=\"empty\">Nothing to draw for this weight.</p>';"
	"fg.style.height='';return}\n"
	" function place(n,x,d){var px=n.v[w]/tot*width;if(px<0.5)return;if(d>maxd)maxd=d;\n"
	"  var e=document.createElement('div');e.className='fr';e.style.left=x+'px';"
	"e.style.width=px+'px';e.style.top=(d*17)+'px';e.style.background=color(n.n);\n"
	"  var val=w===0?fmtB(n.v[0]):fmtN(n.v[w]);e.title=n.n+' \\u2014 '+val+' ('+"
	"(100*n.v[w]/tot).toFixed(1)+'%)';e.textContent=px>30?n.n:'';\n"
	"  e.addEventListener('click',function(){zoom=(n===zoom)?ROOT:n;draw()});fg.appendChild(e);\n"
	"  var kids=Object.keys(n.c).map(function(k){return n.c[k]}).sort(function(a,b){"
	"return b.v[w]-a.v[w]}),cx=x;\n"
	"  kids.forEach(function(k){place(k,cx,d+1);cx+=k.v[w]/tot*width})}\n"
	" place(zoom,0,0);fg.style.height=((maxd+1)*17)+'px'}\n"
	"sel.value=D.weight;sel.addEventListener('change',draw);draw();\n"
	/* heap map */
	"var hm=document.getElementById('heap-map');\n"
	"if(!D.buckets.length){hm.innerHTML='<p class=\"empty\">No time buckets recorded.</p>'}else{\n"
	" var NS='http://www.w3.org/2000/svg',cls=['hot','notcold','cold'],hue=[5,40,210],"
	"cw=Math.max(4,Math.min(40,Math.floor(1000/D.buckets.length))),ch=26,lw=70;\n"
	" var max=1;D.buckets.forEach(function(b){for(var i=1;i<4;i++)if(b[i]>max)max=b[i]});\n"
	" var svg=document.createElementNS(NS,'svg');svg.setAttribute('width',lw+cw*D.buckets.length+10);"
	"svg.setAttribute('height',ch*3+24);\n"
	" cls.forEach(function(c,r){var t=document.createElementNS(NS,'text');t.setAttribute('x',0);"
	"t.setAttribute('y',r*ch+17);t.textContent=c;svg.appendChild(t);\n"
	"  D.buckets.forEach(function(b,i){var v=b[r+1],e=document.createElementNS(NS,'rect');"
	"e.setAttribute('x',lw+i*cw);e.setAttribute('y',r*ch);e.setAttribute('width',cw-1);"
	"e.setAttribute('height',ch-2);e.setAttribute('class','cell '+c);\n"
	"   e.setAttribute('fill',v?'hsl('+hue[r]+',70%,'+(92-60*Math.sqrt(v/max)).toFixed(0)+'%)':'#f4f4f4');\n"
	"   var ti=document.createElementNS(NS,'title');ti.textContent=new Date(b[0]/1e6).toISOString()+"
	"' '+c+': '+fmtB(v);e.appendChild(ti);svg.appendChild(e)})});\n"
	" var t0=document.createElementNS(NS,'text');t0.setAttribute('x',lw);t0.setAttribute('y',ch*3+16);"
	"t0.textContent=new Date(D.buckets[0][0]/1e6).toISOString()+'  \\u2192  '+"
	"new Date(D.buckets[D.buckets.length-1][0]/1e6).toISOString();svg.appendChild(t0);\n"
	" hm.appendChild(svg)}\n"
	"document.body.setAttribute('data-ready','1');\n"
	"})();\n";

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
	for (int c = CLASSIFY_NCLASSES - 1; c >= 0; c--) {
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

int export_html(FILE *out, struct store *s, const struct export_opts *o)
{
	struct store_ctx_filter f = { .binary = o->binary, .sort = STORE_SORT_BYTES };
	struct html h = { .out = out, .o = o };
	char *tl_buf = NULL;
	size_t tl_len = 0;
	FILE *tl = NULL;
	struct bucket_out b = { .h = &h };
	struct data_out d = {0};
	int r = 0;

	r = classify_evidence_load(s, &h.ev);
	if (r < 0)
		return r;
	h.rows = open_memstream(&h.rows_buf, &h.rows_len);
	for (int i = 0; i < 2; i++)
		if (!(d.rows[i] = open_memstream(&d.buf[i], &d.len[i])))
			r = -ENOMEM;
	h.stacks = open_memstream(&h.stacks_buf, &h.stacks_len);
	tl = open_memstream(&tl_buf, &tl_len);
	if (!h.rows || !h.stacks || !tl)
		r = -ENOMEM;
	if (r == 0) {
		progress_start(&h.pr, "export html", o->contexts, EXPORT_PROGRESS_MIN_CONTEXTS,
			       o->progress);
		r = store_query_contexts(s, &f, ctx_cb, &h);
		progress_end(&h.pr);
	}
	if (r == 0) {
		qsort(h.classes, h.nclasses, sizeof(*h.classes), cmp_class);
		b.out = tl;
		r = store_query_buckets(s, &f, bucket_cb, &b);
		bucket_flush(&b);
	}
	for (d.pass = 0; d.pass < 2 && r == 0; d.pass++) {
		struct store_data_filter df = { .binary = o->binary, .now_ns = o->now_ns,
			.sort = d.pass ? STORE_DATA_SORT_SIZE : STORE_DATA_SORT_DENSITY };

		r = store_query_data(s, &df, data_cb, &d);
	}
	for (int i = 0; i < 2; i++)
		if (d.rows[i])
			fclose(d.rows[i]);
	if (h.rows)
		fclose(h.rows);
	if (h.stacks)
		fclose(h.stacks);
	if (tl)
		fclose(tl);
	if (r == 0) {
		const char *name = o->path && *o->path ? o->path : o->build_id ? o->build_id : "?";

		fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		      "<meta name=\"generator\" content=\"memprofd export html\">\n<title>memprofd: ",
		      out);
		html_text(out, name);
		fprintf(out, "</title>\n<style>%s</style>\n</head><body>\n<h1>memprofd report: ",
			html_style);
		html_text(out, name);
		fputs("</h1>\n", out);
		summary(out, &h, &b);
		fprintf(out, "<section id=\"contexts\"><h2>Top allocation contexts (%u of %u, by "
			"bytes)</h2>\n", h.n < HTML_TOP_CONTEXTS ? h.n : HTML_TOP_CONTEXTS, h.n);
		if (h.n) {
			fputs("<table id=\"ctx-table\" class=\"sortable\"><thead><tr><th>#</th>"
			      "<th>bytes</th><th>allocs</th><th>avg lifetime</th><th>accesses</th>"
			      "<th>density</th><th class=\"l\">class</th>"
			      "<th class=\"l\">stack (leaf first)</th></tr></thead>\n<tbody>\n", out);
			fwrite(h.rows_buf, 1, h.rows_len, out);
			fputs("</tbody></table>\n", out);
		} else {
			fputs("<p class=\"empty\">No allocation contexts recorded.</p>\n", out);
		}
		fputs("</section>\n<section id=\"data\"><h2>Hot and cold data symbols</h2>\n", out);
		if (d.total) {
			data_table(out, &d, 0, "hot");
			data_table(out, &d, 1, "cold");
		} else {
			fputs("<p class=\"empty\">No static data accesses recorded.</p>\n", out);
		}
		fputs("</section>\n<section id=\"flame\"><h2>Flame graph</h2>\n"
		      "<label>weight <select id=\"flame-weight\"><option>bytes</option>"
		      "<option>objects</option><option>accesses</option></select></label> "
		      "(click a frame to zoom, again to reset)\n<div id=\"flame-graph\"></div>\n"
		      "</section>\n<section id=\"heap\"><h2>Heap map: bytes allocated by class "
		      "per time bucket</h2>\n<div id=\"heap-map\"></div>\n</section>\n"
		      "<script type=\"application/json\" id=\"mpd-data\">{\"weight\": ", out);
		json_in_script(out, export_weight_name(o->weight));
		fputs(",\n\"names\": [", out);
		for (size_t i = 0; i < h.names.n; i++) {
			if (i)
				fputs(",\n", out);
			json_in_script(out, strtab_key(&h.names, i));
		}
		fputs("],\n\"stacks\": [", out);
		fwrite(h.stacks_buf, 1, h.stacks_len, out);
		fprintf(out, "],\n\"other\": [%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\n\"buckets\": [",
			h.other[0], h.other[1], h.other[2]);
		fwrite(tl_buf, 1, tl_len, out);
		fprintf(out, "]}</script>\n<script>%s</script>\n</body></html>\n", html_script);
		if (ferror(out))
			r = -EIO;
	}
	free(h.rows_buf);
	free(h.stacks_buf);
	free(tl_buf);
	free(d.buf[0]);
	free(d.buf[1]);
	free(h.classes);
	strtab_free(&h.names);
	return r;
}
