/* USDT sites read from an ELF file's .note.stapsdt and attached through multi-uprobe
 * links (see usdt_multi.h). The file is the target's, so hostile: read through libelf,
 * every note string bounded by its descriptor, at most USDT_NOTES_MAX notes and
 * USDT_SITES_MAX sites; addresses that fall in no loadable segment are refused. Cost:
 * one pass over the notes per attach (a few hundred bytes for a sampler). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stddef.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#if defined(__x86_64__)
#include <asm/ptrace.h>
#endif
#include "base/cleanup.h"
#include "daemon/alloc/uprobe_multi.h"
#include "daemon/alloc/usdt_multi.h"

#define STAPSDT_NOTE_TYPE 3
#define STAPSDT_NOTE_NAME "stapsdt"
#define STAPSDT_BASE_SECTION ".stapsdt.base"
#define STAPSDT_NOTE_SECTION ".note.stapsdt"
#define USDT_REG_NAME_MAX 16

/* ---- argument specs (x86-64: libbpf's usdt.c accepts the same three forms) ---- */

#if defined(__x86_64__)
static int reg_offset(const char *reg)
{
	static const struct { const char *names[4]; size_t off; } regs[] = {
#define R(a, b, c, d, f) { { a, b, c, d }, offsetof(struct pt_regs, f) }
		R("rip", "eip", "", "", rip), R("rax", "eax", "ax", "al", rax),
		R("rbx", "ebx", "bx", "bl", rbx), R("rcx", "ecx", "cx", "cl", rcx),
		R("rdx", "edx", "dx", "dl", rdx), R("rsi", "esi", "si", "sil", rsi),
		R("rdi", "edi", "di", "dil", rdi), R("rbp", "ebp", "bp", "bpl", rbp),
		R("rsp", "esp", "sp", "spl", rsp), R("r8", "r8d", "r8w", "r8b", r8),
		R("r9", "r9d", "r9w", "r9b", r9), R("r10", "r10d", "r10w", "r10b", r10),
		R("r11", "r11d", "r11w", "r11b", r11), R("r12", "r12d", "r12w", "r12b", r12),
		R("r13", "r13d", "r13w", "r13b", r13), R("r14", "r14d", "r14w", "r14b", r14),
		R("r15", "r15d", "r15w", "r15b", r15),
#undef R
	};

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int j = 0; j < 4; j++)
			if (regs[i].names[j][0] && strcmp(reg, regs[i].names[j]) == 0)
				return (int)regs[i].off;
	return -EOPNOTSUPP;
}

/* One "SIZE@LOC" argument at s; *used: characters consumed. */
static int parse_arg(const char *s, struct usdt_arg_spec *a, int *used)
{
	char reg[USDT_REG_NAME_MAX];
	long off;
	int size, n = -1, r;

	memset(a, 0, sizeof(*a));
	if (sscanf(s, " %d @ %ld ( %%%15[^)] ) %n", &size, &off, reg, &n) == 3 && n > 0) {
		a->arg_type = USDT_ARG_REG_DEREF;
		a->val_off = (uint64_t)off;
	} else if (n = -1, sscanf(s, " %d @ ( %%%15[^)] ) %n", &size, reg, &n) == 2 && n > 0) {
		a->arg_type = USDT_ARG_REG_DEREF;
	} else if (n = -1, sscanf(s, " %d @ %%%15[a-z0-9] %n", &size, reg, &n) == 2 && n > 0) {
		a->arg_type = USDT_ARG_REG;
	} else if (n = -1, sscanf(s, " %d @ $%ld %n", &size, &off, &n) == 2 && n > 0) {
		a->arg_type = USDT_ARG_CONST;
		a->val_off = (uint64_t)off;
		reg[0] = '\0';
	} else {
		return -EOPNOTSUPP;   /* e.g. sym(%rip) or an indexed address */
	}
	if (a->arg_type != USDT_ARG_CONST) {
		if ((r = reg_offset(reg)) < 0)
			return r;
		a->reg_off = (short)r;
	}
	int abs = size < 0 ? -size : size;
	if (abs != 1 && abs != 2 && abs != 4 && abs != 8)
		return -EINVAL;
	a->arg_signed = size < 0;
	a->arg_bitshift = (char)(64 - abs * 8);
	*used = n;
	return 0;
}

int usdt_parse_args(const char *args, struct usdt_spec *spec)
{
	const char *p = args;
	int used, err;

	memset(spec, 0, sizeof(*spec));
	while (*p == ' ')
		p++;
	while (*p) {
		if (spec->arg_cnt == USDT_ARGS_MAX)
			return -E2BIG;
		if ((err = parse_arg(p, &spec->args[spec->arg_cnt], &used)))
			return err;
		spec->arg_cnt++;
		p += used;
	}
	return 0;
}
#else
int usdt_parse_args(const char *args, struct usdt_spec *spec)
{
	(void)args;
	memset(spec, 0, sizeof(*spec));
	return -EOPNOTSUPP;
}
#endif

int usdt_specs_init(struct usdt_specs *s, int map_fd, size_t value_size)
{
	memset(s, 0, sizeof(*s));
	s->map_fd = -1;
	if (map_fd < 0 || value_size != sizeof(struct usdt_spec))
		return -EINVAL;
	s->map_fd = map_fd;
	return 0;
}

void usdt_specs_free(struct usdt_specs *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->args[i]);
	s->n = 0;
}

/* The spec id of an argument string, made (and written to the map) on first use. */
static int spec_id(struct usdt_specs *s, const char *args)
{
	struct usdt_spec spec;
	int err;

	for (unsigned i = 0; i < s->n; i++)
		if (strcmp(s->args[i], args) == 0)
			return (int)i;
	if (s->n == USDT_SPECS_MAX)
		return -ENOSPC;
	if ((err = usdt_parse_args(args, &spec)))
		return err;
	uint32_t id = s->n;
	if (bpf_map_update_elem(s->map_fd, &id, &spec, BPF_ANY))
		return -errno;
	if (!(s->args[id] = strdup(args)))
		return -ENOMEM;
	s->n++;
	return (int)id;
}

/* ---- the notes ---- */

struct segs {
	GElf_Phdr *ph;
	size_t n;
	uint64_t base;          /* .stapsdt.base's address, 0 without one */
};

/* File offset of vaddr in a loadable segment (executable ones when exec), or 0. */
static uint64_t seg_offset(const struct segs *sg, uint64_t vaddr, bool exec)
{
	for (size_t i = 0; i < sg->n; i++) {
		const GElf_Phdr *p = &sg->ph[i];
		if (p->p_type != PT_LOAD || !!(p->p_flags & PF_X) != exec)
			continue;
		if (vaddr >= p->p_vaddr && vaddr - p->p_vaddr < p->p_filesz)
			return vaddr - p->p_vaddr + p->p_offset;
	}
	return 0;
}


/* One note's descriptor: pc, base, semaphore, then provider, name, args (NUL-ended). */
static int take_note(struct usdt_specs *s, const struct segs *sg, const char *d, size_t len,
		     const char *provider, const char *name, struct usdt_sites *out)
{
	uint64_t pc, base, sema;
	const char *prov = d + 24, *nm, *args, *end = d + len;

	if (len < 24)
		return 0;
	memcpy(&pc, d, 8);
	memcpy(&base, d + 8, 8);
	memcpy(&sema, d + 16, 8);
	if (!(nm = memchr(prov, '\0', (size_t)(end - prov))) || ++nm >= end ||
	    !(args = memchr(nm, '\0', (size_t)(end - nm))) || ++args >= end ||
	    !memchr(args, '\0', (size_t)(end - args)))
		return 0;   /* truncated: not a probe */
	if (strcmp(prov, provider) || strcmp(nm, name))
		return 0;
	if (sg->base && base) {   /* prelinked: every address moved by the same delta */
		pc += sg->base - base;
		if (sema)
			sema += sg->base - base;
	}
	uint64_t off = seg_offset(sg, pc, true), ref = sema ? seg_offset(sg, sema, false) : 0;
	if (!off || (sema && !ref))
		return -EINVAL;
	for (size_t i = 0; i < out->n; i++)
		if (out->off[i] == off)
			return 0;   /* the same site twice */
	if (out->n == USDT_SITES_MAX)
		return -E2BIG;
	int id = spec_id(s, args);
	if (id < 0)
		return id;
	out->off[out->n] = off;
	out->ref[out->n] = ref;
	out->cookie[out->n++] = (uint64_t)id;
	return 0;
}

static int read_segs(Elf *elf, struct segs *sg)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) || n == 0)
		return -EINVAL;
	if (!(sg->ph = calloc(n, sizeof(*sg->ph))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, &sg->ph[sg->n]))
			sg->n++;
	return 0;
}

static int collect_sites(struct usdt_specs *s, Elf *elf, const char *provider,
			 const char *name, struct usdt_sites *out)
{
	struct segs sg = { 0 };
	size_t shstrndx, notes = 0;
	Elf_Scn *scn = NULL;
	int err;

	if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64 ||
	    elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	if ((err = read_segs(elf, &sg)))
		return err;
	while ((scn = elf_nextscn(elf, scn))) {   /* .stapsdt.base first: notes need it */
		GElf_Shdr sh;
		const char *nm;
		if (gelf_getshdr(scn, &sh) && (nm = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    strcmp(nm, STAPSDT_BASE_SECTION) == 0)
			sg.base = sh.sh_addr;
	}
	err = 0;
	while (!err && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		Elf_Data *data;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !(nm = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(nm, STAPSDT_NOTE_SECTION) ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;
		while (!err && (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			if (++notes > USDT_NOTES_MAX) {
				err = -E2BIG;
				break;
			}
			if (nh.n_type == STAPSDT_NOTE_TYPE && nh.n_namesz == sizeof(STAPSDT_NOTE_NAME) &&
			    memcmp((char *)data->d_buf + name_off, STAPSDT_NOTE_NAME, nh.n_namesz) == 0)
				err = take_note(s, &sg, (char *)data->d_buf + desc_off, nh.n_descsz,
						provider, name, out);
			off = next;
		}
	}
	free(sg.ph);
	return err;
}

static void elf_endp(Elf **e)
{
	if (*e)
		elf_end(*e);
}

int usdt_multi_sites(struct usdt_specs *s, const char *path, const char *provider,
		     const char *name, struct usdt_sites *st)
{
	_cleanup_close_ int fd = -1;
	_cleanup_(elf_endp) Elf *elf = NULL;
	struct stat sb;
	int err;

	st->n = 0;
	if (s->map_fd < 0)
		return -EINVAL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &sb))
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -ENOEXEC;
	if (elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)))
		return -ENOEXEC;
	if ((err = collect_sites(s, elf, provider, name, st)))
		return err;
	return st->n ? 0 : -ENOENT;
}

int usdt_multi_attach(struct usdt_specs *s, int prog_fd, const char *path, int pid,
		      const char *provider, const char *name)
{
	_cleanup_free_ struct usdt_sites *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	if ((err = usdt_multi_sites(s, path, provider, name, st)))
		return err;
	return uprobe_multi_link_pid(prog_fd, path, st->off, st->ref, st->cookie, st->n, false, pid);
}

void usdt_link_destroy(struct usdt_link *l)
{
	if (l->link)
		bpf_link__destroy(l->link);
	if (l->multi && l->fd >= 0)
		close(l->fd);
	*l = (struct usdt_link){ 0 };
}
