/* A cache of opened symbolizers keyed by build-id: bounded in bytes (LRU eviction), filled
 * lazily on the first request for a build-id. A file is used for a build-id only if its
 * own build-id is that one, so a binary replaced on disk is never symbolized as the old
 * one; an entry already open keeps answering for its build-id after the file is gone. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/datasym.h"
#include "symbolizer/debuginfo.h"
#include "symbolizer/dwarf.h"

#define SYMCACHE_DEFAULT_BYTES ((size_t)512 << 20)  /* config key symbolizer.cache_bytes */
#define SYMCACHE_BUCKETS 1024

struct symcache;

struct symcache_opts {
	size_t max_bytes;            /* 0: SYMCACHE_DEFAULT_BYTES */
	struct debuginfo_opts debug; /* where separate debug files are looked for */
};

struct symcache_stats {
	uint64_t hits, misses, evictions, failures;
	size_t bytes, entries;
};

int symcache_new(struct symcache **out, const struct symcache_opts *o);
void symcache_free(struct symcache *c);

/* Frames for file offset off in the binary with build-id build_id (lowercase hex). On a
 * miss the binary is opened at path (any /proc path) and must have that build-id, else
 * -ESTALE; logical_path is its name in its own namespace (for debuglink lookup; NULL:
 * path). A failure is remembered per (build-id, path): the same path is not retried. */
int symcache_code(struct symcache *c, const char *build_id, const char *path,
		  const char *logical_path, uint64_t off, struct dwsym_frames *out);
/* Whether build_id's code answers came from DWARF (found and opened by symcache_code):
 * then they are fixed by the build-id, and a caller may keep them across runs. */
bool symcache_code_dwarf(struct symcache *c, const char *build_id);
/* Data symbol at link-time vaddr (tls: TLS-block offset). Strings in out stay valid until
 * the next call on c. */
int symcache_data(struct symcache *c, const char *build_id, const char *path,
		  const char *logical_path, uint64_t vaddr, bool tls, struct datasym_hit *out);
void symcache_get_stats(const struct symcache *c, struct symcache_stats *st);
