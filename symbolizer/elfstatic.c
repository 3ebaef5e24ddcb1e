/* Static-executable detection from the program headers alone (a PT_INTERP entry names
 * the dynamic loader); the file is the user's command, opened read-only, never executed.
 * Cost: one open and one header read. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <gelf.h>
#include "base/cleanup.h"
#include "symbolizer/elfstatic.h"

int elfstatic_path(const char *path)
{
	size_t n;
	int rc = 1;
	Elf *elf;

	elf_version(EV_CURRENT);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (!(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)))
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &n)) {
		elf_end(elf);
		return -ENOEXEC;
	}
	for (size_t i = 0; i < n && rc; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			rc = 0;
	}
	elf_end(elf);
	return rc;
}
