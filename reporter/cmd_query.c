/* `memprofd query contexts|data|binaries|processes|status`: options, then one report as
 * an aligned table (at most FMT_TABLE_WIDTH columns), JSON (one array) or CSV (RFC 4180).
 * The store is opened read-only, so this runs beside a recording daemon. Exit 0 on
 * success, 1 on a runtime failure, 2 on bad usage; errors are one line on stderr. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "fleet/src.h"
#include "reporter/binsel.h"
#include "reporter/classify.h"
#include "reporter/ctx_table.h"
#include "reporter/estimate.h"
#include "reporter/export.h"
#include "reporter/format.h"
#include "reporter/status_governor.h"
#include "reporter/status_mem_drops.h"
#include "reporter/query.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/path.h"
#include "base/log.h"

#define NS_PER_MS UINT64_C(1000000)
#define STACK_SEP " < "            /* between frames in the table, leaf first */
#define CSV_FRAME_SEP ";"          /* between frames in a CSV field, leaf first */
#define EOL_CSV "\r\n"             /* RFC 4180 records end in CRLF */

/* ---- contexts ---- */

struct ctx_out {
	FILE *out;
	enum query_format fmt;
	const struct query_view *view;
	unsigned n;
	struct classify_evidence ev;   /* the store's, for every row's class */
};

/* "0x1234": a frame without a symbol, by file offset. */
static void frame_addr(char *buf, size_t n, const struct store_frame *f)
{
	snprintf(buf, n, "0x%" PRIx64, f->offset);
}

/* The object a frame is in: its path as mapped (null when unknown) and build-id; closes
 * the frame's object. */
static void print_frame_module(FILE *out, const struct store_frame *f)
{
	fputs(", \"module\": ", out);
	if (f->path && *f->path)
		fmt_json_str(out, f->path);
	else
		fputs("null", out);
	fputs(", \"build_id\": ", out);
	fmt_json_str(out, f->build_id ? f->build_id : "");
	fputs("}", out);
}

static void json_bound(FILE *out, const char *key, const struct estimate *e, bool hi)
{
	if (e->kind == ESTIMATE_UNKNOWN || (hi && !e->hi_known))
		fprintf(out, ", \"%s\": null", key);
	else
		fprintf(out, ", \"%s\": %" PRIu64, key, hi ? e->hi : e->lo);
}

/* Issue 21's additive fields: live at exit (DESIGN.md), the samples behind each
 * estimate and its 95% Poisson interval (null: unknown, a store older than schema 9). */
static void print_ctx_evidence_json(FILE *out, const struct mib *m)
{
	struct estimate cnt, bytes, acc;

	estimate_mib(m, &cnt, &bytes, &acc);
	fprintf(out, ", \"live_at_exit_count\": %" PRIu64 ", \"live_at_exit_bytes\": %" PRIu64
		", \"live_at_exit_lifetime_ms\": %" PRIu64 ", \"freed_lifetime_ms\": %" PRIu64,
		m->live_at_exit_count, m->live_at_exit_bytes,
		m->live_at_exit_lifetime_ns / NS_PER_MS,
		(m->total_lifetime_ns - (m->live_at_exit_lifetime_ns < m->total_lifetime_ns ?
					 m->live_at_exit_lifetime_ns : m->total_lifetime_ns)) /
		NS_PER_MS);
	if (cnt.kind == ESTIMATE_UNKNOWN)
		fputs(", \"alloc_samples\": null", out);
	else
		fprintf(out, ", \"alloc_samples\": %" PRIu64, m->alloc_samples);
	json_bound(out, "alloc_count_lo", &cnt, false);
	json_bound(out, "alloc_count_hi", &cnt, true);
	json_bound(out, "total_size_lo", &bytes, false);
	json_bound(out, "total_size_hi", &bytes, true);
	json_bound(out, "est_accesses_lo", &acc, false);
	json_bound(out, "est_accesses_hi", &acc, true);
	fprintf(out, ", \"few_samples\": %s", estimate_weak(&cnt, &acc) ? "true" : "false");
}

/* This additive fields: the density's 95% interval (null: no evidence bounds it)
 * and the watch evidence behind the class. */
static void print_ctx_density_interval_json(FILE *out, const struct mib *m,
					    const struct classify_evidence *ev)
{
	double lo, hi;

	classify_density_interval(m, ev, &lo, &hi);
	fprintf(out, ", \"density_interval\": [%.9g, ", lo);
	if (isfinite(hi))
		fprintf(out, "%.9g]", hi);
	else
		fputs("null]", out);
	/* The context's own watch evidence: traps, and granule-nanoseconds watched. */
	fprintf(out, ", \"watch_hits\": %" PRIu64 ", \"watch_ns\": %" PRIu64, m->watch_hits,
		m->watch_ns);
}

static void print_ctx_json(FILE *out, const struct store_ctx_row *r,
			   const struct classify_evidence *ev)
{
	const struct mib *m = &r->mib;
	char addr[32];

	fputs("{\"build_id\": ", out);
	fmt_json_str(out, r->build_id ? r->build_id : "");
	fputs(", \"binary\": ", out);
	fmt_json_str(out, r->binary ? r->binary : "");
	fputs(", \"frames\": [", out);
	bool first = true;
	for (unsigned i = 0; i < r->nframes; i++) {
		const struct store_frame *f = &r->frames[i];

		frame_addr(addr, sizeof(addr), f);
		if (!f->nlines) {
			fputs(first ? "{\"function\": " : ", {\"function\": ", out);
			fmt_json_str(out, f->function);
			fprintf(out, ", \"file\": null, \"line\": null, \"column\": null, "
				"\"inlined\": false, \"address\": \"%s\"", addr);
			print_frame_module(out, f);
			first = false;
			continue;
		}
		/* An address inside inlined code is one entry per function of its inline
		 * chain, leaf first, all at the same address. */
		for (unsigned j = 0; j < f->nlines; j++) {
			const struct store_line *l = &f->lines[j];

			fputs(first ? "{\"function\": " : ", {\"function\": ", out);
			fmt_json_str(out, export_line_function(f, j) ? export_line_function(f, j) :
				     f->function);
			fputs(", \"file\": ", out);
			fmt_json_str(out, l->file);
			if (l->line)
				fprintf(out, ", \"line\": %u", l->line);
			else
				fputs(", \"line\": null", out);
			if (l->column)
				fprintf(out, ", \"column\": %u", l->column);
			else
				fputs(", \"column\": null", out);
			fprintf(out, ", \"inlined\": %s, \"address\": \"%s\"",
				l->inlined ? "true" : "false", addr);
			print_frame_module(out, f);
			first = false;
		}
	}
	fprintf(out, "], \"truncated\": %s", r->truncated ? "true" : "false");
	fprintf(out, ", \"alloc_count\": %" PRIu64 ", \"total_size\": %" PRIu64
		", \"min_size\": %" PRIu64 ", \"max_size\": %" PRIu64
		", \"total_lifetime_ms\": %" PRIu64 ", \"min_lifetime_ms\": %" PRIu64
		", \"max_lifetime_ms\": %" PRIu64 ", \"access_samples\": %" PRIu64
		", \"est_accesses\": %" PRIu64 ", \"lifetime_access_density\": %.9g"
		", \"class\": \"%s\"",
		m->alloc_count, m->total_size, m->min_size, m->max_size,
		m->total_lifetime_ns / NS_PER_MS, m->min_lifetime_ns / NS_PER_MS,
		m->max_lifetime_ns / NS_PER_MS, m->access_samples, m->total_access_count,
		classify_density(m), classify_name(classify_mib(m, ev)));
	/* Bytes accessed: null where accesses were estimated without widths (a store before
	 * schema 17, or --alloc sampled's watch estimates). */
	if (m->total_access_bytes || !m->total_access_count)
		fprintf(out, ", \"est_access_bytes\": %" PRIu64, m->total_access_bytes);
	else
		fputs(", \"est_access_bytes\": null", out);
	print_ctx_density_interval_json(out, m, ev);
	print_ctx_evidence_json(out, m);
	fputc('}', out);
}

static void csv_bound(FILE *out, const struct estimate *e, bool hi)
{
	if (e->kind == ESTIMATE_UNKNOWN || (hi && !e->hi_known))
		fputc(',', out);   /* empty: unknown */
	else
		fprintf(out, ",%" PRIu64, hi ? e->hi : e->lo);
}

/* The JSON's additive fields, in CTX_CSV_EVIDENCE_HEADER's order. */
#define CTX_CSV_EVIDENCE_HEADER ",live_at_exit_count,live_at_exit_bytes,alloc_samples," \
	"alloc_count_lo,alloc_count_hi,total_size_lo,total_size_hi,est_accesses_lo," \
	"est_accesses_hi,few_samples"
static void print_ctx_evidence_csv(FILE *out, const struct mib *m)
{
	struct estimate cnt, bytes, acc;

	estimate_mib(m, &cnt, &bytes, &acc);
	fprintf(out, ",%" PRIu64 ",%" PRIu64 ",", m->live_at_exit_count, m->live_at_exit_bytes);
	if (cnt.kind != ESTIMATE_UNKNOWN)
		fprintf(out, "%" PRIu64, m->alloc_samples);
	csv_bound(out, &cnt, false);
	csv_bound(out, &cnt, true);
	csv_bound(out, &bytes, false);
	csv_bound(out, &bytes, true);
	csv_bound(out, &acc, false);
	csv_bound(out, &acc, true);
	fprintf(out, ",%s", estimate_weak(&cnt, &acc) ? "true" : "false");
}

static void print_ctx_csv(FILE *out, const struct store_ctx_row *r,
			  const struct classify_evidence *ev)
{
	const struct mib *m = &r->mib;
	_cleanup_free_ char *frames = NULL;
	size_t len = 0;
	FILE *fs = open_memstream(&frames, &len);
	char addr[32];

	for (unsigned i = 0; fs && i < r->nframes; i++) {
		const struct store_frame *f = &r->frames[i];

		frame_addr(addr, sizeof(addr), f);
		fprintf(fs, "%s%s", i ? CSV_FRAME_SEP : "", f->function ? f->function : addr);
	}
	if (fs)
		fclose(fs);
	fmt_csv_field(out, r->build_id);
	fputc(',', out);
	fmt_csv_field(out, r->binary);
	fputc(',', out);
	fmt_csv_field(out, frames);
	fprintf(out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.9g,%s",
		m->alloc_count, m->total_size, m->min_size, m->max_size,
		m->total_lifetime_ns / NS_PER_MS, m->min_lifetime_ns / NS_PER_MS,
		m->max_lifetime_ns / NS_PER_MS, m->access_samples, m->total_access_count,
		classify_density(m), classify_name(classify_mib(m, ev)));
	print_ctx_evidence_csv(out, m);
	fputs(EOL_CSV, out);
}

#define W_BYTES FMT_BYTES_MAX
#define W_LIFE FMT_DURATION_MAX
#define W_ACCESSES 8
#define W_DENSITY FMT_DENSITY_MAX
#define W_CLASS 7
#define W_BINARY 12

/* A table cell under the view, malloc'd: the whole text (control bytes as '?') when the
 * view is unlimited, else at most width columns ending in "..." when cut. */
static char *view_cell(const struct query_view *v, size_t width, const char *src)
{
	size_t len = src ? strlen(src) : 0, w = !v->width && len > width ? len : width;
	char *c = malloc(w + 1);

	if (c)
		fmt_cell(c, w, src ? src : "");
	return c;
}

/* The last column's width: what the line has left after fixed columns, at least min. */
static size_t rest_width(const struct query_view *v, size_t fixed, size_t min)
{
	return v->width > fixed + min ? v->width - fixed : min;
}

static int ctx_cb(const struct store_ctx_row *r, void *arg)
{
	struct ctx_out *o = arg;

	switch (o->fmt) {
	case QUERY_JSON:
		fputs(o->n ? ",\n" : "\n", o->out);
		print_ctx_json(o->out, r, &o->ev);
		break;
	case QUERY_CSV:
		print_ctx_csv(o->out, r, &o->ev);
		break;
	default:
		ctx_table_row(o->out, r, o->view);
	}
	o->n++;
	return 0;
}

/* --class: judged by the store on the summed MIB, before a context's frames are read. */
struct class_want {
	int cls;
	const struct classify_evidence *ev;
};

static bool class_accept(const struct mib *sums, void *arg)
{
	const struct class_want *w = arg;

	return (int)classify_mib(sums, w->ev) == w->cls;
}

/* cls >= 0: only that class; the limit then counts the rows that pass. */
static int print_contexts(FILE *out, struct store *s, const struct store_ctx_filter *f,
			  enum query_format fmt, int cls, const struct query_view *v)
{
	struct ctx_out o = { .out = out, .fmt = fmt };
	struct store_ctx_filter g = { .sort = STORE_SORT_BYTES };
	struct class_want want = { .cls = cls, .ev = &o.ev };
	struct query_view view = v ? *v : (struct query_view){ 0 };
	int r = classify_evidence_load(s, &o.ev);

	if (r < 0)
		return r;
	view.ev = &o.ev;
	o.view = &view;
	v = &view;
	if (f)
		g = *f;
	if (cls >= 0) {
		g.accept = class_accept;
		g.accept_arg = &want;
	}
	if (fmt == QUERY_JSON)
		fputc('[', out);
	else if (fmt == QUERY_CSV)
		fputs("build_id,binary,frames,alloc_count,total_size,min_size,max_size,"
		      "total_lifetime_ms,min_lifetime_ms,max_lifetime_ms,access_samples,"
		      "est_accesses,lifetime_access_density,class" CTX_CSV_EVIDENCE_HEADER EOL_CSV,
		      out);
	else
		ctx_table_header(out, v);
	r = store_query_contexts(s, &g, ctx_cb, &o);
	if (r < 0)
		return r;
	if (fmt == QUERY_JSON)
		fputs(o.n ? "\n]\n" : "]\n", out);
	else if (fmt == QUERY_TABLE && !o.n)
		fputs("(no allocation contexts)\n", out);
	else if (fmt == QUERY_TABLE)
		ctx_table_legend(out, v);
	return 0;
}

int query_print_contexts(FILE *out, struct store *s, const struct store_ctx_filter *f,
			 enum query_format fmt)
{
	return print_contexts(out, s, f, fmt, -1, &QUERY_VIEW_DEFAULT);
}

/* ---- data: static data symbols ---- */

struct data_out {
	FILE *out;
	enum query_format fmt;
	unsigned n;
	int cls;            /* only symbols of this enum classify_class; -1 for all */
	const struct query_view *view;
	unsigned limit;     /* with cls: rows to print, 0 for all */
};

#define W_SECTION 8
#define W_DATA_FIXED (W_ACCESSES * 2 + W_BYTES + W_DENSITY + W_CLASS + W_SECTION + W_BINARY + 7)

static enum classify_class data_class(const struct store_data_row *r)
{
	return classify_data(r->est_accesses, r->size, r->observed_ns);
}

/* DESIGN.md's fields, in its order; a missing section is "" so every field keeps its type. */
static void print_data_json(FILE *out, const struct store_data_row *r)
{
	uint64_t lo, hi;

	est_interval(r->est_accesses, r->access_samples, &lo, &hi);
	fputs("{\"build_id\": ", out);
	fmt_json_str(out, r->build_id ? r->build_id : "");
	fputs(", \"binary\": ", out);
	fmt_json_str(out, r->binary ? r->binary : "");
	fputs(", \"symbol\": ", out);
	fmt_json_str(out, r->symbol ? r->symbol : "");
	fputs(", \"section\": ", out);
	fmt_json_str(out, r->section ? r->section : "");
	fprintf(out, ", \"address\": \"0x%" PRIx64 "\", \"size\": %" PRIu64
		", \"access_samples\": %" PRIu64 ", \"est_accesses\": %" PRIu64
		", \"est_accesses_lo\": %" PRIu64 ", \"est_accesses_hi\": %" PRIu64
		", \"class\": \"%s\"}", r->address, r->size, r->access_samples, r->est_accesses,
		lo, hi, classify_name(data_class(r)));
}

static void print_data_csv(FILE *out, const struct store_data_row *r)
{
	uint64_t lo, hi;

	est_interval(r->est_accesses, r->access_samples, &lo, &hi);
	fmt_csv_field(out, r->build_id);
	fputc(',', out);
	fmt_csv_field(out, r->binary);
	fputc(',', out);
	fmt_csv_field(out, r->symbol);
	fputc(',', out);
	fmt_csv_field(out, r->section);
	fprintf(out, ",0x%" PRIx64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64
		EOL_CSV, r->address, r->size, r->access_samples, r->est_accesses,
		classify_name(data_class(r)), lo, hi);
}

static void print_data_table_header(FILE *out)
{
	fprintf(out, "%*s %*s %*s %*s %-*s %-*s %-*s %s\n", W_ACCESSES, "SAMPLES",
		W_ACCESSES, "ACCESSES", W_BYTES, "SIZE", W_DENSITY, "DENSITY", W_CLASS, "CLASS",
		W_SECTION, "SECTION", W_BINARY, "BINARY", "SYMBOL");
}

static void print_data_table(FILE *out, const struct store_data_row *r,
			     const struct query_view *v)
{
	char samples[FMT_BUF], acc[FMT_BUF], size[FMT_BUF], dens[FMT_BUF], addr[32];
	const char *b = base_name(r->binary);

	/* An address no symbol covers is shown by its link-time address. */
	snprintf(addr, sizeof(addr), "(0x%" PRIx64 ")", r->address);
	_cleanup_free_ char *sect = view_cell(v, W_SECTION, r->section && *r->section ?
					      r->section : "-");
	_cleanup_free_ char *bin = view_cell(v, W_BINARY, b && *b ? b : r->build_id &&
					     *r->build_id ? r->build_id : "?");
	_cleanup_free_ char *sym = view_cell(v, rest_width(v, W_DATA_FIXED, 20),
					     r->symbol && *r->symbol ? r->symbol : addr);

	if (!sect || !bin || !sym)
		return;
	fprintf(out, "%*s %*s %*s %*s %-*s %-*s %-*s %s\n",
		W_ACCESSES, fmt_count(samples, r->access_samples),
		W_ACCESSES, fmt_count(acc, r->est_accesses),
		W_BYTES, fmt_bytes(size, r->size),
		W_DENSITY, fmt_density(dens, store_data_density(r->est_accesses, r->size,
								 r->observed_ns)),
		W_CLASS, classify_name(data_class(r)), W_SECTION, sect, W_BINARY, bin, sym);
}

static int data_cb(const struct store_data_row *r, void *arg)
{
	struct data_out *o = arg;

	if (o->cls >= 0 && (int)data_class(r) != o->cls)
		return 0;
	switch (o->fmt) {
	case QUERY_JSON:
		fputs(o->n ? ",\n" : "\n", o->out);
		print_data_json(o->out, r);
		break;
	case QUERY_CSV:
		print_data_csv(o->out, r);
		break;
	default:
		print_data_table(o->out, r, o->view);
	}
	o->n++;
	return o->cls >= 0 && o->limit && o->n >= o->limit ? 1 : 0;   /* 1: enough rows */
}

/* cls >= 0: only that class; the limit then counts the rows that pass. */
static int print_data(FILE *out, struct store *s, const struct store_data_filter *f,
		      enum query_format fmt, int cls, const struct query_view *v)
{
	struct data_out o = { .out = out, .fmt = fmt, .cls = cls, .limit = f ? f->limit : 0,
			      .view = v };
	struct store_data_filter all_rows = {0};
	int r;

	if (f)
		all_rows = *f;
	if (cls >= 0)
		all_rows.limit = 0;
	if (fmt == QUERY_JSON)
		fputc('[', out);
	else if (fmt == QUERY_CSV)
		fputs("build_id,binary,symbol,section,address,size,access_samples,est_accesses,"
		      "class,est_accesses_lo,est_accesses_hi" EOL_CSV, out);
	else
		print_data_table_header(out);
	r = store_query_data(s, &all_rows, data_cb, &o);
	if (r < 0)
		return r;
	if (fmt == QUERY_JSON)
		fputs(o.n ? "\n]\n" : "]\n", out);
	else if (fmt == QUERY_TABLE && !o.n)
		fputs("(no static data accesses)\n", out);
	else if (fmt == QUERY_TABLE)
		ctx_table_wrap(out, "SAMPLES: access samples that hit the symbol; ACCESSES: the "
			       "loads and stores they stand for (estimated); SIZE: the symbol's; "
			       "DENSITY: estimated accesses per byte per second of the runs that "
			       "observed it (cold < 0.05, hot > 1000)", v->width);
	return 0;
}

int query_print_data(FILE *out, struct store *s, const struct store_data_filter *f,
		     enum query_format fmt)
{
	return print_data(out, s, f, fmt, -1, &QUERY_VIEW_DEFAULT);
}

/* ---- binaries ---- */

struct list_out {
	FILE *out;
	enum query_format fmt;
	unsigned n;
	int64_t now_ns;
	struct store *s;    /* status: for each run's access classes */
	const struct query_view *view;
};

#define W_BUILD_ID 16
#define W_NUM 8

static int binary_cb(const struct store_binary_row *r, void *arg)
{
	struct list_out *o = arg;
	char bytes[FMT_BUF], allocs[FMT_BUF], nctx[FMT_BUF], nproc[FMT_BUF];
	char id[W_BUILD_ID + 1];

	switch (o->fmt) {
	case QUERY_JSON:
		fputs(o->n ? ",\n{\"build_id\": " : "\n{\"build_id\": ", o->out);
		fmt_json_str(o->out, r->build_id);
		fputs(", \"binary\": ", o->out);
		fmt_json_str(o->out, r->path);
		fprintf(o->out, ", \"processes\": %" PRIu64 ", \"contexts\": %" PRIu64
			", \"alloc_count\": %" PRIu64 ", \"total_size\": %" PRIu64 "}",
			r->processes, r->contexts, r->alloc_count, r->total_size);
		break;
	case QUERY_CSV:
		fmt_csv_field(o->out, r->build_id);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->path);
		fprintf(o->out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 EOL_CSV,
			r->processes, r->contexts, r->alloc_count, r->total_size);
		break;
	default:
		fmt_cell(id, W_BUILD_ID, r->build_id && *r->build_id ? r->build_id : "-");
		_cleanup_free_ char *path = view_cell(o->view, rest_width(o->view,
			W_BYTES + W_NUM * 3 + W_BUILD_ID + 5, 20), r->path && *r->path ? r->path : "?");

		if (!path)
			return -ENOMEM;
		fprintf(o->out, "%*s %*s %*s %*s %-*s %s\n",
			W_BYTES, fmt_bytes(bytes, r->total_size),
			W_NUM, fmt_count(allocs, r->alloc_count), W_NUM, fmt_count(nctx, r->contexts),
			W_NUM, fmt_count(nproc, r->processes), W_BUILD_ID, id, path);
	}
	o->n++;
	return 0;
}

static int print_binaries(FILE *out, struct store *s, enum query_format fmt,
			  const struct query_view *v)
{
	struct list_out o = { .out = out, .fmt = fmt, .view = v };
	int r;

	if (fmt == QUERY_JSON)
		fputc('[', out);
	else if (fmt == QUERY_CSV)
		fputs("build_id,binary,processes,contexts,alloc_count,total_size" EOL_CSV, out);
	else
		fprintf(out, "%*s %*s %*s %*s %-*s %s\n", W_BYTES, "BYTES", W_NUM, "ALLOCS",
			W_NUM, "CONTEXTS", W_NUM, "PROCS", W_BUILD_ID, "BUILD-ID", "BINARY");
	r = store_query_binaries(s, binary_cb, &o);
	if (r < 0)
		return r;
	if (fmt == QUERY_JSON)
		fputs(o.n ? "\n]\n" : "]\n", out);
	else if (fmt == QUERY_TABLE && !o.n)
		fputs("(no binaries)\n", out);
	return 0;
}

/* ---- processes ---- */

#define W_PID 8
#define W_COMM 16
#define W_STATE 7

static void json_opt_i64(FILE *out, const char *key, int64_t v)
{
	if (v)
		fprintf(out, ", \"%s\": %" PRId64, key, v);
	else
		fprintf(out, ", \"%s\": null", key);
}

static int proc_cb(const struct store_proc_row *r, void *arg)
{
	struct list_out *o = arg;
	char bytes[FMT_BUF], allocs[FMT_BUF], nctx[FMT_BUF];
	char comm[W_COMM + 1];

	switch (o->fmt) {
	case QUERY_JSON:
		fprintf(o->out, "%s{\"pid\": %d, \"start_ns\": %" PRIu64 ", \"ppid\": %d, \"comm\": ",
			o->n ? ",\n" : "\n", r->pid, r->start_ns, r->ppid);
		fmt_json_str(o->out, r->comm);
		fputs(", \"exe\": ", o->out);
		fmt_json_str(o->out, r->exe);
		fputs(", \"build_id\": ", o->out);
		fmt_json_str(o->out, r->build_id);
		json_opt_i64(o->out, "run_id", r->run_id);
		json_opt_i64(o->out, "exit_ns", r->exit_ns);
		fprintf(o->out, ", \"contexts\": %" PRIu64 ", \"alloc_count\": %" PRIu64
			", \"total_size\": %" PRIu64 "}", r->contexts, r->alloc_count, r->total_size);
		break;
	case QUERY_CSV:
		fprintf(o->out, "%d,%" PRIu64 ",%d,", r->pid, r->start_ns, r->ppid);
		fmt_csv_field(o->out, r->comm);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->exe);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->build_id);
		fprintf(o->out, ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 EOL_CSV,
			r->run_id, r->exit_ns, r->contexts, r->alloc_count, r->total_size);
		break;
	default:
		fmt_cell(comm, W_COMM, r->comm ? r->comm : "?");
		_cleanup_free_ char *exe = view_cell(o->view, rest_width(o->view,
			W_PID * 3 + W_COMM + W_STATE + W_BYTES + W_NUM + 7, 20), r->exe ? r->exe : "?");

		if (!exe)
			return -ENOMEM;
		fprintf(o->out, "%*d %*d %-*s %-*s %*s %*s %*s %s\n",
			W_PID, r->pid, W_PID, r->ppid, W_COMM, comm,
			W_STATE, r->exit_ns ? "exited" : "running",
			W_BYTES, fmt_bytes(bytes, r->total_size),
			W_PID, fmt_count(allocs, r->alloc_count), W_NUM, fmt_count(nctx, r->contexts),
			exe);
	}
	o->n++;
	return 0;
}

static int print_processes(FILE *out, struct store *s, const struct store_proc_filter *f,
			   enum query_format fmt, const struct query_view *v)
{
	struct list_out o = { .out = out, .fmt = fmt, .view = v };
	int r;

	if (fmt == QUERY_JSON)
		fputc('[', out);
	else if (fmt == QUERY_CSV)
		fputs("pid,start_ns,ppid,comm,exe,build_id,run_id,exit_ns,contexts,alloc_count,"
		      "total_size" EOL_CSV, out);
	else
		fprintf(out, "%*s %*s %-*s %-*s %*s %*s %*s %s\n", W_PID, "PID", W_PID, "PPID",
			W_COMM, "COMM", W_STATE, "STATE", W_BYTES, "BYTES", W_PID, "ALLOCS",
			W_NUM, "CONTEXTS", "EXE");
	r = store_query_processes(s, f, proc_cb, &o);
	if (r < 0)
		return r;
	if (fmt == QUERY_JSON)
		fputs(o.n ? "\n]\n" : "]\n", out);
	else if (fmt == QUERY_TABLE && !o.n)
		fputs("(no processes)\n", out);
	return 0;
}

/* ---- status: runs and their counters ---- */

#define W_RUN_ID 5
#define W_STARTED 20
#define W_STATUS 16

static const char *iso_utc(char *buf, size_t n, int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, n, "?");
	return buf;
}

/* The attrib classes (daemon/attrib/attrib.h, attrib_class_name()), in its enum order; a class
 * the store has beyond these is shown after them. */
static const char *const access_class_names[] = {
	"heap", "heap_untracked", "static", "stack", "tls", "anon", "file", "unknown",
};
#define N_STD_CLASSES (sizeof(access_class_names) / sizeof(access_class_names[0]))
#define MAX_CLASSES 16      /* classes shown per run; more are summed into the last */

struct run_classes {
	unsigned n;
	char *name[MAX_CLASSES];    /* owned for the classes beyond the standard ones */
	uint64_t samples[MAX_CLASSES], est[MAX_CLASSES];
	bool any;                   /* the run stored at least one class row */
};

static void run_classes_free(struct run_classes *c)
{
	for (unsigned i = N_STD_CLASSES; i < c->n; i++)
		free(c->name[i]);
}

static int class_cb(const struct store_access_class_row *r, void *arg)
{
	struct run_classes *c = arg;
	unsigned i;

	c->any = true;
	for (i = 0; i < c->n; i++)
		if (!strcmp(c->name[i], r->cls))
			break;
	if (i == c->n) {
		if (c->n == MAX_CLASSES) {
			i = MAX_CLASSES - 1;
		} else {
			c->name[i] = strdup(r->cls);
			if (!c->name[i])
				return -ENOMEM;
			c->n++;
		}
	}
	c->samples[i] += r->samples;
	c->est[i] += r->est_accesses;
	return 0;
}

static int load_classes(struct store *s, int64_t run_id, struct run_classes *c)
{
	*c = (struct run_classes){ .n = N_STD_CLASSES };
	for (unsigned i = 0; i < N_STD_CLASSES; i++)
		c->name[i] = (char *)access_class_names[i];
	return s ? store_query_access_classes(s, run_id, class_cb, c) : 0;
}

/* "a\nb\n" -> ["a", "b"] (empty lines dropped). */
static void json_lines(FILE *out, const char *text)
{
	bool first = true;

	fputc('[', out);
	for (const char *p = text; p && *p;) {
		size_t len = strcspn(p, "\n");

		if (len) {
			_cleanup_free_ char *line = strndup(p, len);

			fputs(first ? "" : ", ", out);
			fmt_json_str(out, line ? line : "");
			first = false;
		}
		p += len + (p[len] == '\n');
	}
	fputc(']', out);
}

#define W_INDENT 6          /* status: the access lines under a run */

/* "label item, item, ..." wrapped at FMT_TABLE_WIDTH, continuation lines aligned. */
static void table_wrapped(FILE *out, const char *label, const char *const *items, unsigned n)
{
	size_t col = (size_t)fprintf(out, "%*s%s", W_INDENT, "", label);
	size_t start = col;

	for (unsigned i = 0; i < n; i++) {
		char cell[FMT_TABLE_WIDTH + 1];
		size_t len = fmt_cell(cell, FMT_TABLE_WIDTH - start - 2, items[i]);
		bool last = i + 1 == n;

		if (col > start && col + 1 + len + !last > FMT_TABLE_WIDTH) {
			fprintf(out, "\n%*s", (int)start, "");
			col = start;
		}
		col += (size_t)fprintf(out, "%s%s%s", col > start ? " " : "", cell, last ? "" : ",");
	}
	fputc('\n', out);
}

static void print_run_access_table(FILE *out, const struct store_run_row *r,
				   const struct run_classes *c, const struct query_view *v)
{
	char items[MAX_CLASSES][FMT_TABLE_WIDTH + 1];
	const char *ptrs[MAX_CLASSES];

	if (!r->access_source && !r->access_reasons && !c->any)
		return;
	_cleanup_free_ char *src = view_cell(v, rest_width(v, W_INDENT + 15, 20),
					     r->access_source ? r->access_source : "none");

	fprintf(out, "%*saccess source: %s\n", W_INDENT, "", src ? src : "?");
	for (const char *p = r->access_reasons; p && *p;) {
		size_t len = strcspn(p, "\n");

		if (len) {
			_cleanup_free_ char *line = strndup(p, len);
			_cleanup_free_ char *reason = view_cell(v, rest_width(v, W_INDENT + 2, 20),
								line ? line : "");

			fprintf(out, "%*s  %s\n", W_INDENT, "", reason ? reason : "?");
		}
		p += len + (p[len] == '\n');
	}
	for (unsigned i = 0; i < c->n; i++) {
		char num[FMT_BUF];

		snprintf(items[i], sizeof(items[i]), "%.40s %s", c->name[i],
			 fmt_count(num, c->samples[i]));
		ptrs[i] = items[i];
	}
	table_wrapped(out, "samples: ", ptrs, c->n);
}

struct unsym_out { FILE *out; enum query_format fmt; unsigned n; };

static int unsym_cb(const struct store_unsym_row *u, void *arg)
{
	struct unsym_out *o = arg;
	char num[FMT_BUF], bin[FMT_TABLE_WIDTH + 1];

	if (o->fmt == QUERY_JSON) {
		fputs(o->n ? ", {\"build_id\": " : "{\"build_id\": ", o->out);
		fmt_json_str(o->out, u->build_id ? u->build_id : "");
		fputs(", \"binary\": ", o->out);
		fmt_json_str(o->out, u->binary ? u->binary : "");
		fprintf(o->out, ", \"samples\": %" PRIu64 ", \"est_accesses\": %" PRIu64 "}",
			u->samples, u->est_accesses);
	} else {
		fmt_cell(bin, FMT_TABLE_WIDTH - W_INDENT - 40, u->binary ? u->binary : "?");
		fprintf(o->out, "%*sunsymbolized data: %s samples in %s\n", W_INDENT, "",
			fmt_count(num, u->samples), bin);
	}
	o->n++;
	return 0;
}

/* A run's static-data samples that no symbol covers, per binary (never a data row). */
static int print_unsym(FILE *out, struct store *s, int64_t run_id, enum query_format fmt)
{
	struct unsym_out o = { out, fmt, 0 };

	return store_query_unsymbolized(s, run_id, unsym_cb, &o);
}

static int run_cb(const struct store_run_row *r, void *arg)
{
	struct list_out *o = arg;
	_cleanup_(run_classes_free) struct run_classes cls;
	int rc = load_classes(o->s, r->id, &cls);

	if (rc < 0)
		return rc;
	const struct store_run_stats *st = &r->stats;
	uint64_t drops = st->drops_ringbuf + st->drops_live_full + st->drops_state_full +
			 st->drops_stack;
	char started[32], dur[FMT_BUF], events[FMT_BUF], ndrops[FMT_BUF], nunm[FMT_BUF];

	switch (o->fmt) {
	case QUERY_JSON:
		fprintf(o->out, "%s{\"run_id\": %" PRId64 ", \"command\": ", o->n ? ",\n" : "\n",
			r->id);
		fmt_json_str(o->out, r->run.command);
		fputs(", \"alloc_mode\": ", o->out);
		fmt_json_str(o->out, r->run.alloc_mode);
		fputs(", \"access_mode\": ", o->out);
		fmt_json_str(o->out, r->run.access_mode);
		fputs(", \"settings\": ", o->out);
		fmt_json_str(o->out, r->run.settings);
		fprintf(o->out, ", \"started_ns\": %" PRId64, r->run.started_ns);
		json_opt_i64(o->out, "ended_ns", st->ended_ns);
		fputs(", \"status\": ", o->out);
		fmt_json_str(o->out, st->status);
		if (o->s && (rc = status_governor_json(o->out, o->s, r->id)) < 0)
			return rc;
		fprintf(o->out, ", \"events\": %" PRIu64 ", \"drops_ringbuf\": %" PRIu64
			", \"drops_live_full\": %" PRIu64 ", \"drops_state_full\": %" PRIu64
			", \"drops_stack\": %" PRIu64 ", \"unmatched_frees\": %" PRIu64
			", \"overwritten\": %" PRIu64 ", \"unresolved_frames\": %" PRIu64,
			st->events, st->drops_ringbuf, st->drops_live_full, st->drops_state_full,
			st->drops_stack, st->unmatched_frees, st->overwritten, st->unresolved_frames);
		fputs(", \"access_source\": ", o->out);
		fmt_json_str(o->out, r->access_source);
		fputs(", \"access_reasons\": ", o->out);
		json_lines(o->out, r->access_reasons);
		fputs(", \"access_classes\": {", o->out);
		for (unsigned i = 0; i < cls.n; i++) {
			fputs(i ? ", " : "", o->out);
			fmt_json_str(o->out, cls.name[i]);
			fprintf(o->out, ": {\"samples\": %" PRIu64 ", \"est_accesses\": %" PRIu64 "}",
				cls.samples[i], cls.est[i]);
		}
		fputc('}', o->out);
		fprintf(o->out, ", \"missed\": {\"exec\": %" PRIu64 ", \"late\": %" PRIu64
			", \"unknown\": %" PRIu64 "}", st->missed_exec, st->missed_late,
			st->missed_unknown);
		json_opt_i64(o->out, "flushed_ns", st->flushed_ns);
		fputs(", \"unsymbolized\": [", o->out);
		if (o->s && (rc = print_unsym(o->out, o->s, r->id, QUERY_JSON)) < 0)
			return rc;
		fputc(']', o->out);
		if (o->s && (rc = status_mem_drops_json(o->out, o->s, r->id)) < 0)
			return rc;
		fputc('}', o->out);
		break;
	case QUERY_CSV:
		fprintf(o->out, "%" PRId64 ",", r->id);
		fmt_csv_field(o->out, r->run.command);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->run.alloc_mode);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->run.access_mode);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->run.settings);
		fprintf(o->out, ",%" PRId64 ",%" PRId64 ",", r->run.started_ns, st->ended_ns);
		fmt_csv_field(o->out, st->status);
		fprintf(o->out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",",
			st->events, st->drops_ringbuf, st->drops_live_full, st->drops_state_full,
			st->drops_stack, st->unmatched_frees, st->overwritten, st->unresolved_frames);
		fmt_csv_field(o->out, r->access_source);
		fputc(',', o->out);
		fmt_csv_field(o->out, r->access_reasons);
		/* The standard classes have a column each (the header's order). */
		for (unsigned i = 0; i < N_STD_CLASSES; i++)
			fprintf(o->out, ",%" PRIu64, cls.samples[i]);
		fprintf(o->out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, st->missed_exec,
			st->missed_late, st->missed_unknown);
		fputs(EOL_CSV, o->out);
		break;
	default: {
		int64_t end = st->ended_ns ? st->ended_ns : o->now_ns;

		/* The status is never cut (it says why a run ended); the command takes the rest. */
		const struct query_view whole = { 0 };
		_cleanup_free_ char *status = view_cell(&whole, W_STATUS, st->status ? st->status : "?");
		size_t wst = strlen(status ? status : "") > W_STATUS ? strlen(status) : W_STATUS;
		_cleanup_free_ char *cmd = view_cell(o->view, rest_width(o->view, W_RUN_ID +
			W_STARTED + W_LIFE + wst + W_NUM * 3 + 7, 10), r->run.command);

		if (!status || !cmd)
			return -ENOMEM;
		fprintf(o->out, "%*" PRId64 " %-*s %*s %-*s %*s %*s %*s %s\n",
			W_RUN_ID, r->id, W_STARTED, iso_utc(started, sizeof(started), r->run.started_ns),
			W_LIFE, fmt_duration_ns(dur, end > r->run.started_ns ?
						(uint64_t)(end - r->run.started_ns) : 0),
			(int)wst, status, W_NUM, fmt_count(events, st->events),
			W_NUM, fmt_count(ndrops, drops),
			W_NUM, fmt_count(nunm, st->unmatched_frees), cmd);
		if (st->missed_exec || st->missed_late || st->missed_unknown)
			fprintf(o->out, "%*smissed: %" PRIu64 " execs not marked, %" PRIu64
				" processes probed late, %" PRIu64 " records of unnamed processes\n",
				W_INDENT, "", st->missed_exec, st->missed_late, st->missed_unknown);
		print_run_access_table(o->out, r, &cls, o->view);
		if (o->s && (rc = print_unsym(o->out, o->s, r->id, QUERY_TABLE)) < 0)
			return rc;
		if (o->s && (rc = status_governor_table(o->out, o->s, r->id, W_INDENT)) < 0)
			return rc;
		if (o->s && (rc = status_mem_drops_table(o->out, o->s, r->id, W_INDENT)) < 0)
			return rc;
	}
	}
	o->n++;
	return 0;
}

static int print_status(FILE *out, struct store *s, enum query_format fmt,
			const struct query_view *v)
{
	struct list_out o = { .out = out, .fmt = fmt, .now_ns = real_ns(), .s = s,
			      .view = v };
	int r;

	if (fmt == QUERY_JSON)
		fputc('[', out);
	else if (fmt == QUERY_CSV)
		fputs("run_id,command,alloc_mode,access_mode,settings,started_ns,ended_ns,status,"
		      "events,drops_ringbuf,drops_live_full,drops_state_full,drops_stack,"
		      "unmatched_frees,overwritten,unresolved_frames,access_source,access_reasons,"
		      "samples_heap,samples_heap_untracked,samples_static,samples_stack,samples_tls,"
		      "samples_anon,samples_file,samples_unknown,missed_exec,missed_late,missed_unknown"
		      EOL_CSV, out);
	else
		fprintf(out, "%*s %-*s %*s %-*s %*s %*s %*s %s\n", W_RUN_ID, "RUN", W_STARTED,
			"STARTED (UTC)", W_LIFE, "DURATION", W_STATUS, "STATUS", W_NUM, "EVENTS",
			W_NUM, "DROPS", W_NUM, "UNMATCH", "COMMAND");
	r = store_query_runs(s, run_cb, &o);
	if (r < 0)
		return r;
	if (fmt == QUERY_JSON)
		fputs(o.n ? "\n]\n" : "]\n", out);
	else if (fmt == QUERY_TABLE && !o.n)
		fputs("(no runs recorded)\n", out);
	return 0;
}

int query_print_binaries(FILE *out, struct store *s, enum query_format fmt)
{
	return print_binaries(out, s, fmt, &QUERY_VIEW_DEFAULT);
}

int query_print_processes(FILE *out, struct store *s, const struct store_proc_filter *f,
			  enum query_format fmt)
{
	return print_processes(out, s, f, fmt, &QUERY_VIEW_DEFAULT);
}

int query_print_status(FILE *out, struct store *s, enum query_format fmt)
{
	return print_status(out, s, fmt, &QUERY_VIEW_DEFAULT);
}

/* ---- options ---- */

unsigned query_terminal_width(int fd)
{
	const char *env = getenv("COLUMNS");
	struct winsize ws;
	char *end;

	if (env && *env) {
		unsigned long v = strtoul(env, &end, 10);

		if (!*end && v > 0 && v <= QUERY_MAX_WIDTH)
			return (unsigned)v;
	}
	if (!isatty(fd))
		return 0;   /* a pipe or a file: nothing is cut */
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col)
		return ws.ws_col;
	return FMT_TABLE_WIDTH;
}

static bool parse_u64(const char *arg, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!arg || !isdigit((unsigned char)arg[0]))
		return false;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

static int64_t unit_ns(const char *u, bool relative)
{
	static const struct { const char *name; int64_t ns; } units[] = {
		{ "", 1000000000 }, { "s", 1000000000 }, { "ms", 1000000 }, { "us", 1000 },
		{ "ns", 1 }, { "m", 60ll * 1000000000 }, { "min", 60ll * 1000000000 },
		{ "h", 3600ll * 1000000000 }, { "d", 86400ll * 1000000000 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(u, units[i].name)) {
			/* Minutes and longer only make sense as "that long ago". */
			if (!relative && units[i].ns > 1000000000)
				return 0;
			return units[i].ns;
		}
	return 0;
}

int query_parse_time(const char *arg, int64_t now_ns, int64_t *out)
{
	static const char *const date_fmts[] = {
		"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
		"%Y-%m-%d",
	};
	bool relative = arg && arg[0] == '-';
	const char *num = relative ? arg + 1 : arg;
	char *end;
	unsigned long long v;

	if (!num || !isdigit((unsigned char)num[0]))
		return -EINVAL;
	if (!relative && strchr(num, '-')) {
		for (size_t i = 0; i < sizeof(date_fmts) / sizeof(date_fmts[0]); i++) {
			struct tm tm = {0};
			const char *rest = strptime(num, date_fmts[i], &tm);

			if (!rest || (*rest && strcmp(rest, "Z")))
				continue;
			time_t t = timegm(&tm);

			if (t < 0 || (int64_t)t > INT64_MAX / 1000000000)
				return -ERANGE;
			*out = (int64_t)t * 1000000000;
			return 0;
		}
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(num, &end, 10);
	if (errno)
		return -ERANGE;

	int64_t mult = unit_ns(end, relative);

	if (!mult)
		return -EINVAL;
	if (v > (unsigned long long)(INT64_MAX / mult))
		return -ERANGE;
	*out = relative ? now_ns - (int64_t)v * mult : (int64_t)v * mult;
	return 0;
}

enum {
	O_DB = 1 << 0, O_BINARY = 1 << 1, O_PID = 1 << 2, O_SINCE = 1 << 3, O_UNTIL = 1 << 4,
	O_SORT = 1 << 5, O_LIMIT = 1 << 6, O_FORMAT = 1 << 7, O_CLASS = 1 << 8,
	O_STACKS = 1 << 9,
	O_ALL = (1 << 10) - 1,
	O_FROM = 1 << 10, O_HOST = 1 << 11,  /* the fleet's ClickHouse instead of --db */
};

struct query_opts {
	const char *db;
	const char *from, *host;   /* --from URL, --host GLOB */
	const char *binary_arg;   /* --binary as given, resolved once the store is open */
	struct binsel bin;        /* that resolution; ctx.binary points into it */
	struct store_ctx_filter ctx;
	enum query_format fmt;
	int cls;             /* --class: an enum classify_class, -1 for all */
	const char *sort;    /* --sort, checked once the report is known (keys differ) */
	struct query_view view;  /* tables: the terminal's width, --stacks */
	enum store_data_sort data_sort;
	unsigned given;
};

static void query_opts_free(struct query_opts *o)
{
	binsel_free(&o->bin);
}

static int run_contexts(FILE *out, struct store *s, const struct query_opts *o)
{
	return print_contexts(out, s, &o->ctx, o->fmt, o->cls, &o->view);
}

static int run_data(FILE *out, struct store *s, const struct query_opts *o)
{
	struct store_data_filter f = { .binary = o->ctx.binary, .since_ns = o->ctx.since_ns,
				       .until_ns = o->ctx.until_ns, .now_ns = real_ns(),
				       .sort = o->data_sort, .limit = o->ctx.limit };

	return print_data(out, s, &f, o->fmt, o->cls, &o->view);
}

static int run_binaries(FILE *out, struct store *s, const struct query_opts *o)
{
	return print_binaries(out, s, o->fmt, &o->view);
}

static int run_processes(FILE *out, struct store *s, const struct query_opts *o)
{
	struct store_proc_filter f = { .binary = o->ctx.binary, .pid = o->ctx.pid,
				       .limit = o->ctx.limit };

	return print_processes(out, s, &f, o->fmt, &o->view);
}

static int run_status(FILE *out, struct store *s, const struct query_opts *o)
{
	return print_status(out, s, o->fmt, &o->view);
}

static const struct subcmd {
	const char *name;
	unsigned opts;      /* the options that apply */
	int (*run)(FILE *out, struct store *s, const struct query_opts *o);
} subcmds[] = {
	{ "contexts", O_ALL | O_FROM | O_HOST, run_contexts },
	{ "data", (O_ALL & ~(O_PID | O_STACKS)) | O_FROM | O_HOST, run_data },
	{ "binaries", O_DB | O_FORMAT | O_FROM | O_HOST, run_binaries },
	{ "processes", O_DB | O_BINARY | O_PID | O_LIMIT | O_FORMAT, run_processes },
	{ "status", O_DB | O_FORMAT, run_status },
};

static const char usage_text[] =
	"usage: memprofd query contexts|data|binaries|processes|status [options]\n"
	"\n"
	"Reports from a memprofd database, opened read-only (a recording may be running).\n"
	"\n"
	"  contexts   allocation contexts (call stacks) with their combined MemInfoBlocks\n"
	"  binaries   executables that were profiled\n"
	"  processes  process instances (pid + start time), most recent first\n"
	"  status     recording runs and their counters, most recent first\n"
	"  data       static data symbols and their sampled accesses, summed over runs\n"
	"\n"
	"options:\n"
	"  --db PATH            database file (default " QUERY_DEFAULT_DB ")\n"
	"  --from URL           the fleet's ClickHouse (HTTP endpoint) instead of --db:\n"
	"                       every pushed host combined (contexts, data, binaries)\n"
	"  --host GLOB          with --from: only hosts whose name matches GLOB\n"
	"  --binary PATH|ID     only this binary: its path (resolved) or its build-id\n"
	"                       (contexts, data, processes)\n"
	"  --pid PID            only processes with this pid (contexts, processes)\n"
	"  --since T            only time buckets (data: runs) starting at or after T\n"
	"  --until T            only time buckets (data: runs) starting before T\n"
	"  --sort KEY           largest first; contexts: bytes|count|lifetime|density|\n"
	"                       accesses|live (bytes still allocated at their process's\n"
	"                       exit) (default bytes); data: accesses|density|size\n"
	"                       (default accesses: access samples)\n"
	"  --class C            only cold|notcold|hot|unknown contexts or symbols (contexts, data)\n"
	"  --limit N            at most N rows; 0 for all (contexts, data, processes)\n"
	"  --format FMT         table|json|csv (default table)\n"
	"  --stacks             contexts table: one stack frame per line (default: the\n"
	"                       whole stack, wrapped to the terminal's width)\n"
	"  -h, --help           show this help\n"
	"\n"
	"T is seconds since the epoch (or N with a ns|us|ms|s suffix), a UTC date\n"
	"YYYY-MM-DD[THH:MM[:SS]], or -N[s|m|h|d] for that long ago.\n";

static int parse_option(int c, const char *arg, struct query_opts *o, const char *what)
{
	static const char *const formats[] = {
		[QUERY_TABLE] = "table", [QUERY_JSON] = "json", [QUERY_CSV] = "csv",
	};
	uint64_t v;
	int r;

	switch (c) {
	case O_DB:
		if (!*arg)
			return usage_error(what, "--db: empty path%s", "");
		o->db = arg;
		return 0;
	case O_BINARY:
		if (!*arg)
			return usage_error(what, "--binary: empty value%s", "");
		o->binary_arg = arg;   /* resolved against the store: binsel_resolve() */
		return 0;
	case O_PID:
		if (!parse_u64(arg, INT32_MAX, &v) || v == 0)
			return usage_error(what, "--pid: invalid process id '%s'", arg);
		o->ctx.pid = (int32_t)v;
		return 0;
	case O_LIMIT:
		if (!parse_u64(arg, UINT_MAX, &v))
			return usage_error(what, "--limit: invalid number '%s'", arg);
		o->ctx.limit = (unsigned)v;
		return 0;
	case O_SINCE:
	case O_UNTIL:
		r = query_parse_time(arg, real_ns(), c == O_SINCE ? &o->ctx.since_ns :
				     &o->ctx.until_ns);
		if (r < 0)
			return usage_error(what, c == O_SINCE ? "--since: invalid time '%s'" :
					   "--until: invalid time '%s'", arg);
		return 0;
	case O_SORT:
		o->sort = arg;
		return 0;
	case O_FROM:
	case O_HOST:
		if (!*arg)
			return usage_error(what, c == O_FROM ? "--from: empty URL%s" : "--host: empty glob%s", "");
		*(c == O_FROM ? &o->from : &o->host) = arg;
		return 0;
	case O_CLASS:
		for (int i = CLASSIFY_NOTCOLD; i < CLASSIFY_NCLASSES; i++)
			if (!strcmp(arg, classify_name((enum classify_class)i))) {
				o->cls = i;
				return 0;
			}
		return usage_error(what, "--class: unknown class '%s' (cold|notcold|hot|unknown)", arg);
	case O_STACKS:
		o->view.one_per_line = true;
		return 0;
	case O_FORMAT:
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
			if (!strcmp(arg, formats[i])) {
				o->fmt = (enum query_format)i;
				return 0;
			}
		return usage_error(what, "--format: unknown format '%s' (table|json|csv)", arg);
	}
	return 2;
}

/* --sort for the report: contexts and data sort by different keys. */
static int parse_sort(const char *arg, bool data, struct query_opts *o, const char *what)
{
	static const char *const sorts[] = {
		[STORE_SORT_BYTES] = "bytes", [STORE_SORT_COUNT] = "count",
		[STORE_SORT_LIFETIME] = "lifetime", [STORE_SORT_DENSITY] = "density",
		[STORE_SORT_ACCESSES] = "accesses", [STORE_SORT_LIVE] = "live",
	};
	static const char *const data_sorts[] = {
		[STORE_DATA_SORT_ACCESSES] = "accesses", [STORE_DATA_SORT_DENSITY] = "density",
		[STORE_DATA_SORT_SIZE] = "size",
	};

	if (data) {
		for (size_t i = 0; i < sizeof(data_sorts) / sizeof(data_sorts[0]); i++)
			if (!strcmp(arg, data_sorts[i])) {
				o->data_sort = (enum store_data_sort)i;
				return 0;
			}
		return usage_error(what, "--sort: unknown key '%s' (accesses|density|size)", arg);
	}
	for (size_t i = 0; i < sizeof(sorts) / sizeof(sorts[0]); i++)
		if (!strcmp(arg, sorts[i])) {
			o->ctx.sort = (enum store_sort)i;
			return 0;
		}
	return usage_error(what, "--sort: unknown key '%s' "
			   "(bytes|count|lifetime|density|accesses|live)", arg);
}

static const char *option_name(int c)
{
	switch (c) {
	case O_DB: return "--db";
	case O_BINARY: return "--binary";
	case O_PID: return "--pid";
	case O_SINCE: return "--since";
	case O_UNTIL: return "--until";
	case O_SORT: return "--sort";
	case O_LIMIT: return "--limit";
	case O_CLASS: return "--class";
	case O_STACKS: return "--stacks";
	case O_FROM: return "--from";
	case O_HOST: return "--host";
	default: return "--format";
	}
}

int cmd_query(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "db", required_argument, NULL, O_DB },
		{ "binary", required_argument, NULL, O_BINARY },
		{ "pid", required_argument, NULL, O_PID },
		{ "since", required_argument, NULL, O_SINCE },
		{ "until", required_argument, NULL, O_UNTIL },
		{ "sort", required_argument, NULL, O_SORT },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "class", required_argument, NULL, O_CLASS },
		{ "stacks", no_argument, NULL, O_STACKS },
		{ "from", required_argument, NULL, O_FROM },
		{ "host", required_argument, NULL, O_HOST },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_(query_opts_free) struct query_opts o = {
		.db = QUERY_DEFAULT_DB, .ctx.sort = STORE_SORT_BYTES, .fmt = QUERY_TABLE,
		.cls = -1 };
	const struct subcmd *sub = NULL;
	char what[64] = "query";
	int c, r;

	/* The report may come before or after the options: find it first, for messages. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (argv[i][0] == '-') {
			bool has_arg = argv[i][1] == '-' && !strchr(argv[i], '=') &&
				       strcmp(argv[i], "--help") && strcmp(argv[i], "--stacks");
			i += has_arg;
			continue;
		}
		for (size_t k = 0; k < sizeof(subcmds) / sizeof(subcmds[0]); k++)
			if (!strcmp(argv[i], subcmds[k].name))
				sub = &subcmds[k];
		if (sub)
			snprintf(what, sizeof(what), "query %s", sub->name);
		break;
	}

	optind = 0;   /* glibc: full re-initialisation, cmd_query may run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c == ':')
			return usage_error(what, "option '%s' needs a value", argv[optind - 1]);
		if (c == '?')
			return usage_error(what, "unknown option '%s'", argv[optind - 1]);
		r = parse_option(c, optarg, &o, what);
		if (r)
			return r;
		o.given |= (unsigned)c;
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (!sub || strcmp(argv[optind], sub->name)) {
		sub = NULL;
		for (size_t k = 0; k < sizeof(subcmds) / sizeof(subcmds[0]); k++)
			if (!strcmp(argv[optind], subcmds[k].name))
				sub = &subcmds[k];
		if (!sub)
			return usage_error("query", "unknown report '%s' "
					   "(contexts|data|binaries|processes|status)", argv[optind]);
		snprintf(what, sizeof(what), "query %s", sub->name);
	}
	if (optind + 1 < argc)
		return usage_error(what, "unexpected argument '%s'", argv[optind + 1]);
	for (unsigned bit = 1; bit <= O_HOST; bit <<= 1)
		if ((o.given & bit) && !(sub->opts & bit))
			return usage_error(what, "%s does not apply to this report",
					   option_name((int)bit));
	if (o.sort) {
		r = parse_sort(o.sort, sub->run == run_data, &o, what);
		if (r)
			return r;
	}
	if ((o.given & O_FROM) && (o.given & (O_DB | O_PID)))
		return usage_error(what, "--from reads the fleet: %s does not apply with it",
				   (o.given & O_DB) ? "--db" : "--pid");
	if ((o.given & O_HOST) && !(o.given & O_FROM))
		return usage_error(what, "--host applies only with --from%s", "");
	if (o.ctx.since_ns && o.ctx.until_ns && o.ctx.since_ns >= o.ctx.until_ns)
		return usage_error(what, "--since must be before --until%s", "");

	char err[512];
	_cleanup_(store_closep) struct store *s = NULL;

	struct fleet_src_opts fo = { .url = o.from, .host_glob = o.host };

	r = o.from ? fleet_open_store(&s, &fo, err, sizeof(err)) :
		store_open(&s, o.db, STORE_RDONLY, err, sizeof(err));
	if (r < 0) {
		log_error("%s: %s", what, err);
		return 1;
	}
	if (o.binary_arg) {
		r = binsel_resolve(s, o.binary_arg, o.db, &o.bin, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "memprofd: %s: %s\n", what, err);
			return 1;
		}
		o.ctx.binary = *o.bin.build_id ? o.bin.build_id : o.bin.path;
	}
	o.view.width = query_terminal_width(STDOUT_FILENO);
	r = sub->run(stdout, s, &o);
	if (r < 0) {
		fflush(stdout);
		log_error("%s: %s", what, store_errmsg(s));
		return 1;
	}
	if (fflush(stdout) == EOF || ferror(stdout)) {
		log_error("%s: writing the report: %s", what, strerror(errno));
		return 1;
	}
	return 0;
}
