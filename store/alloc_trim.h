/* Allocator entry points inlined into a stack's leaf frame (store/alloc_trim.c): the
 * unwinder cuts the allocator's own frames by address, but a wrapper inlined at the call
 * site (glibc's include/rtld-malloc.h `calloc` in ld.so's allocate_dtv) shares the
 * caller's return address and arrives as the leaf's innermost DWARF line. Readers drop it
 * so every output shows the caller, as for any other allocation. */
#pragma once
#include <stdbool.h>
#include "store/store.h"

/* True for an allocator entry point's name: C (malloc, calloc, realloc, ...), glibc's
 * internal aliases (__libc_*, __rtld_*), and operator new/new[] by Itanium mangling. */
bool alloc_trim_is_entry(const char *name);
/* Drops the leaf frame's innermost inlined lines that are allocator entry points (by
 * mangled name, else function); the outermost line (the frame's own function) stays.
 * Points f->lines past them: the lines themselves are not touched. */
void alloc_trim_leaf(struct store_frame *f);
