/* The in-process watches' SIGTRAP guard (sampler_trap.c), the sampler's internal API. */
#pragma once
#include <stdint.h>

/* Called on a thread that just armed a watch: installs the guard the first time, when
 * SIGTRAP's disposition is SIG_DFL. */
void sampler_trap_guard(void);
/* Debug traps swallowed since the last call, at most max (the rest kept for the next). */
unsigned sampler_trap_take_unreported(unsigned max);
uint64_t sampler_trap_swallowed(void);
/* 1 when the guard is this process's SIGTRAP handler. */
int sampler_trap_installed(void);
