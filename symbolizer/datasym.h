/* Static data symbols of one ELF object: STT_OBJECT and STT_TLS symbols defined in .data,
 * .rodata, .bss, .data.rel.ro, .tdata and .tbss (and their .name.* input-section forms),
 * with sizes and section names, for address -> symbol + offset by binary search. Plain
 * data is keyed by link-time vaddr; TLS symbols by their offset in the module's TLS block
 * (st_value), since their runtime address depends on the thread. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATASYM_MAX_SYMBOLS (1u << 22)   /* more data symbols than this is -E2BIG */

struct datasym;

struct datasym_hit {
	const char *name;     /* mangled, as in the symbol table (valid while ds is open) */
	const char *section;  /* ".data", ".bss", ".tdata", ... */
	uint64_t start;       /* vaddr (or TLS-block offset) of the symbol */
	uint64_t size;
	uint64_t offset;      /* address - start */
	bool tls;
	bool local;           /* STB_LOCAL: a file-static variable */
};

/* Reads .symtab, else .dynsym. An object with no data symbols opens with count 0. */
int datasym_open(struct datasym **out, const char *path);
int datasym_open_mem(struct datasym **out, const void *buf, size_t len);
void datasym_close(struct datasym *ds);
size_t datasym_count(const struct datasym *ds);
size_t datasym_bytes(const struct datasym *ds);
/* The i-th symbol, i < datasym_count(): plain ones by address, then TLS ones (for
 * readers that list every symbol, e.g. the never-sampled ones). -ENOENT past the end. */
int datasym_at(const struct datasym *ds, size_t i, struct datasym_hit *out);

/* Symbol covering link-time vaddr a ([start, start + size); a size-0 symbol covers only
 * its own address). -ENOENT if none. */
int datasym_lookup(const struct datasym *ds, uint64_t a, struct datasym_hit *out);
/* Same for an offset into the module's TLS block (thread pointer arithmetic is the
 * caller's: the offset is address - the block's start for that thread). */
int datasym_lookup_tls(const struct datasym *ds, uint64_t tls_off, struct datasym_hit *out);
/* Link-time vaddr of runtime address a in a mapping [start, ...) of file offset
 * map_offset: what datasym_lookup takes. -ENOENT if no PT_LOAD holds map_offset. For the
 * anonymous .bss mapping after a file mapping, pass the file mapping's start/offset;
 * -ERANGE (vaddr still set) where a lies past the image's end (the highest PT_LOAD's
 * vaddr + memsz, to the page): anonymous memory the kernel merged onto the .bss. */
int datasym_runtime_to_vaddr(const struct datasym *ds, uint64_t map_start, uint64_t map_offset,
			     uint64_t a, uint64_t *vaddr);
