/* DWARF unwinding of a stack copied by BPF (bpf/alloc.h struct ev_ustack) with elfutils'
 * libdwfl, one Dwfl per process (its modules and their CFI cached until the process
 * execs or is forgotten). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/alloc.h"
#include "symbolizer/maps.h"

struct unwinder;

/* Unwinds u (len bytes of it arrived) of process pid (its modules from /proc, or from
 * known, its mappings as last known, once it is gone or when proc_ok is false: /proc
 * shows another image than u's) into at most max return addresses,
 * innermost first; *n is how many. *truncated is set when the walk stopped before the
 * stack's outermost frame (a read outside the copy, no CFI, max reached). Every address
 * is a code address of a module the process maps (not checked against permissions
 * here). *uw is created on first use. 0 or -errno (no frame at all). */
int unwind_stack(struct unwinder **uw, uint32_t pid, const struct maps *known, bool proc_ok,
		 const struct ev_ustack *u, size_t len,
		 uint64_t *pcs, unsigned max, unsigned *n, bool *truncated);
/* The end of the highest stack word the last unwind_stack read (0: unknown). */
uint64_t unwind_top(const struct unwinder *uw);
/* Why the last unwind_stack's walk ended (counted by record, bench/stack_sweep.py). */
enum unwind_stop {
	UNWIND_STOP_ROOT = 0,   /* the outermost frame: whole */
	UNWIND_STOP_COPY,       /* a read past the end of the stack copy */
	UNWIND_STOP_FRAMES,     /* max frames reached */
	UNWIND_STOP_CFI,        /* no CFI, an unreadable module, a return address of 0 */
	UNWIND_STOPS
};
enum unwind_stop unwind_stop(const struct unwinder *uw);
/* Forgets the process's modules (after exec, or when a new object was mapped). */
void unwinder_free(struct unwinder *uw);
