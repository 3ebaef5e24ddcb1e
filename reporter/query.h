/* `memprofd query`: read-only reports from the store. cmd_query() is the subcommand
 * (argv[0] "query", argv[1] the report); the query_print_*() functions write one report
 * to any FILE (tests capture them with open_memstream). They return 0 or -errno, with
 * store_errmsg() saying why. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"
#include "reporter/format.h"
#include "reporter/ctx_table.h"

#define QUERY_DEFAULT_DB "./memprofd.db"

enum query_format { QUERY_TABLE, QUERY_JSON, QUERY_CSV };

/* The view query_print_*() lay tables out in: FMT_TABLE_WIDTH columns, stacks wrapped. */
#define QUERY_VIEW_DEFAULT ((const struct query_view){ .width = FMT_TABLE_WIDTH })

int cmd_query(int argc, char **argv);
/* Columns for tables on fd: $COLUMNS when set (1..QUERY_MAX_WIDTH), else the terminal's
 * (TIOCGWINSZ), else 0 (not a terminal: unlimited, nothing cut). */
#define QUERY_MAX_WIDTH 10000
unsigned query_terminal_width(int fd);

/* The DESIGN.md contract for JSON: one array, one object per context, leaf frame first. */
int query_print_contexts(FILE *out, struct store *s, const struct store_ctx_filter *f,
			 enum query_format fmt);
/* Static data symbols combined over runs (DESIGN.md's `query data` JSON), classed by
 * classify_data(); f may be NULL (all, by access samples). */
int query_print_data(FILE *out, struct store *s, const struct store_data_filter *f,
		     enum query_format fmt);
int query_print_binaries(FILE *out, struct store *s, enum query_format fmt);
int query_print_processes(FILE *out, struct store *s, const struct store_proc_filter *f,
			  enum query_format fmt);
/* Runs, each with its access source, the reasons the other sources did not open, and its
 * samples by attrib class (schema >= 4). */
int query_print_status(FILE *out, struct store *s, enum query_format fmt);

/* A --since/--until value as CLOCK_REALTIME ns: seconds since the epoch (or with a
 * ns|us|ms|s suffix), an ISO 8601 UTC date YYYY-MM-DD[THH:MM[:SS]][Z], or -N[s|m|h|d]
 * for N units before now_ns. -EINVAL if malformed, -ERANGE if out of range. */
int query_parse_time(const char *arg, int64_t now_ns, int64_t *out);
