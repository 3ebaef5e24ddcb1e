/* `memprofd query status`'s account of what a daemon run dropped at its limits
 * (store/mem_drops.c): over memory_limit while its store was unwritable, and at its stop
 * to end within the stop budget. A table line for each that dropped anything; in JSON the
 * run object's "memory_limit_drops" and "stop_drops" members (null: none recorded). */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"

int status_mem_drops_table(FILE *out, struct store *s, int64_t run_id, int indent);
/* ", \"memory_limit_drops\": {...} | null, \"stop_drops\": {...} | null". */
int status_mem_drops_json(FILE *out, struct store *s, int64_t run_id);
