/* Names across runs (issue 18): the ELF symbol, DWARF lines and inline chain record found
 * for a return address, kept per build-id in a file under $XDG_CACHE_HOME/memprofd/names
 * (else ~/.cache/...), so a short recording's final flush does not inflate libc6-dbg's sections
 * (~260M instructions) again. A build-id fixes the binary and its debug file, so what
 * DWARF said (a chain, or nothing at that address) never changes; an answer without
 * DWARF (an ELF name only) is not kept: a debug package installed later would improve it.
 * Files are hostile input: ours only (owner, regular, no symlink), at most NC_FILE_MAX
 * bytes, every length and count checked, a CRC over the payload; a damaged file is
 * ignored whole and replaced at the next save; the directory keeps NC_DIR_FILES_MAX
 * files. Costs: one read per build-id looked up, a binary search per frame, one rewrite
 * per build-id that gained entries. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define NC_DIR_ENV "XDG_CACHE_HOME"
#define NC_SUBDIR "memprofd/names"
#define NC_FILE_MAX (8u << 20)         /* bytes of one build-id's file */
#define NC_ENTRIES_MAX (1u << 17)      /* return addresses kept per build-id */
#define NC_STR_MAX 4096                /* bytes of one name or file path */
#define NC_FILES_MAX 256               /* build-ids one run keeps in memory */
#define NC_DIR_FILES_MAX 512           /* files kept in the directory (oldest written go) */

struct namecache;
struct store_line;

/* What record found for one return address: the ELF symbol (bin_function) and DWARF's
 * chain of lines (n may be 0: DWARF has none there). */
struct nc_names {
	const char *function, *mangled;   /* NULL: no ELF symbol */
	const struct store_line *v;
	unsigned n;
};

struct namecache_stats {
	uint64_t hits, misses, files_read, files_bad, files_written;
};

/* A cache over dir (NULL: the default above); -ENOENT where no directory can be named
 * (no XDG_CACHE_HOME or HOME), -ENOMEM. Nothing is read before the first lookup. */
int namecache_new(struct namecache **out, const char *dir);
void namecache_free(struct namecache *c);
/* The names cached for (build_id, off): 1 with *out set (valid until namecache_free),
 * 0 not cached. */
int namecache_get(struct namecache *c, const char *build_id, uint64_t off,
		  struct nc_names *out);
/* Remembers what was found where DWARF answered; the strings must live until the next
 * namecache_save or namecache_free. 0, or -errno. */
int namecache_put(struct namecache *c, const char *build_id, uint64_t off,
		  const struct nc_names *names);
/* Whether build_id's file holds any entry (read it if not yet). */
bool namecache_has(struct namecache *c, const char *build_id);
/* Writes every build-id that gained entries (temporary file, then rename): 0 or -errno. */
int namecache_save(struct namecache *c);
void namecache_get_stats(const struct namecache *c, struct namecache_stats *st);
