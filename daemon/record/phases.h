/* Where record's start-up and shutdown time goes (issue 18): with MEMPROFD_TRACE_PHASES
 * set, each phase_mark prints one stderr line "memprofd: phase NAME: +W ms wall, +C ms
 * cpu (T ms since start)" measured from the previous mark. Unset, a mark costs one
 * branch. Single-threaded use only: marks come from record's main thread. */
#pragma once

#include <stdbool.h>

#define PHASES_ENV "MEMPROFD_TRACE_PHASES"

/* Starts the clock (reads the environment once). */
void phases_start(void);
/* Whether the trace is on (for a phase's own detail lines). */
bool phases_on(void);
/* Ends the phase named name (a literal) and starts the next. */
void phase_mark(const char *name);
