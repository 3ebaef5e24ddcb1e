/* `query contexts` table rows (see ctx_table.h). A row's cells are built first, then the
 * stack is laid out in what the line has left; every byte printed is printable ASCII but
 * the "±" of an interval (U+00B1: two bytes, one column, padded for), so columns are
 * bytes otherwise. Cost: a few small allocations per row. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reporter/classify.h"
#include "reporter/ctx_table.h"
#include "reporter/estimate.h"
#include "reporter/export.h"
#include "reporter/format.h"
#include "base/cleanup.h"
#include "base/path.h"

#define STACK_SEP " < "          /* between entries on one line, leaf first */
#define CONT_PREFIX "< "          /* a wrapped line goes on from the entry before */
#define WHERE_PREFIX "    at "   /* a file:line that did not fit beside its name */
#define W_BYTES FMT_BYTES_MAX
#define W_ALLOCS FMT_COUNT_MAX
#define W_LIFE FMT_DURATION_MAX
#define W_ACCESSES 8
#define W_DENSITY FMT_DENSITY_MAX
#define W_CLASS 8                /* "notcold*": '*' marks few samples */
#define W_BINARY 12
#define W_PM 5                   /* "±12%": the interval's half-width */
#define W_EXIT FMT_BYTES_MAX
#define W_FIXED (W_BYTES + W_PM + W_ALLOCS + W_LIFE + W_EXIT + W_ACCESSES + W_PM + W_DENSITY + \
		 W_CLASS + W_BINARY + 10)

/* A terminal too narrow for a stack column beside the fixed ones. */
static bool narrow(const struct query_view *v, size_t indent)
{
	return v->width && v->width < indent + CTX_TABLE_MIN_STACK;
}

void ctx_table_header(FILE *out, const struct query_view *v)
{
	fprintf(out, "%*s %*s %*s %*s %*s %*s %*s %*s %-*s %-*s%s%*sSTACK (leaf first, file:line)\n",
		W_BYTES, "BYTES", W_PM, "", W_ALLOCS, "OBJS", W_LIFE, "AVG LIFE", W_EXIT, "AT EXIT",
		W_ACCESSES, "ACCESSES", W_PM, "",
		W_DENSITY, "ACC/B/s", narrow(v, W_FIXED) ? 0 : W_CLASS, "CLASS",
		narrow(v, W_FIXED) ? 0 : W_BINARY, "BINARY",
		narrow(v, W_FIXED) ? "\n" : " ", narrow(v, W_FIXED) ? CTX_TABLE_UNDER_INDENT : 0, "");
}

static const char legend[] =
	"OBJS: objects allocated; AVG LIFE: of the objects freed (\"at exit\": none was); "
	"AT EXIT: bytes still allocated when their process exited; ACCESSES: estimated "
	"loads and stores; ACC/B/s: lifetime access density, estimated accesses per byte "
	"per second of average lifetime (MemProf's; cold < 0.05 with >= 200 s lives, hot > "
	"1000); \u00b1: half-width of the 95% Poisson interval of the sampled estimate to "
	"its left (blank: every object seen, ?: not recorded); *: resting on fewer than 10 "
	"samples.";

/* Words of text, wrapped at width (0: one line). */
void ctx_table_wrap(FILE *out, const char *text, unsigned width)
{
	size_t col = 0;

	while (*text) {
		size_t len = strcspn(text, " ");

		if (col && width && col + 1 + len > width) {
			fputc('\n', out);
			col = 0;
		} else if (col) {
			fputc(' ', out);
			col++;
		}
		fwrite(text, 1, len, out);
		col += len;
		text += len + (text[len] == ' ');
	}
	fputc('\n', out);
}

void ctx_table_legend(FILE *out, const struct query_view *v)
{
	ctx_table_wrap(out, legend, v->width);
}

/* Control and non-ASCII bytes become '?': one column per byte, no escapes. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/* "std::vector<...>::_M_realloc_insert" keeps both ends: "std::vect...realloc_insert". */
static void elide_middle(char *s, size_t width)
{
	size_t len = strlen(s), head = (width - 3) / 3, tail = width - 3 - head;

	if (len <= width || width < 8)
		return;
	memmove(s + head + 3, s + len - tail, tail + 1);
	memcpy(s + head, "...", 3);
}

/* An entry's function name for display: without return type and parameters; within max
 * columns (0: any) by collapsing template arguments, then cutting the middle. */
static char *entry_name(const char *func, size_t max)
{
	size_t fsz = func ? strlen(func) + 1 : 2;
	char *name = malloc(fsz);

	if (!name)
		return NULL;
	fmt_func_short(name, fsz, func ? func : "?");
	if (max && strlen(name) > max)
		fmt_func_compact(name, fsz, func ? func : "?");
	if (max)
		elide_middle(name, max);
	sanitize(name);
	return name;
}

struct layout {
	FILE *out;
	const struct query_view *v;
	size_t indent, room, col;   /* stack column, its width (0: any), used on this line */
	unsigned n;                 /* entries written */
};

static void new_line(struct layout *l, const char *prefix)
{
	fprintf(l->out, "\n%*s%s", (int)l->indent, "", prefix);
	l->col = strlen(prefix);
}

/* One stack entry, "name file:line" (where may be ""): on this line when it fits, else
 * on the next; a name and its file:line that fit no line go on two. */
static void put_entry(struct layout *l, const char *name, const char *where)
{
	size_t len = strlen(name) + strlen(where);

	if (l->n && (l->v->one_per_line ||
		     (l->room && l->col + strlen(STACK_SEP) + len > l->room)))
		new_line(l, l->v->one_per_line ? "  " : CONT_PREFIX);
	else if (l->n) {
		fputs(STACK_SEP, l->out);
		l->col += strlen(STACK_SEP);
	}
	fputs(name, l->out);
	l->col += strlen(name);
	if (*where && l->room && l->col + strlen(where) > l->room) {
		new_line(l, WHERE_PREFIX);
		fputs(where + 1, l->out);   /* without its leading space */
		l->col += strlen(where) - 1;
	} else {
		fputs(where, l->out);
		l->col += strlen(where);
	}
	l->n++;
}

static void stack_cells(struct layout *l, const struct store_ctx_row *r)
{
	size_t max = l->room > strlen(CONT_PREFIX) ? l->room - strlen(CONT_PREFIX) : 0;

	for (unsigned i = 0; i < r->nframes; i++) {
		const struct store_frame *f = &r->frames[i];

		if (!f->nlines) {
			char addr[64];
			const char *b = base_name(f->path);

			snprintf(addr, sizeof(addr), "%.40s+0x%" PRIx64, b && *b ? b : "?", f->offset);
			_cleanup_free_ char *e = entry_name(f->function ? f->function : addr, max);

			if (e)
				put_entry(l, e, "");
			continue;
		}
		for (unsigned j = 0; j < f->nlines; j++) {
			const struct store_line *ln = &f->lines[j];
			const char *fn = export_line_function(f, j);
			_cleanup_free_ char *e = entry_name(fn ? fn : f->function, max);
			char where[96] = "";

			if (ln->file && ln->line)
				snprintf(where, sizeof(where), " %.60s:%u%s", base_name(ln->file),
					 ln->line, ln->inlined ? " [inlined]" : "");
			else if (ln->inlined)
				snprintf(where, sizeof(where), " [inlined]");
			sanitize(where);
			if (e)
				put_entry(l, e, where);
		}
	}
	if (!l->n)
		fputs("(no frames)", l->out);
}

/* "±12%" right-aligned in W_PM columns ('±' is two bytes, one column). */
static void put_pm(FILE *out, const struct estimate *e)
{
	double pct = estimate_rel_pct(e);
	char cell[16];

	if (e->kind == ESTIMATE_UNKNOWN) {
		fprintf(out, " %*s", W_PM, "?");
		return;
	}
	if (pct < 0) {
		fprintf(out, " %*s", W_PM, e->kind == ESTIMATE_SAMPLED && e->value ? "?" : "");
		return;
	}
	snprintf(cell, sizeof(cell), "%.0f%%", pct > 999 ? 999 : pct);
	fprintf(out, " %*s\u00b1%s", (int)(W_PM - 1 - strlen(cell)), "", cell);
}

/* Average lifetime of the objects that were freed; "at exit" when none was. */
static const char *freed_life(char *buf, const struct mib *m)
{
	uint64_t n = m->alloc_count - (m->live_at_exit_count < m->alloc_count ?
				       m->live_at_exit_count : m->alloc_count);
	uint64_t ns = m->total_lifetime_ns - (m->live_at_exit_lifetime_ns < m->total_lifetime_ns ?
					      m->live_at_exit_lifetime_ns : m->total_lifetime_ns);

	if (!n)
		return "at exit";
	return fmt_duration_ns(buf, ns / n);
}

void ctx_table_row(FILE *out, const struct store_ctx_row *r, const struct query_view *v)
{
	struct estimate cnt, byt, accs;
	char ex[FMT_BUF], cls[16];
	const struct mib *m = &r->mib;
	char bytes[FMT_BUF], allocs[FMT_BUF], life[FMT_BUF], acc[FMT_BUF], dens[FMT_BUF];
	const char *b = base_name(r->binary);
	const char *bin = b && *b ? b : r->build_id && *r->build_id ? r->build_id : "?";
	_cleanup_free_ char *bincell = strdup(bin);
	struct layout l = { .out = out, .v = v, .indent = W_FIXED };

	if (!bincell)
		return;
	sanitize(bincell);
	if (v->width && strlen(bincell) > W_BINARY)
		fmt_cell(bincell, W_BINARY, bin);
	l.indent += strlen(bincell) > W_BINARY ? strlen(bincell) - W_BINARY : 0;
	bool under = narrow(v, l.indent);

	/* Under-row stacks: the binary ends the row, cut to what the line has left. */
	if (under && v->width > W_FIXED - W_BINARY + 3 &&
	    strlen(bincell) > v->width - (W_FIXED - W_BINARY))
		fmt_cell(bincell, v->width - (W_FIXED - W_BINARY), bin);

	estimate_mib(m, &cnt, &byt, &accs);
	snprintf(cls, sizeof(cls), "%s%s", classify_name(classify_mib(m, v->ev)),
		 estimate_weak(&cnt, &accs) ? "*" : "");
	fprintf(out, "%*s", W_BYTES, fmt_bytes(bytes, m->total_size));
	put_pm(out, &byt);
	fprintf(out, " %*s %*s %*s %*s", W_ALLOCS, fmt_count(allocs, m->alloc_count),
		W_LIFE, freed_life(life, m),
		W_EXIT, m->live_at_exit_bytes ? fmt_bytes(ex, m->live_at_exit_bytes) : "-",
		W_ACCESSES, fmt_count(acc, m->total_access_count));
	put_pm(out, &accs);
	fprintf(out, " %*s %-*s %-*s", W_DENSITY, fmt_density(dens, classify_density(m)),
		under ? 0 : W_CLASS, cls, under ? 0 : W_BINARY, bincell);
	if (under) {
		/* A narrow terminal: the stack goes under the row, across the whole line. */
		l.indent = CTX_TABLE_UNDER_INDENT;
		fprintf(out, "\n%*s", (int)l.indent, "");
	} else {
		fputc(' ', out);
	}
	if (v->width)
		l.room = v->width > l.indent + CTX_TABLE_MIN_STACK ? v->width - l.indent :
			 CTX_TABLE_MIN_STACK;
	stack_cells(&l, r);
	fputc('\n', out);
}
