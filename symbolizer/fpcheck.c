/* Frame-pointer detection by prologue: GCC and clang with -fno-omit-frame-pointer open
 * (nearly) every function with push %rbp; mov %rsp,%rbp, optimised code without it only
 * the few that use alloca or realign the stack. Cost: one pass over the symbol table
 * and one small read per function, once per object (callers cache the answer). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>
#include "symbolizer/fpcheck.h"

static const unsigned char endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
static const unsigned char fp_prologue[4] = { 0x55, 0x48, 0x89, 0xe5 };  /* push; mov */

/* Start-up code every executable links (crt1.o, crti.o, crtbegin.o), built without
 * frame pointers whatever the program's own flags: not counted. */
static const char *const crt_funcs[] = {
	"_start", "_init", "_fini", "deregister_tm_clones", "register_tm_clones",
	"__do_global_dtors_aux", "frame_dummy", "_dl_relocate_static_pie",
};

static bool is_crt(Elf *elf, size_t strndx, const GElf_Sym *sym)
{
	const char *name = elf_strptr(elf, strndx, sym->st_name);

	for (size_t i = 0; name && i < sizeof(crt_funcs) / sizeof(crt_funcs[0]); i++)
		if (!strcmp(name, crt_funcs[i]))
			return true;
	return false;
}

/* Callee-saved registers pushed first: code that keeps frame pointers pushes %rbp first
 * (and then sets it), code without them saves its other registers first, or %rbp as a
 * plain register. */
enum prologue { PRO_OTHER, PRO_FP, PRO_NO_FP };

static enum prologue prologue_of(Elf *elf, const GElf_Sym *sym)
{
	Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
	GElf_Shdr sh;
	Elf_Data *d;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
	    !(sh.sh_flags & SHF_EXECINSTR) || sym->st_value < sh.sh_addr)
		return PRO_OTHER;
	uint64_t off = sym->st_value - sh.sh_addr;
	if (!(d = elf_getdata(scn, NULL)) || !d->d_buf || off > d->d_size || d->d_size - off < 8)
		return PRO_OTHER;
	const unsigned char *p = (const unsigned char *)d->d_buf + off;
	if (!memcmp(p, endbr64, sizeof(endbr64)))
		p += sizeof(endbr64);
	if (!memcmp(p, fp_prologue, sizeof(fp_prologue)))
		return PRO_FP;
	if (p[0] == 0x55 || p[0] == 0x53 || (p[0] == 0x41 && p[1] >= 0x54 && p[1] <= 0x57))
		return PRO_NO_FP;   /* push %rbp not followed by mov, push %rbx, push %r12..%r15 */
	return PRO_OTHER;
}

static int count_in(Elf *elf, Elf_Scn *symscn, unsigned *funcs, unsigned *fp)
{
	GElf_Shdr sh;
	Elf_Data *d = elf_getdata(symscn, NULL);

	if (!d || !gelf_getshdr(symscn, &sh) || !sh.sh_entsize)
		return -EINVAL;
	for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_size < FPCHECK_MIN_SIZE || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE ||
		    is_crt(elf, sh.sh_link, &sym))
			continue;
		enum prologue pro = prologue_of(elf, &sym);
		*funcs += pro != PRO_OTHER;
		*fp += pro == PRO_FP;
	}
	return 0;
}

int fpcheck_path(const char *path)
{
	unsigned funcs = 0, fp = 0;
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL;
	int fd, rc = 0;
	Elf *elf;

	elf_version(EV_CURRENT);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
		return -errno;
	if (!(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)) || elf_kind(elf) != ELF_K_ELF) {
		rc = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
	}
	if (symtab)
		count_in(elf, symtab, &funcs, &fp);
	if (funcs < FPCHECK_MIN_FUNCS && dynsym) {
		funcs = fp = 0;
		count_in(elf, dynsym, &funcs, &fp);
	}
	rc = funcs >= FPCHECK_MIN_FUNCS && fp * 100 >= funcs * FPCHECK_MIN_PERCENT;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}
