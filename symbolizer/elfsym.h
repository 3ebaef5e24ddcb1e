/* ELF facts the daemon needs from a binary (libelf): its build-id, the file offset of a
 * named function (for uprobes), and address -> function symbol for frames. Every file is
 * hostile input: bounds are checked, errors are negative errno, nothing is trusted. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define ELFSYM_BUILD_ID_MAX 64       /* bytes; notes longer than this are rejected */
#define ELFSYM_MAX_SYMBOLS (1u << 22) /* symbol tables larger than this are rejected */
#define ELFSYM_MAX_STRTAB ((uint64_t)1 << 30) /* bytes; larger string tables: -E2BIG */
#define ELFSYM_NAME_MAX 16384        /* longer symbol names are skipped */
#define ELFSYM_MAX_NAME_BYTES ((uint64_t)1 << 29) /* name bytes read per symbol table
                                      * (bounds the work of sorting): more is -E2BIG */
#define SYM_DEMANGLE_MAX_LEN 16384   /* longer names are returned as is: the demangler's
                                      * stack use grows with the name's length */

struct elfsym;   /* an opened binary with its function symbols loaded and sorted */

/* Opens path (or a /proc/PID/map_files or /proc/PID/root path). Reads .symtab if present,
 * else .dynsym; keeps STT_FUNC/STT_GNU_IFUNC symbols with their sizes. */
int elfsym_open(struct elfsym **out, const char *path);
/* Same on an in-memory image (used by the fuzzer); the buffer must outlive the object. */
int elfsym_open_mem(struct elfsym **out, const void *buf, size_t len);
void elfsym_close(struct elfsym *e);

/* Build-id from the ELF notes (NT_GNU_BUILD_ID) as lowercase hex; -ENOENT if none. */
int elfsym_build_id(const struct elfsym *e, char *hex, size_t hexsz);
/* Lowercase hex of len bytes into hex (needs 2 * len + 1); -ERANGE if it is too small. */
int elf_hex(const uint8_t *id, size_t len, char *hex, size_t hexsz);
/* Build-id of a file without loading its symbols. */
int elf_build_id_of(const char *path, char *hex, size_t hexsz);

/* File offset of the defined function `name` (exact match on the symbol name, any
 * version suffix "@..." ignored); -ENOENT if the binary does not define it. The offset
 * is what uprobes take: st_value translated through the PT_LOAD that contains it. */
int elfsym_func_offset(const struct elfsym *e, const char *name, uint64_t *off);

/* Function containing file offset `off`: its (mangled) name and off - symbol start.
 * Returns NULL if no function symbol covers it. */
const char *elfsym_lookup_offset(const struct elfsym *e, uint64_t off, uint64_t *delta);

/* Demangles a C++ name (Itanium ABI, __cxa_demangle); returns a malloc'd string, or a
 * malloc'd copy of name if it is not mangled. NULL only on allocation failure. */
char *sym_demangle(const char *name);

/* For each names[i] (version suffix ignored), offs[i] = its file offset as
 * elfsym_func_offset gives it, or UINT64_MAX if the binary does not define it.
 * Returns how many were found (>= 0), or -EINVAL. */
int elfsym_find_funcs(const struct elfsym *e, const char *const *names, size_t n,
		      uint64_t *offs);
/* Link-time virtual address of file offset off (for DWARF, which speaks vaddrs), through
 * the PT_LOAD whose file image holds it; -ENOENT if none does. */
int elfsym_offset_to_vaddr(const struct elfsym *e, uint64_t off, uint64_t *vaddr);
/* Number of function symbols kept (aliases included). */
size_t elfsym_count(const struct elfsym *e);
/* 1 if path is a regular file starting with the ELF magic, 0 if not, -errno if it
 * cannot be read. Cheap: reads 4 bytes. */
int elfsym_is_elf(const char *path);
