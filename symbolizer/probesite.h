/* Where to put an entry-only uprobe so the kernel can emulate the probed instruction
 * instead of single-stepping it out of line (a second trap: ~12 us here under a VM,
 * vs ~0.7 us emulated). Decoding is capstone's; this file only applies the rule. */
#pragma once
#include <stdint.h>

#define PROBESITE_MAX_SKIP 4      /* leading instructions we may step over */

/* Argument registers the probe reads, by position (x86-64: rdi, rsi, rdx). */
#define PROBESITE_ARG1 1u
#define PROBESITE_ARG2 2u
#define PROBESITE_ARG3 4u

/* For a function at file offset func_off in path, returns in *out the offset of the
 * first instruction x86 uprobes emulate (push reg, jmp, jcc, call, nop) reachable from
 * the entry through instructions that neither branch, nor write the argument registers
 * in `args`, nor move the stack pointer (so a uretprobe placed there still finds the
 * return address at [rsp]); *out = func_off when there is none (or on another
 * architecture). 0 or -errno. */
int probesite_find(const char *path, uint64_t func_off, unsigned args, uint64_t *out);
