/* The governor block of `memprofd query status`: what a daemon run's overhead governor
 * measured and decided at its last tick (store/governor.c), under the run's table row
 * or as the run object's "governor" member in JSON (null for runs without one). */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"

/* Lines indented by `indent`, at most FMT_TABLE_WIDTH columns; nothing if none. */
int status_governor_table(FILE *out, struct store *s, int64_t run_id, int indent);
/* ", \"governor\": {...}" or ", \"governor\": null". */
int status_governor_json(FILE *out, struct store *s, int64_t run_id);
