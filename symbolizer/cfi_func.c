/* cfi_func (cfi_func.h): the .eh_frame_hdr table kept as (start vaddr) sorted, checked
 * once at open; lookups map file offset -> vaddr through the executable PT_LOADs.
 * Invariant: starts[] is sorted ascending (the table is rejected otherwise). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/cleanup.h"
#include "symbolizer/cfi_func.h"
#include "symbolizer/elf_cleanup.h"

#define EH_PE_OMIT 0xff
#define EH_PE_UDATA4 0x03
#define EH_PE_SDATA4 0x0b
#define EH_PE_UDATA8 0x04
#define EH_PE_SDATA8 0x0c
#define EH_PE_PCREL 0x10
#define EH_PE_DATAREL_SDATA4 0x3b      /* the search table's encoding (ld, gold, lld) */

struct seg {
	uint64_t off, vaddr, filesz;
};

struct cfi_func {
	uint64_t *starts;          /* FDE initial locations, vaddrs, ascending */
	size_t n;
	struct seg load[CFI_FUNC_LOADS_MAX];
	size_t nload;
};

/* Size of an encoded pointer of the header (its value is not needed), 0 if unknown. */
static size_t enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case EH_PE_UDATA4: case EH_PE_SDATA4: return 4;
	case EH_PE_UDATA8: case EH_PE_SDATA8: case 0x00: return 8;
	}
	return 0;
}

/* The table of hdr (n bytes at vaddr hv) into c->starts. */
static int parse_hdr(struct cfi_func *c, const uint8_t *hdr, size_t n, uint64_t hv)
{
	size_t at = 4, ptr;
	uint32_t count;

	if (n < 4 || hdr[0] != 1 || hdr[1] == EH_PE_OMIT || hdr[3] != EH_PE_DATAREL_SDATA4 ||
	    ((hdr[2] & 0x0f) != EH_PE_UDATA4 && (hdr[2] & 0x0f) != EH_PE_SDATA4))
		return -ENOTSUP;
	if (!(ptr = enc_size(hdr[1])) || n - at < ptr + 4)
		return -ENOTSUP;
	at += ptr;
	memcpy(&count, hdr + at, 4);
	at += 4;
	if (!count || count > (n - at) / 8)
		return -ENOENT;
	if (!(c->starts = malloc(count * sizeof(*c->starts))))
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		int32_t loc;
		memcpy(&loc, hdr + at + 8 * (size_t)i, 4);
		c->starts[i] = hv + (uint64_t)(int64_t)loc;
		if (i && c->starts[i] < c->starts[i - 1])
			return -EINVAL;   /* not a search table: refused, freed by close */
	}
	c->n = count;
	return 0;
}

/* The executable segments and the PT_GNU_EH_FRAME table of elf, an image of fsize bytes
 * in mem, or (mem NULL) in the file fd. */
static int read_tables(struct cfi_func *c, Elf *elf, int fd, const uint8_t *mem, uint64_t fsize)
{
	size_t nph;
	GElf_Phdr eh = { 0 };
	bool have = false;

	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) < 0)
		return -EINVAL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && c->nload < CFI_FUNC_LOADS_MAX)
			c->load[c->nload++] = (struct seg){ ph.p_offset, ph.p_vaddr, ph.p_filesz };
		if (ph.p_type == PT_GNU_EH_FRAME) {
			eh = ph;
			have = true;
		}
	}
	if (!have || !eh.p_filesz)
		return -ENOENT;
	if (eh.p_filesz > CFI_FUNC_HDR_MAX || eh.p_offset > fsize || eh.p_filesz > fsize - eh.p_offset)
		return -E2BIG;
	_cleanup_free_ uint8_t *hdr = malloc(eh.p_filesz);
	if (!hdr)
		return -ENOMEM;
	if (mem)
		memcpy(hdr, mem + eh.p_offset, eh.p_filesz);
	else if (pread(fd, hdr, eh.p_filesz, (off_t)eh.p_offset) != (ssize_t)eh.p_filesz)
		return -EIO;
	return parse_hdr(c, hdr, eh.p_filesz, eh.p_vaddr);
}

int cfi_func_open(struct cfi_func **out, const char *path)
{
	_cleanup_close_ int fd = -1;
	_cleanup_elf_ Elf *elf = NULL;
	uint64_t size = 0;
	int r;

	*out = NULL;
	if ((r = elf_open_regular(path, &fd, &elf, &size)) < 0)
		return r;
	struct cfi_func *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if ((r = read_tables(c, elf, fd, NULL, size)) < 0) {
		cfi_func_close(c);
		return r;
	}
	*out = c;
	return 0;
}

int cfi_func_open_mem(struct cfi_func **out, const void *buf, size_t len)
{
	_cleanup_elf_ Elf *elf = NULL;
	int r;

	*out = NULL;
	if (!buf || !len || elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if (!(elf = elf_memory((char *)buf, len)))
		return -EINVAL;
	struct cfi_func *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if ((r = read_tables(c, elf, -1, buf, len)) < 0) {
		cfi_func_close(c);
		return r;
	}
	*out = c;
	return 0;
}

void cfi_func_close(struct cfi_func *c)
{
	if (!c)
		return;
	free(c->starts);
	free(c);
}

int cfi_func_start(const struct cfi_func *c, uint64_t off, uint64_t *start)
{
	const struct seg *s = NULL;

	if (!c)
		return -ENOENT;
	for (size_t i = 0; i < c->nload && !s; i++)
		if (off >= c->load[i].off && off - c->load[i].off < c->load[i].filesz)
			s = &c->load[i];
	if (!s)
		return -ENOENT;
	uint64_t v = off - s->off + s->vaddr;
	size_t lo = 0, hi = c->n;
	while (lo < hi) {            /* the first start past v */
		size_t mid = lo + (hi - lo) / 2;
		if (c->starts[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || c->starts[lo - 1] < s->vaddr)
		return -ENOENT;
	*start = c->starts[lo - 1] - s->vaddr + s->off;
	return 0;
}
