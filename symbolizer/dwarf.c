/* DWARF lines and inline chains through libdw, on hostile files. Invariants of an open
 * dwsym: every DWARF section is in memory and libelf has been told the descriptor is done
 * (ELF_C_FDDONE), so a file truncated or rewritten in place after open cannot change an
 * answer; the ELF symbols come from the same inode (/proc/self/fd) as the build-id we
 * checked; the CU range index is built on the first lookup, not at open. */
#include "symbolizer/dwarf.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolizer/elfsym.h"
#include "base/cleanup.h"
#include "base/array.h"

/* Ranges before the nearest one a lookup also tries (overlapping CU ranges). */
#define DWSYM_LOOKUP_BACKTRACK 16u

struct cu_range {
	uint64_t start, end;   /* [start, end) link-time vaddrs */
	Dwarf_Off cu_off;      /* offset of the CU DIE in .debug_info */
};

struct fn_range {
	uint64_t lo, hi;       /* [lo, hi) of one range of a subprogram */
	Dwarf_Off off;         /* its DIE */
};

/* The subprograms of one CU with their ranges, sorted: built on the CU's first lookup, so
 * a lookup walks one function's subtree instead of the whole CU (dwarf_getscopes). */
struct cu_funcs {
	Dwarf_Off cu_off;
	struct fn_range *v;
	size_t n, cap;
};

struct dwsym {
	struct cu_funcs *cuf;
	size_t ncuf, capcuf, lastcuf;
	Elf *elf;               /* the ELF that holds the DWARF (binary or debug file) */
	Dwarf *dw;              /* NULL if there is no DWARF */
	struct elfsym *sym;     /* the binary's symbols and PT_LOADs (NULL for _mem w/o symbols) */
	struct cu_range *ranges;
	size_t nranges;
	bool indexed;
	int index_err;
	size_t bytes;
};

static void dwsym_closep(struct dwsym **d) { dwsym_close(*d); }
static void scopes_freep(Dwarf_Die **s) { free(*s); }
#define _cleanup_dwsym_ __attribute__((cleanup(dwsym_closep)))
#define _cleanup_scopes_ __attribute__((cleanup(scopes_freep)))

/* Sum of the DWARF sections' sizes: what libdw holds in memory for this file. */
static size_t debug_bytes(Elf *elf)
{
	size_t shstrndx, total = 0;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && (!strncmp(name, ".debug_", 7) || !strncmp(name, ".zdebug_", 8)))
			total += sh.sh_size > SIZE_MAX - total ? 0 : (size_t)sh.sh_size;
	}
	return total;
}

/* Reads the DWARF of elf into memory; afterwards libelf never touches the descriptor. */
static void load_dwarf(struct dwsym *d, Elf *elf)
{
	d->elf = elf;
	d->dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	d->bytes += debug_bytes(elf);
	elf_cntl(elf, ELF_C_FDDONE);
}

static int open_regular(const char *path, int *fd)
{
	struct stat st;

	if (!path)
		return -EINVAL;
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	if (fstat(*fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -EINVAL;
	return 0;
}

int dwsym_open(struct dwsym **out, const char *path, const char *debug_path)
{
	_cleanup_dwsym_ struct dwsym *d = NULL;
	_cleanup_close_ int fd = -1, dfd = -1;
	char self[64], want[2 * ELFSYM_BUILD_ID_MAX + 1];
	Elf *elf;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if ((r = open_regular(path, &fd)) < 0)
		return r;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	/* The same inode as fd, even if path is renamed over meanwhile. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if ((r = elfsym_open(&d->sym, self)) < 0)
		return r;
	d->bytes = sizeof(*d) + elfsym_count(d->sym) * 48;
	if (debug_path) {
		const void *id;
		ssize_t n;

		if ((r = open_regular(debug_path, &dfd)) < 0)
			return r;
		elf = elf_begin(dfd, ELF_C_READ, NULL);
		if (!elf)
			return -EINVAL;
		d->elf = elf;
		if (elf_kind(elf) != ELF_K_ELF)
			return -EINVAL;
		/* A debug file for another build would give wrong answers: refuse it. */
		if (elfsym_build_id(d->sym, want, sizeof(want)) == 0) {
			char got[2 * ELFSYM_BUILD_ID_MAX + 1];

			n = dwelf_elf_gnu_build_id(elf, &id);
			if (n <= 0 || n > ELFSYM_BUILD_ID_MAX ||
			    elf_hex(id, (size_t)n, got, sizeof(got)) < 0 || strcmp(got, want))
				return -ESTALE;
		}
	} else {
		elf = elf_begin(fd, ELF_C_READ, NULL);
		if (!elf)
			return -EINVAL;
		d->elf = elf;
	}
	load_dwarf(d, elf);
	*out = d;
	d = NULL;
	return 0;
}

int dwsym_open_mem(struct dwsym **out, const void *buf, size_t len)
{
	_cleanup_dwsym_ struct dwsym *d = NULL;
	Elf *elf;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!buf || len == 0 || elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	/* Symbols are optional here: a debug-only image has no PT_LOADs to speak of. */
	if (elfsym_open_mem(&d->sym, buf, len) < 0)
		d->sym = NULL;
	elf = elf_memory((char *)buf, len);
	if (!elf)
		return -EINVAL;
	d->elf = elf;
	if (elf_kind(elf) != ELF_K_ELF)
		return -EINVAL;
	load_dwarf(d, elf);
	*out = d;
	d = NULL;
	return 0;
}

void dwsym_close(struct dwsym *d)
{
	if (!d)
		return;
	if (d->dw)
		dwarf_end(d->dw);
	if (d->elf)
		elf_end(d->elf);
	elfsym_close(d->sym);
	free(d->ranges);
	for (size_t i = 0; i < d->ncuf; i++)
		free(d->cuf[i].v);
	free(d->cuf);
	free(d);
}

int dwsym_build_id(const struct dwsym *d, char *hex, size_t hexsz)
{
	if (!d)
		return -EINVAL;
	if (!d->sym)
		return -ENOENT;
	return elfsym_build_id(d->sym, hex, hexsz);
}

int dwsym_has_dwarf(const struct dwsym *d)
{
	return d && d->dw;
}

size_t dwsym_bytes(const struct dwsym *d)
{
	return d ? d->bytes + d->nranges * sizeof(*d->ranges) : 0;
}

/* ---- the CU range index ---- */

static int cmp_range(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int add_range(struct dwsym *d, size_t *cap, uint64_t s, uint64_t e, Dwarf_Off off)
{
	if (e <= s)
		return 0;
	if (d->nranges == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct cu_range *v;

		if (ncap > DWSYM_MAX_RANGES)
			ncap = DWSYM_MAX_RANGES;
		if (d->nranges >= ncap)
			return -E2BIG;
		v = realloc(d->ranges, ncap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->ranges = v;
		*cap = ncap;
	}
	d->ranges[d->nranges++] = (struct cu_range){ s, e, off };
	return 0;
}

/* Our own index from each CU's DW_AT_ranges / low_pc+high_pc: .debug_aranges is often
 * missing (clang does not emit it by default), and libdw 0.188 does not fall back. */
static int build_index(struct dwsym *d)
{
	Dwarf_CU *cu = NULL, *next;
	size_t cap = 0, ncus = 0;
	int r;

	for (;;) {
		Dwarf_Die cudie;
		uint8_t utype;
		Dwarf_Half ver;
		Dwarf_Addr base, s, e;
		ptrdiff_t off = 0;
		unsigned nr = 0;

		if (dwarf_get_units(d->dw, cu, &next, &ver, &utype, &cudie, NULL) != 0)
			break;
		cu = next;
		if (++ncus > DWSYM_MAX_CUS)
			return -E2BIG;
		if (utype != DW_UT_compile && utype != DW_UT_partial && utype != DW_UT_skeleton)
			continue;
		while ((off = dwarf_ranges(&cudie, off, &base, &s, &e)) > 0) {
			if ((r = add_range(d, &cap, s, e, dwarf_dieoffset(&cudie))) < 0)
				return r;
			nr++;
		}
		/* A CU without ranges: its line table still covers addresses. */
		if (nr == 0) {
			Dwarf_Lines *lines;
			size_t nl;
			uint64_t lo = UINT64_MAX, hi = 0;

			if (dwarf_getsrclines(&cudie, &lines, &nl) != 0)
				continue;
			for (size_t i = 0; i < nl; i++) {
				Dwarf_Addr a;

				if (dwarf_lineaddr(dwarf_onesrcline(lines, i), &a) != 0)
					continue;
				if (a < lo)
					lo = a;
				if (a > hi)
					hi = a;
			}
			if (lo < hi && (r = add_range(d, &cap, lo, hi + 1, dwarf_dieoffset(&cudie))) < 0)
				return r;
		}
	}
	if (d->nranges)
		qsort(d->ranges, d->nranges, sizeof(*d->ranges), cmp_range);
	return 0;
}

static int find_cu(struct dwsym *d, uint64_t pc, Dwarf_Die *cudie)
{
	size_t lo = 0, hi;

	if (!d->indexed) {
		d->indexed = true;
		d->index_err = build_index(d);
	}
	if (d->index_err)
		return d->index_err;
	hi = d->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->ranges[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = 0; k < DWSYM_LOOKUP_BACKTRACK && k < lo; k++) {
		const struct cu_range *r = &d->ranges[lo - 1 - k];

		if (pc < r->end)
			return dwarf_offdie(d->dw, r->cu_off, cudie) ? 0 : -EINVAL;
	}
	return -ENOENT;
}


/* ---- per-CU function index ---- */

#define DWSYM_MAX_NEST 32        /* namespace/class nesting walked for subprograms */
#define DWSYM_MAX_FUNCS (1u << 22)

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int collect_fns(struct cu_funcs *cf, Dwarf_Die *parent, unsigned depth)
{
	Dwarf_Die c;

	if (depth > DWSYM_MAX_NEST || dwarf_child(parent, &c) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&c), r;

		if (tag == DW_TAG_subprogram) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;

			while ((off = dwarf_ranges(&c, off, &base, &lo, &hi)) > 0) {
				if (hi <= lo)
					continue;
				if (cf->n == cf->cap) {
					size_t nc = cf->cap ? cf->cap * 2 : 64;
					struct fn_range *v;

					if (nc > DWSYM_MAX_FUNCS)
						return -E2BIG;
					if (!(v = realloc(cf->v, nc * sizeof(*v))))
						return -ENOMEM;
					cf->v = v;
					cf->cap = nc;
				}
				cf->v[cf->n++] = (struct fn_range){ lo, hi, dwarf_dieoffset(&c) };
			}
		} else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
			   tag == DW_TAG_structure_type || tag == DW_TAG_union_type) {
			if ((r = collect_fns(cf, &c, depth + 1)) < 0)
				return r;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return 0;
}

static struct cu_funcs *cu_funcs_of(struct dwsym *d, Dwarf_Die *cudie)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct cu_funcs *cf;

	if (d->lastcuf < d->ncuf && d->cuf[d->lastcuf].cu_off == off)
		return &d->cuf[d->lastcuf];
	for (size_t i = 0; i < d->ncuf; i++)
		if (d->cuf[i].cu_off == off) {
			d->lastcuf = i;
			return &d->cuf[i];
		}
	if (ARRAY_GROW(d->cuf, d->capcuf, d->ncuf, 16) < 0)
		return NULL;
	cf = &d->cuf[d->ncuf];
	*cf = (struct cu_funcs){ .cu_off = off };
	if (collect_fns(cf, cudie, 0) < 0) {
		free(cf->v);
		return NULL;
	}
	if (cf->n)
		qsort(cf->v, cf->n, sizeof(*cf->v), cmp_fn);
	d->bytes += cf->cap * sizeof(*cf->v);
	d->lastcuf = d->ncuf++;
	return cf;
}

/* Chain innermost-first of the scopes containing pc under the subprogram holding it:
 * the same as dwarf_getscopes_die of the innermost scope, down to the subprogram. */
static int fast_chain(struct dwsym *d, Dwarf_Die *cudie, uint64_t pc, Dwarf_Die **out)
{
	struct cu_funcs *cf = cu_funcs_of(d, cudie);
	Dwarf_Die path[DWSYM_MAX_DEPTH * 2], cur;
	size_t lo = 0, hi, n = 0;
	bool found = false;

	if (!cf)
		return -ENOENT;
	hi = cf->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cf->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = 0; k < DWSYM_LOOKUP_BACKTRACK && k < lo; k++)
		if (pc < cf->v[lo - 1 - k].hi) {
			found = dwarf_offdie(d->dw, cf->v[lo - 1 - k].off, &cur) != NULL;
			break;
		}
	if (!found)
		return -ENOENT;
	path[n++] = cur;
	while (n < sizeof(path) / sizeof(path[0])) {
		Dwarf_Die c;
		bool deeper = false;

		if (dwarf_child(&path[n - 1], &c) != 0)
			break;
		do {
			int tag = dwarf_tag(&c);

			if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
			     tag == DW_TAG_try_block || tag == DW_TAG_catch_block ||
			     tag == DW_TAG_with_stmt) && dwarf_haspc(&c, pc) == 1) {
				path[n++] = c;
				deeper = true;
				break;
			}
		} while (dwarf_siblingof(&c, &c) == 0);
		if (!deeper)
			break;
	}
	if (!(*out = malloc(n * sizeof(**out))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		(*out)[i] = path[n - 1 - i];
	return (int)n;
}

/* ---- frames ---- */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void dwsym_frames_free(struct dwsym_frames *f)
{
	if (!f)
		return;
	for (unsigned i = 0; i < f->n; i++) {
		free(f->v[i].function);
		free(f->v[i].mangled);
		free(f->v[i].file);
	}
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

/* Appends a frame; names are copied. -ENOMEM leaves f consistent. */
static int push_frame(struct dwsym_frames *f, const char *mangled, const char *file,
		      uint32_t line, uint32_t col, uint32_t decl_line, bool inlined)
{
	struct dwsym_frame *fr;

	if (f->n == DWSYM_MAX_DEPTH)
		return -E2BIG;
	if (!f->v && !(f->v = calloc(DWSYM_MAX_DEPTH, sizeof(*f->v))))
		return -ENOMEM;
	fr = &f->v[f->n];
	*fr = (struct dwsym_frame){ .line = line, .column = col, .decl_line = decl_line,
				    .inlined = inlined };
	fr->mangled = strdup(mangled ? mangled : "??");
	fr->function = sym_demangle(fr->mangled ? fr->mangled : "??");
	fr->file = dup_or_null(file);
	if (!fr->mangled || !fr->function || (file && !fr->file)) {
		free(fr->mangled);
		free(fr->function);
		free(fr->file);
		return -ENOMEM;
	}
	f->n++;
	return 0;
}

static const char *die_linkage_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *s;

	if ((s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a))) && *s)
		return s;
	if ((s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))) && *s)
		return s;
	if ((s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a))) && *s)
		return s;
	return NULL;
}

static uint32_t clamp_u32(int v)
{
	return v > 0 ? (uint32_t)v : 0;
}

static uint32_t die_udata(Dwarf_Die *die, unsigned at)
{
	Dwarf_Attribute a;
	Dwarf_Word w;

	if (dwarf_formudata(dwarf_attr(die, at, &a), &w) != 0 || w > UINT32_MAX)
		return 0;
	return (uint32_t)w;
}

/* One frame per inlined_subroutine in the containment chain, then the subprogram. */
static int frames_from_scopes(struct dwsym *d, Dwarf_Die *cudie, uint64_t pc,
			      const char *elf_name, struct dwsym_frames *out)
{
	_cleanup_scopes_ Dwarf_Die *scopes = NULL, *chain = NULL;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	Dwarf_Line *ln;
	Dwarf_Die inner;
	const char *file = NULL;
	uint32_t line = 0, col = 0;
	int n, r, c = 0, l = 0;

	if ((ln = dwarf_getsrc_die(cudie, pc))) {
		file = dwarf_linesrc(ln, NULL, NULL);
		if (dwarf_lineno(ln, &l) == 0)
			line = clamp_u32(l);
		if (dwarf_linecol(ln, &c) == 0)
			col = clamp_u32(c);
	}
	n = fast_chain(d, cudie, pc, &chain);
	if (n <= 0) {
		/* Not under an indexed subprogram: libdw's own (slower) walk of the whole CU.
		 * Then the physical nesting of the innermost scope (dwarf_getscopes continues
		 * into the abstract origin's scopes past an inline instance). */
		n = dwarf_getscopes(cudie, pc, &scopes);
		if (n > 0 && dwarf_offdie(dwarf_cu_getdwarf(cudie->cu), dwarf_dieoffset(&scopes[0]),
					  &inner))
			n = dwarf_getscopes_die(&inner, &chain);
		else
			n = 0;
	}
	if (n > 0 && dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
		files = NULL;
	for (int i = 0; i < n; i++) {
		Dwarf_Die *die = &chain[i];
		int tag = dwarf_tag(die), decl = 0;
		const char *name;
		bool inl = tag == DW_TAG_inlined_subroutine;

		if (tag != DW_TAG_subprogram && !inl)
			continue;
		name = die_linkage_name(die);
		if (!name && !inl)
			name = elf_name;
		if (dwarf_decl_line(die, &decl) != 0)
			decl = 0;
		if ((r = push_frame(out, name, file, line, col, clamp_u32(decl), inl)) < 0)
			return r == -E2BIG ? 0 : r;
		if (!inl)
			return 0;
		/* The caller's location is where this instance was inlined. */
		{
			uint32_t fi = die_udata(die, DW_AT_call_file);

			file = files && fi < nfiles ? dwarf_filesrc(files, fi, NULL, NULL) : NULL;
			line = die_udata(die, DW_AT_call_line);
			col = die_udata(die, DW_AT_call_column);
		}
	}
	/* No subprogram DIE (assembly, or a truncated chain): the line and the ELF name. */
	if (out->n == 0 && (file || elf_name))
		return push_frame(out, elf_name, file, line, col, 0, false);
	return out->n ? 0 : -ENOENT;
}

static int lookup(struct dwsym *d, uint64_t pc, bool have_off, uint64_t off,
		  struct dwsym_frames *out)
{
	const char *elf_name = have_off && d->sym ? elfsym_lookup_offset(d->sym, off, NULL) : NULL;
	Dwarf_Die cudie;
	int r;

	if (d->dw && find_cu(d, pc, &cudie) == 0) {
		r = frames_from_scopes(d, &cudie, pc, elf_name, out);
		if (r != -ENOENT)
			return r;
	}
	if (!elf_name)
		return -ENOENT;
	return push_frame(out, elf_name, NULL, 0, 0, 0, false);
}

int dwsym_lookup_vaddr(struct dwsym *d, uint64_t pc, struct dwsym_frames *out)
{
	if (!out)
		return -EINVAL;
	*out = (struct dwsym_frames){ 0 };
	if (!d)
		return -EINVAL;
	return lookup(d, pc, false, 0, out);
}

int dwsym_lookup_offset(struct dwsym *d, uint64_t off, struct dwsym_frames *out)
{
	uint64_t pc;

	if (!out)
		return -EINVAL;
	*out = (struct dwsym_frames){ 0 };
	if (!d || !d->sym)
		return -EINVAL;
	if (elfsym_offset_to_vaddr(d->sym, off, &pc) < 0)
		return -ENOENT;
	return lookup(d, pc, true, off, out);
}
