/* The helpers every export writer shares (reporter's pprof/folded/html, compiler_feedback/,
 * linker_script_gen/): a frame's inline chain and flame-graph name, a context's weight.
 * Pure functions of the store's rows; no I/O. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "reporter/export.h"
#include "reporter/format.h"
#include "base/path.h"

int export_fail(const struct export_opts *o, const char *format, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (o->err && o->errsz) {
		vsnprintf(o->err, o->errsz, fmt, ap);
	} else {
		fprintf(stderr, "memprofd: export %s: ", format);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
	return r;
}

const char *export_line_function(const struct store_frame *f, unsigned i)
{
	const struct store_line *l = &f->lines[i];
	bool outer = i + 1 == f->nlines && !l->inlined;

	if (outer && f->function && *f->function)
		return f->function;
	return l->function ? l->function : outer ? f->function : NULL;
}

unsigned export_frame_lines(const struct store_frame *f, struct export_line *lines,
			    unsigned max)
{
	unsigned n = 0;

	/* DWARF lines (schema >= 3): the inline chain, leaf first, as the store keeps it. */
	for (unsigned i = 0; i < f->nlines && n < max; i++) {
		const struct store_line *l = &f->lines[i];
		const char *fn = export_line_function(f, i);

		if (!fn)
			continue;
		lines[n++] = (struct export_line){ .function = fn,
			.mangled = fn == f->function && f->mangled ? f->mangled :
				   l->mangled ? l->mangled : i + 1 == f->nlines ? f->mangled : NULL,
			.file = l->file, .line = l->line, .column = l->column,
			.start_line = l->decl_line };
	}
	if (n || !max || !f->function)
		return n;
	/* Only the ELF symbol. */
	lines[0] = (struct export_line){ .function = f->function, .mangled = f->mangled };
	return 1;
}

void export_frame_name(char *buf, size_t n, const struct store_frame *f,
		       const struct export_line *l)
{
	if (l && l->function) {
		fmt_func_short(buf, n, l->function);
	} else {
		const char *b = base_name(f->path);

		snprintf(buf, n, "%s+0x%" PRIx64, b && *b ? b : "[unknown]", f->offset);
	}
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!*buf)
		snprintf(buf, n, "?");
}

uint64_t export_weight_value(const struct mib *m, enum export_weight w)
{
	switch (w) {
	case EXPORT_WEIGHT_OBJECTS: return m->alloc_count;
	case EXPORT_WEIGHT_ACCESSES: return m->total_access_count;
	default: return m->total_size;
	}
}

static const char *const weights[] = {
	[EXPORT_WEIGHT_BYTES] = "bytes", [EXPORT_WEIGHT_OBJECTS] = "objects",
	[EXPORT_WEIGHT_ACCESSES] = "accesses",
};

const char *export_weight_name(enum export_weight w)
{
	return (unsigned)w < sizeof(weights) / sizeof(weights[0]) ? weights[w] : "bytes";
}
