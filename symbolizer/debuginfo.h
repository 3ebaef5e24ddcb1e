/* Finding the separate debug file of a stripped binary: /usr/lib/debug/.build-id/xx/rest.debug,
 * then .gnu_debuglink (CRC-checked) next to the binary, in its .debug/ and under the debug
 * root, then debuginfod (libdebuginfod) only when asked AND DEBUGINFOD_URLS is set. A
 * candidate is used only if its build-id is the binary's (when the binary has one). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define DEBUGINFO_DEFAULT_ROOT "/usr/lib/debug"
#define DEBUGINFO_LINK_MAX 1024   /* longer .gnu_debuglink names are ignored */

struct debuginfo_opts {
	const char *debug_root;   /* NULL: DEBUGINFO_DEFAULT_ROOT (tests point it at a temp dir) */
	const char *sysroot;      /* NULL/"": none; "/proc/PID/root" for a container's files */
	bool debuginfod;          /* also ask debuginfod (still only if DEBUGINFOD_URLS is set) */
};

/* Path of the debug file for the binary opened at open_path, whose name in its own mount
 * namespace is logical_path (NULL: open_path; used for the debuglink directories), with
 * build-id build_id_hex (NULL or "": read it from open_path). 0 and out filled, -ENOENT
 * if none is found, -ERANGE if out is too small, other -errno on failure. */
int debuginfo_find(const struct debuginfo_opts *o, const char *open_path,
		   const char *logical_path, const char *build_id_hex, char *out, size_t outsz);
/* The .gnu_debuglink of a binary: its file name and CRC; -ENOENT if there is none. */
int debuginfo_read_link(const char *path, char *name, size_t namesz, unsigned *crc);
/* CRC-32 (the debuglink's: zlib's crc32) of a whole file. */
int debuginfo_file_crc(const char *path, unsigned *crc);
