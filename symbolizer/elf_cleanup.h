/* Symbolizer-internal: an Elf handle ended when its variable goes out of scope, and the
 * one way a regular file is opened as an Elf for reading (never a FIFO or device). */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <libelf.h>
#include "base/cleanup.h"

static inline void elf_endp(Elf **e) { if (*e) elf_end(*e); }
#define _cleanup_elf_ _cleanup_(elf_endp)

/* path, a non-empty regular file, open read-only in *fd (the caller closes it) and as an
 * Elf in *elf (the caller ends it), its size in *size. 0 or -errno; on error nothing the
 * caller must release beyond what *fd and *elf hold (-1 and NULL until opened). */
static inline int elf_open_regular(const char *path, int *fd, Elf **elf, uint64_t *size)
{
	struct stat st;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
		return -errno;
	if (fstat(*fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -EINVAL;
	if (!(*elf = elf_begin(*fd, ELF_C_READ, NULL)))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}
