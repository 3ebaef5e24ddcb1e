/* Whether an ELF object's code keeps frame pointers: decides per object whether the
 * frame-pointer walk in BPF can be trusted for a process (bpf/alloc_common.bpf.h
 * fp_procs) or its stacks must be unwound from DWARF CFI. */
#pragma once

#define FPCHECK_MIN_FUNCS 16      /* fewer sized functions than this: undecided (no FP) */
#define FPCHECK_MIN_PERCENT 60    /* share of functions opening with push %rbp; mov %rsp,%rbp */

/* 1 if at least FPCHECK_MIN_PERCENT % of the object's function symbols (.symtab, else
 * .dynsym) open with the frame-pointer prologue (after an optional endbr64), 0 if not or
 * when there are too few to tell, -errno when the file is no readable ELF. Reads only
 * the first bytes of each function; the file is treated as hostile. */
int fpcheck_path(const char *path);
