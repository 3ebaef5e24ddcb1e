/* The `query contexts` table: fixed columns with units, then each context's whole stack,
 * leaf first, one entry per source line (inline chains expanded) with file:line. Width
 * comes from the caller (the terminal's); 0 means unlimited (a pipe): nothing is cut.
 * Within a width the stack wraps onto continuation lines at its own column, or, with
 * one_per_line (--stacks), puts each frame on a line of its own; on a terminal too
 * narrow for a stack column it goes under the row. Lines fit widths >= 72 columns. */
#pragma once
#include <stdbool.h>
#include <stdio.h>
#include "store/store.h"

#define CTX_TABLE_MIN_STACK 32   /* narrower than this, the stack goes under its row */
#define CTX_TABLE_UNDER_INDENT 4 /* ...indented this much */

struct classify_evidence;

struct query_view {
	unsigned width;           /* columns of a line; 0: unlimited */
	bool one_per_line;        /* --stacks: one frame per line */
	const struct classify_evidence *ev;   /* the store's, for the class column (NULL: none) */
};

void ctx_table_header(FILE *out, const struct query_view *v);
void ctx_table_row(FILE *out, const struct store_ctx_row *r, const struct query_view *v);
/* Said once under the table: what the units mean, wrapped to the view's width. */
void ctx_table_legend(FILE *out, const struct query_view *v);
/* Words of text (single spaces) wrapped at width columns (0: one line), then '\n'. */
void ctx_table_wrap(FILE *out, const char *text, unsigned width);
