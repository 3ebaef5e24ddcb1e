/* The linker exports cmd_export.c dispatches: write one binary's hot/cold data layout to
 * out; 0 or -errno (store_errmsg() says why for store errors). */
#pragma once
#include <stdio.h>
#include "reporter/export.h"

int export_ld_script(FILE *out, struct store *s, const struct export_opts *o);
int export_symbol_order(FILE *out, struct store *s, const struct export_opts *o);
int export_section_prefixes(FILE *out, struct store *s, const struct export_opts *o);
