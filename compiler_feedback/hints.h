/* Allocation-hint files: see hints.c for the format. */
#pragma once
#include <stdbool.h>
#include <stdio.h>
#include "compiler_feedback/cf.h"

/* Writes the hints of c (text, or JSON when json) for o's binary. */
int hints_write(FILE *out, const struct cf_ctxs *c, const struct export_opts *o, bool json);
int export_hints(FILE *out, struct store *s, const struct export_opts *o);
