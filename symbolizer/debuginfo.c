/* Separate debug files, in the order gdb and elfutils use. Every candidate is opened as a
 * plain regular file (no FIFOs, no devices) and checked: build-id equal to the binary's,
 * debuglink CRC equal to the recorded one; a debuglink name with a '/' is refused, so a
 * hostile binary cannot point us outside the directories we chose. */
#include "symbolizer/debuginfo.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <elfutils/debuginfod.h>

#include "symbolizer/elfsym.h"
#include "base/dynlib.h"
#include "base/cleanup.h"
#include "symbolizer/elf_cleanup.h"

#define CRC_CHUNK 65536
#define HEX_MAX (2 * ELFSYM_BUILD_ID_MAX + 1)

static int open_regular(const char *path, int *fd, uint64_t *size)
{
	struct stat st;

	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	if (fstat(*fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (size)
		*size = (uint64_t)st.st_size;
	return 0;
}

int debuginfo_file_crc(const char *path, unsigned *crc)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ unsigned char *buf = NULL;
	uLong c = crc32(0L, Z_NULL, 0);
	ssize_t k;
	int r;

	if (!path || !crc)
		return -EINVAL;
	if ((r = open_regular(path, &fd, NULL)) < 0)
		return r;
	if (!(buf = malloc(CRC_CHUNK)))
		return -ENOMEM;
	while ((k = read(fd, buf, CRC_CHUNK)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c = crc32(c, buf, (uInt)k);
	}
	*crc = (unsigned)c;
	return 0;
}

int debuginfo_read_link(const char *path, char *name, size_t namesz, unsigned *crc)
{
	_cleanup_close_ int fd = -1;
	_cleanup_elf_ Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint64_t fsize;
	int r;

	if (!path || !name || !namesz || !crc)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if ((r = open_regular(path, &fd, &fsize)) < 0)
		return r;
	if (!(elf = elf_begin(fd, ELF_C_READ, NULL)) || elf_kind(elf) != ELF_K_ELF ||
	    elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sn, *s, *nul;
		Elf_Data *d;
		size_t crc_at;
		uint32_t v;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		sn = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!sn || strcmp(sn, ".gnu_debuglink"))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) || sh.sh_offset > fsize ||
		    sh.sh_size > fsize - sh.sh_offset || sh.sh_size > DEBUGINFO_LINK_MAX + 8)
			return -EINVAL;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < 6)
			return -EINVAL;
		s = d->d_buf;
		nul = memchr(s, '\0', d->d_size);
		if (!nul || nul == s)
			return -EINVAL;
		crc_at = ((size_t)(nul - s) + 1 + 3) & ~(size_t)3;   /* name, NUL, pad to 4 */
		if (crc_at + 4 > d->d_size)
			return -EINVAL;
		if (memchr(s, '/', (size_t)(nul - s)) || !strcmp(s, ".") || !strcmp(s, ".."))
			return -EINVAL;
		if ((size_t)(nul - s) + 1 > namesz)
			return -ERANGE;
		/* The CRC word is in the file's byte order: let libelf convert it. */
		{
			Elf_Data src = { .d_buf = (char *)s + crc_at, .d_type = ELF_T_WORD,
					 .d_size = 4, .d_version = EV_CURRENT };
			Elf_Data dst = { .d_buf = &v, .d_type = ELF_T_WORD, .d_size = 4,
					 .d_version = EV_CURRENT };
			GElf_Ehdr eh;

			if (!gelf_getehdr(elf, &eh) ||
			    !gelf_xlatetom(elf, &dst, &src, eh.e_ident[EI_DATA]))
				return -EINVAL;
		}
		memcpy(name, s, (size_t)(nul - s) + 1);
		*crc = v;
		return 0;
	}
	return -ENOENT;
}

/* 1 if path is a regular file whose build-id is want (or, want being "", exists), else 0. */
static int build_id_matches(const char *path, const char *want)
{
	char got[HEX_MAX];

	if (elfsym_is_elf(path) != 1)
		return 0;
	if (!*want)
		return 1;
	return elf_build_id_of(path, got, sizeof(got)) == 0 && !strcmp(got, want);
}

static int put(char *out, size_t outsz, const char *path)
{
	if (strlen(path) + 1 > outsz)
		return -ERANGE;
	strcpy(out, path);
	return 0;
}

static int try_link(const char *cand, const char *want, unsigned crc, char *out, size_t outsz)
{
	unsigned got;

	if (!build_id_matches(cand, want))
		return -ENOENT;
	if (debuginfo_file_crc(cand, &got) < 0 || got != crc)
		return -ENOENT;
	return put(out, outsz, cand);
}

#define DEBUGINFO_LIBDEBUGINFOD "libdebuginfod.so.1"   /* opened only when DEBUGINFOD_URLS is set */

static struct {
	debuginfod_client *(*begin)(void);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*end)(debuginfod_client *);
} dfd;
static const char *const dfd_names[] = { "debuginfod_begin", "debuginfod_find_debuginfo",
					 "debuginfod_end" };
static struct dynlib dfd_lib = DYNLIB_INIT(DEBUGINFO_LIBDEBUGINFOD, dfd_names, dfd, 1);

static int try_debuginfod(const char *hex, char *out, size_t outsz)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	unsigned char raw[ELFSYM_BUILD_ID_MAX];
	size_t n = strlen(hex) / 2;
	debuginfod_client *c;
	char *path = NULL;
	int fd, r = -ENOENT;

	if (!urls || !*urls || !n || n > sizeof(raw))
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		raw[i] = (unsigned char)v;
	}
	if (dynlib_load(&dfd_lib) < 0)
		return -ENOENT;
	if (!(c = dfd.begin()))
		return -ENOMEM;
	fd = dfd.find_debuginfo(c, raw, (int)n, &path);
	if (fd >= 0) {
		close(fd);
		r = path && build_id_matches(path, hex) ? put(out, outsz, path) : -ENOENT;
	}
	free(path);
	dfd.end(c);
	return r;
}

int debuginfo_find(const struct debuginfo_opts *o, const char *open_path,
		   const char *logical_path, const char *build_id_hex, char *out, size_t outsz)
{
	const char *root = o && o->debug_root ? o->debug_root : DEBUGINFO_DEFAULT_ROOT;
	const char *sysroot = o && o->sysroot ? o->sysroot : "";
	char hex[HEX_MAX], link[DEBUGINFO_LINK_MAX + 1], cand[8192], dir[4096];
	unsigned crc;
	int r;

	if (!open_path || !out || !outsz)
		return -EINVAL;
	if (!logical_path)
		logical_path = open_path;
	if (build_id_hex && *build_id_hex) {
		if (strlen(build_id_hex) >= sizeof(hex) || strspn(build_id_hex, "0123456789abcdef") !=
		    strlen(build_id_hex))
			return -EINVAL;
		strcpy(hex, build_id_hex);
	} else if (elf_build_id_of(open_path, hex, sizeof(hex)) < 0) {
		hex[0] = '\0';
	}
	/* 1. The build-id tree. */
	if (strlen(hex) >= 4) {
		snprintf(cand, sizeof(cand), "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2);
		if (build_id_matches(cand, hex))
			return put(out, outsz, cand);
	}
	/* 2. .gnu_debuglink, in the binary's directory, its .debug/, and under the root. */
	if (debuginfo_read_link(open_path, link, sizeof(link), &crc) == 0) {
		const char *slash = strrchr(logical_path, '/');
		size_t dl = slash ? (size_t)(slash - logical_path) : 0;

		if (dl >= sizeof(dir))
			return -ENOENT;
		memcpy(dir, logical_path, dl);
		dir[dl] = '\0';
		const char *fmts[] = { "%s%s/%s", "%s%s/.debug/%s" };
		for (size_t k = 0; k < 2; k++) {
			snprintf(cand, sizeof(cand), fmts[k], sysroot, dir, link);
			if ((r = try_link(cand, hex, crc, out, outsz)) != -ENOENT)
				return r;
		}
		snprintf(cand, sizeof(cand), "%s%s/%s", root, dir, link);
		if ((r = try_link(cand, hex, crc, out, outsz)) != -ENOENT)
			return r;
	}
	/* 3. debuginfod, only when asked for and configured. */
	if (o && o->debuginfod && *hex)
		return try_debuginfod(hex, out, outsz);
	return -ENOENT;
}
