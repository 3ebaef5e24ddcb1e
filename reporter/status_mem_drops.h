/* `memprofd query status`'s account of what a daemon run dropped over its memory_limit
 * while its store was unwritable (store/mem_drops.c): a table line when anything was
 * dropped, the run object's "memory_limit_drops" member in JSON (null: none recorded). */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"

int status_mem_drops_table(FILE *out, struct store *s, int64_t run_id, int indent);
/* ", \"memory_limit_drops\": {...}" or ", \"memory_limit_drops\": null". */
int status_mem_drops_json(FILE *out, struct store *s, int64_t run_id);
