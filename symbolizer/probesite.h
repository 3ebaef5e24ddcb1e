/* Where to put an entry-only uprobe so the kernel can emulate the probed instruction
 * instead of single-stepping it out of line (a second trap: ~12 us here under a VM,
 * vs ~0.7 us emulated). Decoding is capstone's; this file only applies the rule. */
#pragma once
#include <stdint.h>

#define PROBESITE_MAX_SKIP 4      /* leading instructions we may step over */

/* For a function at file offset func_off in path whose only input of interest is the
 * first argument register (rdi on x86-64), returns in *out the offset of the first
 * instruction x86 uprobes emulate (push reg, jmp, jcc, call, nop) reachable from the
 * entry through instructions that neither branch nor write that register; *out =
 * func_off when there is none (or on another architecture). 0 or -errno. */
int probesite_entry_only(const char *path, uint64_t func_off, uint64_t *out);
