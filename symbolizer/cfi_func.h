/* cfi_func: where the code around a file offset starts, from the binary's .eh_frame_hdr
 * search table (the initial location of the FDE covering it), for code whose symbols are
 * stripped: libc's string functions (__memcmp_evex_movbe) have CFI and no .dynsym entry,
 * so the soft source could not decode their windows. The file is hostile input: a
 * regular file, the table bounded by CFI_FUNC_HDR_MAX and checked before use.
 * Cost: the table read once per binary; a lookup is one binary search. */
#pragma once
#include <stdint.h>

#define CFI_FUNC_HDR_MAX (16u << 20)   /* larger .eh_frame_hdr tables are refused */
#define CFI_FUNC_LOADS_MAX 8           /* executable PT_LOAD segments considered */

struct cfi_func;

/* Reads path's PT_GNU_EH_FRAME table: 0, -ENOENT (none), -ENOTSUP (an encoding other than
 * the linkers' datarel sdata4 table), or another -errno. */
int cfi_func_open(struct cfi_func **out, const char *path);
/* Same on an in-memory image (the fuzzer's). */
int cfi_func_open_mem(struct cfi_func **out, const void *buf, size_t len);
void cfi_func_close(struct cfi_func *c);
/* The file offset where the FDE covering file offset off starts (<= off, in the same
 * executable segment): 0, or -ENOENT when no FDE starts at or before it there. */
int cfi_func_start(const struct cfi_func *c, uint64_t off, uint64_t *start);
