/* Which classified symbols cannot be moved apart: compile units built without
 * -fdata-sections put all their .data (.bss, .rodata) in one input section. Read from
 * DWARF: each CU's DW_AT_producer (gcc records its switches) and its variables' addresses. */
#pragma once
#include <stddef.h>
#include "linker_script_gen/ldgen.h"

#define LDGEN_DSEC_MAX_NAMES 16   /* names listed per shared section; more are counted */

/* Appends warnings (one line each) to notes (a NUL-terminated buffer of cap bytes) and
 * prints them to stderr as "memprofd: export TOOL: warning: ...". Returns how many CUs
 * share sections among classified symbols, or -errno when the binary has no DWARF. */
int ldgen_dsec_check(const char *path, const struct ldgen_set *s, const char *tool,
		     char *notes, size_t cap);
