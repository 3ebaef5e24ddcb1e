/* ELF build-ids and function symbols through libelf, on hostile files: every header,
 * section and note is bounds-checked against the file size, tables are capped
 * (ELFSYM_MAX_SYMBOLS, ELFSYM_MAX_STRTAB), files are read with pread (no mmap, so a
 * concurrent truncation cannot SIGBUS us). Invariant of an open elfsym: symbols are
 * stored by FILE OFFSET, names are version-stripped copies, nothing refers to the file. */
#include "symbolizer/elfsym.h"
#include "base/cleanup.h"
#include "symbolizer/elf_cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Note segments/sections larger than this are skipped: a build-id note is 36 bytes. */
#define ELFSYM_MAX_NOTE_SIZE ((uint64_t)16 << 20)
/* More program headers than this is an error (-E2BIG): real binaries have < 20. */
#define ELFSYM_MAX_PHDRS 65536u
#define VERSYM_HIDDEN 0x8000
/* PT_LOAD segments beyond this are an error (-E2BIG): real binaries have 2 to 6. */
#define ELFSYM_MAX_LOADS 256u
/* How many earlier symbols a lookup tries when the nearest one ends before the offset. */
#define ELFSYM_LOOKUP_BACKTRACK 8u

struct fsym {
	uint64_t off;       /* file offset of the first byte */
	uint64_t size;      /* st_size (0: unknown, runs to the next symbol) */
	uint64_t seg_end;   /* file offset just past the PT_LOAD file image holding it */
	uint32_t name;      /* offset into elfsym.names */
	uint32_t len;       /* strlen of the version-stripped name */
	uint8_t rank;       /* lower is preferred: 2 * binding class + hidden version */
};

struct frange {
	uint64_t start, end;  /* [start, end) in file offsets */
	uint32_t sym;         /* the preferred symbol at start */
};

struct load {
	uint64_t vaddr, filesz, off;
};

struct elfsym {
	char *names;            /* copy of the string table, '@' of each used name -> '\0' */
	struct fsym *syms;
	uint32_t nsyms;
	uint32_t *by_name;      /* sorted by (name, rank, off) */
	struct frange *ranges;  /* sorted by start, starts unique */
	uint32_t nranges;
	struct load *loads;
	size_t nloads;
	uint8_t build_id[ELFSYM_BUILD_ID_MAX];
	size_t build_id_len;
	int build_id_err;       /* 0, or why there is none (-ENOENT, -EINVAL) */
};

static void elfsym_closep(struct elfsym **e) { elfsym_close(*e); }
#define _cleanup_elfsym_ __attribute__((cleanup(elfsym_closep)))

/* off + size lies within [0, fsize] without overflow. */
static bool in_file(uint64_t off, uint64_t size, uint64_t fsize)
{
	return off <= fsize && size <= fsize - off;
}

static int check_headers(Elf *elf, uint64_t fsize, size_t *phnum)
{
	GElf_Ehdr eh;
	size_t shnum;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
		return -EINVAL;
	if (gelf_getclass(elf) != ELFCLASS32 && gelf_getclass(elf) != ELFCLASS64)
		return -EINVAL;
	if (elf_getshdrnum(elf, &shnum) < 0 || elf_getphdrnum(elf, phnum) < 0)
		return -EINVAL;
	/* libelf quietly clamps the counts to what fits in the file: check the header's
	 * own numbers (escape values 0 / PN_XNUM mean "see section 0"). */
	if (eh.e_shnum > shnum || (eh.e_shoff && !shnum))
		return -EINVAL;
	if (eh.e_phnum != PN_XNUM && eh.e_phnum != *phnum)
		return -EINVAL;
	if (*phnum > ELFSYM_MAX_PHDRS)
		return -E2BIG;
	if (shnum && (eh.e_shentsize != gelf_fsize(elf, ELF_T_SHDR, 1, EV_CURRENT) ||
		      !in_file(eh.e_shoff, (uint64_t)shnum * eh.e_shentsize, fsize)))
		return -EINVAL;
	if (*phnum && (eh.e_phentsize != gelf_fsize(elf, ELF_T_PHDR, 1, EV_CURRENT) ||
		       !in_file(eh.e_phoff, (uint64_t)*phnum * eh.e_phentsize, fsize)))
		return -EINVAL;
	return 0;
}

/* 0 and the descriptor if d holds a GNU build-id note; -ENOENT if none; -EINVAL if one
 * is there but malformed or longer than ELFSYM_BUILD_ID_MAX. */
static int scan_notes(Elf_Data *d, uint8_t *id, size_t *len)
{
	size_t pos = 0, next, name_off, desc_off;
	GElf_Nhdr nh;
	int r = -ENOENT;

	if (!d || !d->d_buf || (d->d_type != ELF_T_NHDR && d->d_type != ELF_T_NHDR8))
		return -ENOENT;
	while (pos < d->d_size && (next = gelf_getnote(d, pos, &nh, &name_off, &desc_off)) > pos) {
		const char *b = d->d_buf;

		pos = next;
		if (!in_file(name_off, nh.n_namesz, d->d_size) ||
		    !in_file(desc_off, nh.n_descsz, d->d_size))
			return -EINVAL;
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != sizeof(ELF_NOTE_GNU) ||
		    memcmp(b + name_off, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)))
			continue;
		if (nh.n_descsz == 0 || nh.n_descsz > ELFSYM_BUILD_ID_MAX) {
			r = -EINVAL;
			continue;
		}
		memcpy(id, b + desc_off, nh.n_descsz);
		*len = nh.n_descsz;
		return 0;
	}
	return r;
}

/* PT_NOTE segments first (they survive section stripping), then SHT_NOTE sections. */
static int find_build_id(Elf *elf, uint64_t fsize, size_t phnum, uint8_t *id, size_t *len)
{
	Elf_Scn *scn = NULL;
	int r, best = -ENOENT;

	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		Elf_Type t;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (!in_file(ph.p_offset, ph.p_filesz, fsize) || ph.p_filesz > ELFSYM_MAX_NOTE_SIZE ||
		    ph.p_filesz == 0)
			continue;
		if (ph.p_align == 8)
			t = ELF_T_NHDR8;
		else if (ph.p_align <= 4)
			t = ELF_T_NHDR;
		else
			continue;
		if (ph.p_offset % (t == ELF_T_NHDR8 ? 8 : 4))
			continue;
		r = scan_notes(elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, t), id, len);
		if (r == 0)
			return 0;
		if (r == -EINVAL)
			best = r;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || (sh.sh_flags & SHF_COMPRESSED))
			continue;
		if (!in_file(sh.sh_offset, sh.sh_size, fsize) || sh.sh_size > ELFSYM_MAX_NOTE_SIZE ||
		    sh.sh_size == 0)
			continue;
		r = scan_notes(elf_getdata(scn, NULL), id, len);
		if (r == 0)
			return 0;
		if (r == -EINVAL)
			best = r;
	}
	return best;
}

int elf_hex(const uint8_t *id, size_t len, char *hex, size_t hexsz)
{
	static const char digits[] = "0123456789abcdef";

	if (!hex || hexsz < 2 * len + 1)
		return -ERANGE;
	for (size_t i = 0; i < len; i++) {
		hex[2 * i] = digits[id[i] >> 4];
		hex[2 * i + 1] = digits[id[i] & 15];
	}
	hex[2 * len] = '\0';
	return 0;
}

static int cmp_load(const void *a, const void *b)
{
	const struct load *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int load_segments(struct elfsym *e, Elf *elf, uint64_t fsize, size_t phnum)
{
	e->loads = calloc(phnum ? phnum : 1, sizeof(*e->loads));
	if (!e->loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type != PT_LOAD || ph.p_filesz == 0)
			continue;
		if (!in_file(ph.p_offset, ph.p_filesz, fsize) || ph.p_vaddr > UINT64_MAX - ph.p_filesz)
			return -EINVAL;
		if (e->nloads == ELFSYM_MAX_LOADS)
			return -E2BIG;
		e->loads[e->nloads++] = (struct load){ ph.p_vaddr, ph.p_filesz, ph.p_offset };
	}
	qsort(e->loads, e->nloads, sizeof(*e->loads), cmp_load);
	return 0;
}

/* The PT_LOAD whose file image holds vaddr v (loads are sorted by vaddr). */
static const struct load *load_of_vaddr(const struct elfsym *e, uint64_t v)
{
	size_t lo = 0, hi = e->nloads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->loads[mid].vaddr <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && v - e->loads[lo - 1].vaddr < e->loads[lo - 1].filesz)
		return &e->loads[lo - 1];
	return NULL;
}

/* Section `idx` with a header that is in range, uncompressed and inside the file. */
static Elf_Scn *get_section(Elf *elf, size_t idx, uint64_t fsize, GElf_Shdr *sh)
{
	size_t shnum;
	Elf_Scn *scn;

	if (elf_getshdrnum(elf, &shnum) < 0 || idx == 0 || idx >= shnum)
		return NULL;
	scn = elf_getscn(elf, idx);
	if (!scn || !gelf_getshdr(scn, sh) || (sh->sh_flags & SHF_COMPRESSED))
		return NULL;
	if (sh->sh_type != SHT_NOBITS && !in_file(sh->sh_offset, sh->sh_size, fsize))
		return NULL;
	return scn;
}

/* The .gnu.version entries for dynsym section `dynidx`, if present and well-formed. */
static const uint16_t *find_versym(Elf *elf, size_t dynidx, size_t count, uint64_t fsize)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_GNU_versym || sh.sh_link != dynidx)
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) || !in_file(sh.sh_offset, sh.sh_size, fsize) ||
		    sh.sh_size != (uint64_t)count * 2)
			return NULL;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_type != ELF_T_HALF || d->d_size != (size_t)count * 2 ||
		    ((uintptr_t)d->d_buf & 1))
			return NULL;
		return d->d_buf;
	}
	return NULL;
}

static unsigned bind_class(unsigned bind)
{
	switch (bind) {
	case STB_GLOBAL: case STB_GNU_UNIQUE: return 0;
	case STB_WEAK: return 1;
	case STB_LOCAL: return 2;
	default: return 3;
	}
}

/* Whether s is a function this file defines. */
static bool is_defined_func(const GElf_Sym *s)
{
	unsigned type = GELF_ST_TYPE(s->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && s->st_shndx != SHN_UNDEF;
}

/* A symbol table being loaded: its string table's size, versions and the budgets. */
struct symtab_load {
	size_t strsz;                /* bytes of the string table (e->names holds one more) */
	const uint16_t *versym;      /* .gnu.version of a .dynsym, else NULL */
	GElf_Half machine;
	size_t nfunc;                /* room in e->syms */
	uint64_t scanned;            /* name bytes scanned so far (ELFSYM_MAX_NAME_BYTES) */
};

/* Adds defined function i (s) to e->syms, unless its name is empty, too long or outside
 * every PT_LOAD. 0, or -EINVAL / -E2BIG for a table that breaks the bounds. */
static int add_func_sym(struct elfsym *e, struct symtab_load *t, size_t i, const GElf_Sym *s)
{
	const struct load *l;
	const char *name, *nul, *at;
	size_t room, lim;
	bool hidden;
	uint64_t v;

	if (s->st_name >= t->strsz)
		return -EINVAL;
	/* Bounded scan: at most ELFSYM_NAME_MAX + 1 bytes, all counted in the budget. */
	name = e->names + s->st_name;
	room = t->strsz + 1 - s->st_name;   /* includes our terminator */
	lim = room < ELFSYM_NAME_MAX + 1 ? room : ELFSYM_NAME_MAX + 1;
	nul = memchr(name, '\0', lim);
	t->scanned += nul ? (uint64_t)(nul - name) + 1 : lim;
	if (t->scanned > ELFSYM_MAX_NAME_BYTES)
		return -E2BIG;
	if (!nul)
		return 0;   /* longer than ELFSYM_NAME_MAX */
	/* Versions: "name@V" (hidden) / "name@@V" (default) in .symtab, the versym
	 * hidden bit in .dynsym. Decided on the unmodified table; cut afterwards. */
	at = memchr(name, '@', (size_t)(nul - name));
	hidden = at && at[1] != '@';
	if (t->versym && (t->versym[i] & VERSYM_HIDDEN))
		hidden = true;
	if ((at ? at : nul) == name || e->nsyms == t->nfunc)
		return 0;
	v = s->st_value;
	if (t->machine == EM_ARM)
		v &= ~(uint64_t)1;   /* Thumb bit */
	l = load_of_vaddr(e, v);
	if (!l)
		return 0;
	e->syms[e->nsyms++] = (struct fsym){
		.off = v - l->vaddr + l->off,
		.size = s->st_size,
		.seg_end = l->off + l->filesz,
		.name = s->st_name,
		.len = (uint32_t)((at ? at : nul) - name),
		.rank = (uint8_t)(2 * bind_class(GELF_ST_BIND(s->st_info)) + hidden),
	};
	return 0;
}

/* Loads the function symbols of SHT_SYMTAB/SHT_DYNSYM section scn (index idx). */
static int load_symtab(struct elfsym *e, Elf *elf, Elf_Scn *scn, size_t idx, uint64_t fsize)
{
	GElf_Ehdr eh;
	GElf_Shdr sh, strsh;
	Elf_Scn *strscn;
	Elf_Data *d, *sd;
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	struct symtab_load t = { 0 };
	uint64_t count;
	GElf_Sym s;
	int r;

	if (!gelf_getehdr(elf, &eh) || !gelf_getshdr(scn, &sh) || entsize == 0)
		return -EINVAL;
	if ((sh.sh_flags & SHF_COMPRESSED) || !in_file(sh.sh_offset, sh.sh_size, fsize) ||
	    sh.sh_entsize != entsize || sh.sh_size % entsize)
		return -EINVAL;
	count = sh.sh_size / entsize;
	if (count > ELFSYM_MAX_SYMBOLS)
		return -E2BIG;
	strscn = get_section(elf, sh.sh_link, fsize, &strsh);
	if (!strscn || strsh.sh_type != SHT_STRTAB)
		return -EINVAL;
	if (strsh.sh_size > ELFSYM_MAX_STRTAB)
		return -E2BIG;
	if (count == 0)
		return 0;
	d = elf_getdata(scn, NULL);
	sd = elf_getdata(strscn, NULL);
	if (!d || !d->d_buf || d->d_type != ELF_T_SYM || d->d_size / entsize < count)
		return -EINVAL;
	if (!sd || (sd->d_size && !sd->d_buf) || sd->d_size > ELFSYM_MAX_STRTAB)
		return -EINVAL;
	t = (struct symtab_load){ .strsz = sd->d_size, .machine = eh.e_machine };
	if (sh.sh_type == SHT_DYNSYM)
		t.versym = find_versym(elf, idx, (size_t)count, fsize);

	/* Size the array by the functions actually defined, not by the table. */
	for (size_t i = 1; i < count; i++) {
		if (!gelf_getsym(d, (int)i, &s))
			return -EINVAL;
		t.nfunc += is_defined_func(&s);
	}
	if (t.nfunc == 0)
		return 0;
	e->names = malloc(sd->d_size + 1);
	e->syms = malloc(t.nfunc * sizeof(*e->syms));
	if (!e->names || !e->syms)
		return -ENOMEM;
	if (sd->d_size)
		memcpy(e->names, sd->d_buf, sd->d_size);
	e->names[sd->d_size] = '\0';

	for (size_t i = 1; i < count; i++) {
		if (!gelf_getsym(d, (int)i, &s))
			return -EINVAL;
		if (!is_defined_func(&s))
			continue;
		r = add_func_sym(e, &t, i, &s);
		if (r < 0)
			return r;
	}
	/* Cutting at each name's first '@' is consistent for names sharing a tail. */
	for (uint32_t i = 0; i < e->nsyms; i++)
		e->names[e->syms[i].name + e->syms[i].len] = '\0';
	return 0;
}

static unsigned underscores(const char *s)
{
	unsigned n = 0;
	while (s[n] == '_')
		n++;
	return n;
}

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

static int cmp_by_name(const void *a, const void *b, void *arg)
{
	const struct elfsym *e = arg;
	const struct fsym *x = &e->syms[*(const uint32_t *)a], *y = &e->syms[*(const uint32_t *)b];
	int r = x->name == y->name ? 0 : strcmp(e->names + x->name, e->names + y->name);

	if (r)
		return r;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return cmp_u64(x->off, y->off);
}

/* By offset, then the symbol to show for that offset first: stronger binding, default
 * version, fewer leading underscores ("malloc" over "__libc_malloc"), shorter, by name. */
static int cmp_by_off(const void *a, const void *b, void *arg)
{
	const struct elfsym *e = arg;
	const struct fsym *x = &e->syms[*(const uint32_t *)a], *y = &e->syms[*(const uint32_t *)b];
	const char *xn = e->names + x->name, *yn = e->names + y->name;
	unsigned ux, uy;
	size_t lx, ly;
	int r;

	if ((r = cmp_u64(x->off, y->off)))
		return r;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	ux = underscores(xn);
	uy = underscores(yn);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	lx = x->len;
	ly = y->len;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x->name == y->name ? 0 : strcmp(xn, yn);
}

static int build_indexes(struct elfsym *e)
{
	_cleanup_free_ uint32_t *order = NULL;
	uint32_t n = e->nsyms;

	if (n == 0)
		return 0;
	e->by_name = malloc((size_t)n * sizeof(*e->by_name));
	order = malloc((size_t)n * sizeof(*order));
	e->ranges = malloc((size_t)n * sizeof(*e->ranges));
	if (!e->by_name || !order || !e->ranges)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		e->by_name[i] = order[i] = i;
	qsort_r(e->by_name, n, sizeof(*e->by_name), cmp_by_name, e);
	qsort_r(order, n, sizeof(*order), cmp_by_off, e);

	/* One range per distinct start: the preferred symbol, the largest known size. */
	for (uint32_t i = 0; i < n;) {
		const struct fsym *s = &e->syms[order[i]];
		struct frange *r = &e->ranges[e->nranges++];

		r->start = s->off;
		r->sym = order[i];
		r->end = 0;
		for (; i < n && e->syms[order[i]].off == r->start; i++) {
			const struct fsym *t = &e->syms[order[i]];
			uint64_t end = t->size > UINT64_MAX - t->off ? UINT64_MAX : t->off + t->size;

			if (t->size && end > r->end)
				r->end = end;
		}
	}
	/* Size 0: up to the next symbol, or the end of the segment's file image, or the end
	 * of a sized function it sits inside (an asm label typed as a function). */
	uint64_t cover = 0;   /* furthest end of the sized ranges so far */
	for (uint32_t i = 0; i < e->nranges; i++) {
		struct frange *r = &e->ranges[i];

		if (r->end) {
			if (r->end > cover)
				cover = r->end;
			continue;
		}
		r->end = e->syms[r->sym].seg_end;
		if (i + 1 < e->nranges && e->ranges[i + 1].start < r->end)
			r->end = e->ranges[i + 1].start;
		if (cover > r->start && cover < r->end)
			r->end = cover;
		if (r->end <= r->start)
			r->end = r->start + 1;
	}
	return 0;
}

static int load_symbols(struct elfsym *e, Elf *elf, uint64_t fsize)
{
	static const Elf64_Word order[] = { SHT_SYMTAB, SHT_DYNSYM };
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh))
		return -EINVAL;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		return 0;   /* no file offsets to speak of (ET_REL, ET_CORE) */
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		Elf_Scn *scn = NULL;
		int r;

		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) && sh.sh_type == order[k])
				break;
		}
		if (!scn)
			continue;
		r = load_symtab(e, elf, scn, elf_ndxscn(scn), fsize);
		if (r < 0)
			return r;
		if (e->nsyms)
			break;
		free(e->names);
		free(e->syms);
		e->names = NULL;
		e->syms = NULL;
	}
	return build_indexes(e);
}

static int elfsym_load(struct elfsym **out, Elf *elf, uint64_t fsize)
{
	_cleanup_elfsym_ struct elfsym *e = NULL;
	size_t phnum;
	int r;

	if (!elf)
		return -EINVAL;
	if ((r = check_headers(elf, fsize, &phnum)) < 0)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	if ((r = load_segments(e, elf, fsize, phnum)) < 0)
		return r;
	e->build_id_err = find_build_id(elf, fsize, phnum, e->build_id, &e->build_id_len);
	if ((r = load_symbols(e, elf, fsize)) < 0)
		return r;
	*out = e;
	e = NULL;
	return 0;
}

/* Opens a regular file for libelf without following it into FIFOs or devices. */
static int open_elf_file(const char *path, int *fd, Elf **elf, uint64_t *fsize)
{
	struct stat st;

	if (!path)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	if (fstat(*fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -EINVAL;
	*fsize = (uint64_t)st.st_size;
	/* ELF_C_READ: pread on demand, never mmap (truncation would raise SIGBUS). */
	*elf = elf_begin(*fd, ELF_C_READ, NULL);
	return *elf ? 0 : -EINVAL;
}

int elfsym_open(struct elfsym **out, const char *path)
{
	_cleanup_close_ int fd = -1;
	_cleanup_elf_ Elf *elf = NULL;
	uint64_t fsize;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((r = open_elf_file(path, &fd, &elf, &fsize)) < 0)
		return r;
	return elfsym_load(out, elf, fsize);
}

int elfsym_open_mem(struct elfsym **out, const void *buf, size_t len)
{
	_cleanup_elf_ Elf *elf = NULL;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!buf || len == 0 || elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* elf_memory does not write to the image for read-only use. */
	elf = elf_memory((char *)buf, len);
	if (!elf)
		return -EINVAL;
	return elfsym_load(out, elf, len);
}

void elfsym_close(struct elfsym *e)
{
	if (!e)
		return;
	free(e->names);
	free(e->syms);
	free(e->by_name);
	free(e->ranges);
	free(e->loads);
	free(e);
}

int elfsym_build_id(const struct elfsym *e, char *hex, size_t hexsz)
{
	if (!e)
		return -EINVAL;
	if (e->build_id_err)
		return e->build_id_err;
	return elf_hex(e->build_id, e->build_id_len, hex, hexsz);
}

int elf_build_id_of(const char *path, char *hex, size_t hexsz)
{
	_cleanup_close_ int fd = -1;
	_cleanup_elf_ Elf *elf = NULL;
	uint8_t id[ELFSYM_BUILD_ID_MAX];
	uint64_t fsize;
	size_t phnum, len = 0;
	int r;

	if ((r = open_elf_file(path, &fd, &elf, &fsize)) < 0)
		return r;
	if ((r = check_headers(elf, fsize, &phnum)) < 0)
		return r;
	if ((r = find_build_id(elf, fsize, phnum, id, &len)) < 0)
		return r;
	return elf_hex(id, len, hex, hexsz);
}

/* Compares symbol name s with the first qlen bytes of the query. */
static int cmp_query(const char *s, const char *q, size_t qlen)
{
	int r = strncmp(s, q, qlen);
	if (r)
		return r;
	return s[qlen] != '\0';
}

/* The preferred symbol named q[0..qlen), or NULL. */
static const struct fsym *find_name(const struct elfsym *e, const char *q, size_t qlen)
{
	uint32_t lo = 0, hi = e->nsyms;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (cmp_query(e->names + e->syms[e->by_name[mid]].name, q, qlen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < e->nsyms && cmp_query(e->names + e->syms[e->by_name[lo]].name, q, qlen) == 0)
		return &e->syms[e->by_name[lo]];
	return NULL;
}

int elfsym_func_offset(const struct elfsym *e, const char *name, uint64_t *off)
{
	const struct fsym *s;
	size_t qlen;

	if (!e || !name || !off)
		return -EINVAL;
	qlen = strcspn(name, "@");
	if (qlen == 0)
		return -EINVAL;
	s = find_name(e, name, qlen);
	if (!s)
		return -ENOENT;
	*off = s->off;
	return 0;
}

int elfsym_find_funcs(const struct elfsym *e, const char *const *names, size_t n,
		      uint64_t *offs)
{
	int found = 0;

	if (!e || (n && (!names || !offs)) || n > INT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		offs[i] = UINT64_MAX;
		if (names[i] && elfsym_func_offset(e, names[i], &offs[i]) == 0)
			found++;
	}
	return found;
}

const char *elfsym_lookup_offset(const struct elfsym *e, uint64_t off, uint64_t *delta)
{
	uint32_t lo = 0, hi;
	const struct frange *r;

	if (!e)
		return NULL;
	hi = e->nranges;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (e->ranges[mid].start <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* The nearest start below off, else a function that encloses it (nested symbols). */
	r = &e->ranges[lo - 1];
	for (uint32_t k = 1; off >= r->end; k++) {
		if (k > ELFSYM_LOOKUP_BACKTRACK || k >= lo)
			return NULL;
		r = &e->ranges[lo - 1 - k];
	}
	if (delta)
		*delta = off - r->start;
	return e->names + e->syms[r->sym].name;
}

int elfsym_offset_to_vaddr(const struct elfsym *e, uint64_t off, uint64_t *vaddr)
{
	if (!e || !vaddr)
		return -EINVAL;
	for (size_t i = 0; i < e->nloads; i++) {
		const struct load *l = &e->loads[i];
		if (off >= l->off && off - l->off < l->filesz) {
			*vaddr = off - l->off + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

size_t elfsym_count(const struct elfsym *e)
{
	return e ? e->nsyms : 0;
}

int elfsym_is_elf(const char *path)
{
	_cleanup_close_ int fd = -1;
	unsigned char magic[SELFMAG];
	struct stat st;
	ssize_t k;

	if (!path)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	do
		k = pread(fd, magic, sizeof(magic), 0);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	return k == (ssize_t)sizeof(magic) && !memcmp(magic, ELFMAG, SELFMAG);
}
