/* `memprofd export`: people-facing exports of one binary's allocation contexts (pprof,
 * folded stacks, an HTML report). cli/cmd_export.c is the subcommand (argv[0] "export",
 * argv[1] the format); export_*() write one export to any FILE (tests capture them with
 * open_memstream) and return 0 or -errno, with store_errmsg() or errno saying why. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"

/* A progress bar is drawn (stderr, TTY only) for exports of at least this many contexts. */
#define EXPORT_PROGRESS_MIN_CONTEXTS 20000
/* Most inline frames one return address expands to (deeper inlining is cut). */
#define EXPORT_MAX_INLINE 64

enum export_weight { EXPORT_WEIGHT_BYTES, EXPORT_WEIGHT_OBJECTS, EXPORT_WEIGHT_ACCESSES };

struct export_opts {
	const char *binary;       /* build-id hex or resolved path, as store_ctx_filter.binary */
	const char *build_id;     /* of that binary, for titles and the main mapping; may be NULL */
	const char *path;         /* of that binary; may be NULL */
	uint64_t contexts;        /* how many it has (the progress bar's 100%), 0 if unknown */
	enum export_weight weight;/* folded: the value; html: the flame graph's initial weight */
	int64_t now_ns;           /* CLOCK_REALTIME of the export (pprof time_nanos); 0 = now */
	bool progress;            /* draw a progress bar on stderr */
	const char *format;       /* --format (hints: text|json); NULL = the default */
	double hot_share;         /* ld-script/symbol-order: --hot-share, 0 = default */
	uint64_t cold_min_samples;/* ld-script/symbol-order: --cold-min-samples, 0 = default */
	char *err;                /* NULL, or errsz bytes where a format that knows why it */
	size_t errsz;             /* failed says so in one line; the caller prints it once */
};

/* Says why an export failed: into o->err when the caller gave one, else on stderr as
 * "memprofd: export FORMAT: why". Returns r. */
int export_fail(const struct export_opts *o, const char *format, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

int export_pprof(FILE *out, struct store *s, const struct export_opts *o);
int export_folded(FILE *out, struct store *s, const struct export_opts *o);
int export_html(FILE *out, struct store *s, const struct export_opts *o);

/* One source line of a return address: a frame expands to its inline chain, innermost
 * (the inlined callee) first and the real function last, as pprof's Location.line.
 * From the frame's DWARF lines when the store has them, else its ELF symbol alone. */
struct export_line {
	const char *function;     /* display name, NULL when unknown */
	const char *mangled;      /* may be NULL */
	const char *file;         /* may be NULL */
	int64_t line, column;     /* 0 when unknown */
	int64_t start_line;       /* the function's declaration line, 0 when unknown */
};
/* The one name of line i of f in every output: the frame's own function (the ELF symbol,
 * public names preferred: "_IO_file_doallocate", not DWARF's asm label
 * "__GI__IO_file_doallocate") for the real function, the DWARF name for inlined ones. */
const char *export_line_function(const struct store_frame *f, unsigned i);
/* Fills up to max lines for f and returns how many (0 when nothing is known about it). */
unsigned export_frame_lines(const struct store_frame *f, struct export_line *lines,
			    unsigned max);
/* A short name for flame graphs: the function without parameters (fmt_func_short), or
 * "binary+0xoffset" when unknown; newlines and other control bytes become '?'. */
void export_frame_name(char *buf, size_t n, const struct store_frame *f,
		       const struct export_line *l);
/* The weight's value of a context. */
uint64_t export_weight_value(const struct mib *m, enum export_weight w);
const char *export_weight_name(enum export_weight w);   /* bytes|objects|accesses */
