/* Data symbols through libelf on hostile files: every count is capped, names are read with
 * elf_strptr (bounds-checked), sections are kept only by an allowed name. Invariant of an
 * open datasym: two arrays (plain, TLS) sorted by (start, rank), names copied, nothing
 * refers to the file. */
#include "symbolizer/datasym.h"
#include "base/cleanup.h"
#include "symbolizer/elf_cleanup.h"
#include "base/array.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATASYM_NAME_MAX 16384          /* longer names are skipped */
#define DATASYM_LOOKUP_BACKTRACK 8u     /* earlier symbols tried for an enclosing one */
#define DATASYM_MAX_LOADS 256u

struct dsym {
	uint64_t start, size;
	uint32_t name;        /* offset into names */
	uint8_t sec;          /* index into section_names */
	uint8_t rank;         /* lower is preferred: global before weak before local */
	bool local;
};

struct dload { uint64_t vaddr, off, filesz, memsz; };

struct datasym {
	char *names;
	size_t names_len, names_cap;
	struct dsym *plain, *tls;
	size_t nplain, ntls;
	struct dload loads[DATASYM_MAX_LOADS];
	size_t nloads;
	uint64_t image_end;   /* the highest PT_LOAD's vaddr + memsz, to this host's page */
};

static const char *const section_names[] = {
	".data", ".rodata", ".bss", ".data.rel.ro", ".tdata", ".tbss",
};

static void datasym_closep(struct datasym **d) { datasym_close(*d); }
#define _cleanup_datasym_ __attribute__((cleanup(datasym_closep)))

/* Index of the allowed section that name is ("X" or "X.<suffix>"), or -1. The longest
 * match wins so ".data.rel.ro.local" is .data.rel.ro, not .data. */
static int section_class(const char *name)
{
	int best = -1;
	size_t bestlen = 0;

	for (size_t i = 0; i < sizeof(section_names) / sizeof(section_names[0]); i++) {
		size_t n = strlen(section_names[i]);

		if (strncmp(name, section_names[i], n) || (name[n] && name[n] != '.'))
			continue;
		if (n > bestlen) {
			best = (int)i;
			bestlen = n;
		}
	}
	return best;
}

static int add_name(struct datasym *ds, const char *s, size_t len, uint32_t *off)
{
	if (ds->names_len + len + 1 > ds->names_cap) {
		size_t cap = ds->names_cap ? ds->names_cap : 4096;
		char *p;

		while (cap < ds->names_len + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -E2BIG;
		if (!(p = realloc(ds->names, cap)))
			return -ENOMEM;
		ds->names = p;
		ds->names_cap = cap;
	}
	*off = (uint32_t)ds->names_len;
	memcpy(ds->names + ds->names_len, s, len);
	ds->names[ds->names_len + len] = '\0';
	ds->names_len += len + 1;
	return 0;
}

static int cmp_dsym(const void *a, const void *b)
{
	const struct dsym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return x->size > y->size ? -1 : x->size < y->size;
}

static int load_table(struct datasym *ds, Elf *elf, Elf_Scn *scn, uint64_t fsize)
{
	GElf_Shdr sh;
	Elf_Data *d;
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT), count, shnum, shstrndx;
	size_t cap_plain = 0, cap_tls = 0;
	int r;

	if (!gelf_getshdr(scn, &sh) || !entsize || sh.sh_entsize != entsize ||
	    (sh.sh_flags & SHF_COMPRESSED) || sh.sh_offset > fsize ||
	    sh.sh_size > fsize - sh.sh_offset)
		return -EINVAL;
	if (elf_getshdrnum(elf, &shnum) < 0 || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EINVAL;
	count = sh.sh_size / entsize;
	if (count > DATASYM_MAX_SYMBOLS)
		return -E2BIG;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_type != ELF_T_SYM || d->d_size / entsize < count)
		return -EINVAL;
	for (size_t i = 1; i < count; i++) {
		GElf_Sym s;
		GElf_Shdr ssh;
		Elf_Scn *sscn;
		const char *name, *secname, *at;
		unsigned type, bind;
		struct dsym **v;
		size_t *n, *cap, len;
		int cls;

		if (!gelf_getsym(d, (int)i, &s))
			return -EINVAL;
		type = GELF_ST_TYPE(s.st_info);
		bind = GELF_ST_BIND(s.st_info);
		if ((type != STT_OBJECT && type != STT_TLS) || s.st_shndx == SHN_UNDEF ||
		    s.st_shndx >= SHN_LORESERVE || s.st_shndx >= shnum)
			continue;
		if (!(sscn = elf_getscn(elf, s.st_shndx)) || !gelf_getshdr(sscn, &ssh))
			continue;
		secname = elf_strptr(elf, shstrndx, ssh.sh_name);
		if (!secname || (cls = section_class(secname)) < 0)
			continue;
		name = elf_strptr(elf, sh.sh_link, s.st_name);
		if (!name || !*name)
			continue;
		len = strnlen(name, DATASYM_NAME_MAX + 1);
		if (len > DATASYM_NAME_MAX)
			continue;
		if ((at = memchr(name, '@', len)))
			len = (size_t)(at - name);
		if (!len)
			continue;
		if (type == STT_TLS) {
			v = &ds->tls, n = &ds->ntls, cap = &cap_tls;
		} else {
			v = &ds->plain, n = &ds->nplain, cap = &cap_plain;
		}
		if (ds->nplain + ds->ntls >= DATASYM_MAX_SYMBOLS)
			return -E2BIG;
		if (ARRAY_GROW(*v, *cap, *n, 64) < 0)
			return -ENOMEM;
		struct dsym *e = &(*v)[*n];
		*e = (struct dsym){
			.start = s.st_value, .size = s.st_size, .sec = (uint8_t)cls,
			.rank = (uint8_t)(bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2),
			.local = bind == STB_LOCAL,
		};
		if ((r = add_name(ds, name, len, &e->name)) < 0)
			return r;
		(*n)++;
	}
	return 0;
}

/* The end of a segment in memory, to this host's page size (the kernel's mapping
 * granule); UINT64_MAX where a hostile header overflows. An anonymous mapping the kernel
 * merged onto the last segment's .bss (a later mmap placed right after it) lies past the
 * highest such end. */
static uint64_t seg_end(uint64_t vaddr, uint64_t memsz)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), e = vaddr + memsz;

	if (e < vaddr || e > UINT64_MAX - page)
		return UINT64_MAX;
	return (e + page - 1) & ~(page - 1);
}

static int datasym_load(struct datasym **out, Elf *elf, uint64_t fsize)
{
	_cleanup_datasym_ struct datasym *ds = NULL;
	static const Elf64_Word order[] = { SHT_SYMTAB, SHT_DYNSYM };
	size_t phnum;
	int r;

	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return -EINVAL;
	if (!(ds = calloc(1, sizeof(*ds))))
		return -ENOMEM;
	if (elf_getphdrnum(elf, &phnum) < 0)
		return -EINVAL;
	for (size_t i = 0; i < phnum && i < 65536; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ds->nloads == DATASYM_MAX_LOADS)
			return -E2BIG;
		ds->loads[ds->nloads++] = (struct dload){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
							  ph.p_memsz };
		uint64_t end = seg_end(ph.p_vaddr, ph.p_memsz);
		if (end > ds->image_end)
			ds->image_end = end;
	}
	for (size_t k = 0; k < 2; k++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;

		while ((scn = elf_nextscn(elf, scn)))
			if (gelf_getshdr(scn, &sh) && sh.sh_type == order[k])
				break;
		if (!scn)
			continue;
		if ((r = load_table(ds, elf, scn, fsize)) < 0)
			return r;
		if (ds->nplain + ds->ntls)
			break;
	}
	if (ds->nplain)
		qsort(ds->plain, ds->nplain, sizeof(*ds->plain), cmp_dsym);
	if (ds->ntls)
		qsort(ds->tls, ds->ntls, sizeof(*ds->tls), cmp_dsym);
	*out = ds;
	ds = NULL;
	return 0;
}

int datasym_open(struct datasym **out, const char *path)
{
	_cleanup_close_ int fd = -1;
	_cleanup_elf_ Elf *elf = NULL;
	uint64_t size = 0;
	int r;

	if (!out || !path)
		return -EINVAL;
	*out = NULL;
	if ((r = elf_open_regular(path, &fd, &elf, &size)) < 0)
		return r;
	return datasym_load(out, elf, size);
}

int datasym_open_mem(struct datasym **out, const void *buf, size_t len)
{
	_cleanup_elf_ Elf *elf = NULL;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!buf || !len || elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if (!(elf = elf_memory((char *)buf, len)))
		return -EINVAL;
	return datasym_load(out, elf, len);
}

void datasym_close(struct datasym *ds)
{
	if (!ds)
		return;
	free(ds->names);
	free(ds->plain);
	free(ds->tls);
	free(ds);
}

size_t datasym_count(const struct datasym *ds)
{
	return ds ? ds->nplain + ds->ntls : 0;
}

size_t datasym_bytes(const struct datasym *ds)
{
	return ds ? sizeof(*ds) + ds->names_cap + (ds->nplain + ds->ntls) * sizeof(struct dsym) : 0;
}

int datasym_at(const struct datasym *ds, size_t i, struct datasym_hit *out)
{
	const struct dsym *s;
	bool tls = false;

	if (!ds || !out)
		return -EINVAL;
	if (i < ds->nplain) {
		s = &ds->plain[i];
	} else if (i - ds->nplain < ds->ntls) {
		s = &ds->tls[i - ds->nplain];
		tls = true;
	} else {
		return -ENOENT;
	}
	*out = (struct datasym_hit){
		.name = ds->names + s->name, .section = section_names[s->sec], .start = s->start,
		.size = s->size, .tls = tls, .local = s->local,
	};
	return 0;
}

static bool covers(const struct dsym *s, uint64_t a)
{
	return a >= s->start && (s->size ? a - s->start < s->size : a == s->start);
}

static int find(const struct datasym *ds, const struct dsym *v, size_t n, uint64_t a,
		bool tls, struct datasym_hit *out)
{
	size_t lo = 0, hi = n;

	if (!out)
		return -EINVAL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Groups of equal starts below a, nearest first; in a group the preferred sorts first. */
	for (unsigned groups = 0; lo > 0 && groups < DATASYM_LOOKUP_BACKTRACK; groups++) {
		size_t g = lo - 1;

		while (g > 0 && v[g - 1].start == v[lo - 1].start)
			g--;
		for (size_t j = g; j < lo; j++) {
			const struct dsym *s = &v[j];

			if (!covers(s, a))
				continue;
			*out = (struct datasym_hit){
				.name = ds->names + s->name, .section = section_names[s->sec],
				.start = s->start, .size = s->size, .offset = a - s->start,
				.tls = tls, .local = s->local,
			};
			return 0;
		}
		lo = g;
	}
	return -ENOENT;
}

int datasym_lookup(const struct datasym *ds, uint64_t a, struct datasym_hit *out)
{
	if (!ds)
		return -EINVAL;
	return find(ds, ds->plain, ds->nplain, a, false, out);
}

int datasym_lookup_tls(const struct datasym *ds, uint64_t tls_off, struct datasym_hit *out)
{
	if (!ds)
		return -EINVAL;
	return find(ds, ds->tls, ds->ntls, tls_off, true, out);
}

int datasym_runtime_to_vaddr(const struct datasym *ds, uint64_t map_start, uint64_t map_offset,
			     uint64_t a, uint64_t *vaddr)
{
	if (!ds || !vaddr || a < map_start)
		return -EINVAL;
	for (size_t i = 0; i < ds->nloads; i++) {
		const struct dload *l = &ds->loads[i];
		uint64_t base;

		/* The mapping starts inside this segment's file image (page-rounded down). */
		if (map_offset + 0xfff < l->off || map_offset >= l->off + (l->filesz ? l->filesz : 1))
			continue;
		base = l->vaddr - (l->off - map_offset);   /* link vaddr of map_start */
		*vaddr = base + (a - map_start);
		return *vaddr < ds->image_end ? 0 : -ERANGE;
	}
	return -ENOENT;
}
