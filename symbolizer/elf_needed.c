/* DT_NEEDED prefixes of a binary (elf_needed.h). Invariant: reads only the dynamic
 * section's entries (at most ELF_NEEDED_MAX) and strings libelf bounds-checks. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>
#include <libelf.h>
#include "symbolizer/elf_needed.h"

static void match(const char *name, const char *const *prefixes, size_t n, uint32_t *mask)
{
	for (size_t i = 0; i < n; i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			*mask |= 1u << i;
}

static int scan(Elf *e, const char *const *prefixes, size_t n, uint32_t *mask)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			return -EINVAL;
		size_t cnt = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < cnt && i < ELF_NEEDED_MAX; i++) {
			GElf_Dyn dyn;
			if (!gelf_getdyn(d, (int)i, &dyn))
				return -EINVAL;
			if (dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (name)
				match(name, prefixes, n, mask);
		}
		return 0;
	}
	return 0;   /* no dynamic section: static */
}

int elf_needs(const char *path, const char *const *prefixes, size_t n, uint32_t *mask)
{
	int fd, err;
	Elf *e;

	*mask = 0;
	if (n > 32)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ, NULL)   /* no mapping: a truncated file cannot fault us */;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(fd);
		return -ENOEXEC;
	}
	err = scan(e, prefixes, n, mask);
	elf_end(e);
	close(fd);
	return err;
}
