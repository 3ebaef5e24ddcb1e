/* Whether an ELF object's code keeps frame pointers: decides per object whether the
 * frame-pointer walk in BPF can be trusted for a process (bpf/alloc_common.bpf.h
 * fp_procs) or its stacks must be unwound from DWARF CFI. */
#pragma once

#define FPCHECK_MIN_FUNCS 1       /* fewer telling functions than this: undecided (no FP) */
#define FPCHECK_MIN_SIZE 8        /* functions shorter than this (stubs) are not looked at */
#define FPCHECK_MIN_PERCENT 50    /* share of telling functions that set up a frame pointer:
                                   * FP builds 54% (our sampler, leaves without a frame) to
                                   * 100%; Debian's python3, libsqlite3, libstdc++, bash 0-2% */

/* 1 if at least FPCHECK_MIN_PERCENT % of the object's telling function symbols (.symtab,
 * else .dynsym) open with the frame-pointer prologue (after an optional endbr64) rather
 * than by saving another callee-saved register (or %rbp as a plain one), 0 if not or
 * when none tells, -errno when the file is no readable ELF. Reads only the first bytes
 * of each function; the file is treated as hostile. */
int fpcheck_path(const char *path);
