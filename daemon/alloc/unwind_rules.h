/* The fast path of DWARF unwinding (unwind.c): each code address's CFI row, decoded
 * once from libdw into a compact rule (CFA = register + offset; each register undefined,
 * the same, saved at CFA + n, CFA + n, or another register), cached per process image,
 * and applied over the stack copy as libdwfl's frame_unwind would, without allocating.
 * A row libdwfl would treat otherwise (no module or CFI, a signal frame, a DWARF
 * expression) sends the whole stack to libdwfl. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <elfutils/libdwfl.h>
#include "bpf/alloc.h"

struct unwind_rules;

enum { RULES_WALKED = 0, RULES_SLOW = 1 };

/* Walks u (len bytes of stack) with the rules of dwfl's modules into at most max
 * return addresses, innermost first: RULES_WALKED with *n, *truncated exactly as
 * dwfl_getthread_frames over the same copy gives them, and *top the end of the highest
 * word read; RULES_SLOW when libdwfl must walk (then *n and pcs mean nothing). *rp is
 * created on first use. */
int rules_walk(struct unwind_rules **rp, Dwfl *dwfl, const struct ev_ustack *u, size_t len,
	       uint64_t *pcs, unsigned max, unsigned *n, bool *truncated, uint64_t *top);
/* Forgets every rule (the modules were read again). */
void rules_clear(struct unwind_rules *r);
void rules_free(struct unwind_rules *r);
/* The 8 bytes at addr of the copy (len bytes from u->sp); false outside it. */
bool ustack_read_word(const struct ev_ustack *u, size_t len, uint64_t addr, uint64_t *out);
/* Rule-cache counters of this process: rows decoded, lookups. */
void rules_stats(const struct unwind_rules *r, uint64_t *decoded, uint64_t *lookups);
