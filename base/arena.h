/* Bump arena (the daemon's interned frames, stacks and strings; store/query.c's frame
 * cache): memory lives until arena_free(). The fast path follows LLVM's BumpPtrAllocator
 * after its 2026 changes: sizes are rounded to ARENA_MIN_ALIGN so the pointer stays
 * aligned without re-aligning, `end_sentinel` is one past the slab end (0 for an empty
 * arena) so a single unsigned compare covers both "fits" and "no slab yet", and nothing
 * is counted per allocation. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ARENA_MIN_ALIGN 8u
#define ARENA_SLAB_BYTES (64u * 1024)     /* first slab; later slabs double up to ... */
#define ARENA_SLAB_MAX_BYTES (4u << 20)   /* ... this; larger requests get their own slab */
#define ARENA_MAX_ALLOC ((size_t)1 << 40) /* requests above this fail (keeps the math in range) */

struct arena_slab;

struct arena {
	uintptr_t cur;          /* next free byte, ARENA_MIN_ALIGN aligned */
	uintptr_t end_sentinel; /* slab end + 1; 0 when there is no slab */
	struct arena_slab *slabs;
	size_t next_slab;       /* size of the next regular slab */
	size_t total;           /* bytes in all slabs (capacity, not bytes requested) */
};

void *arena_alloc_slow(struct arena *a, size_t size, size_t align);

/* Returns ARENA_MIN_ALIGN-aligned memory, NULL only if the system is out of memory.
 * Precondition: size <= ARENA_MAX_ALLOC (the fast path does not check it, so that one
 * compare decides); sizes derived from untrusted input go through arena_alloc_checked(). */
static inline __attribute__((always_inline)) void *arena_alloc(struct arena *a, size_t size)
{
	uintptr_t sz = (size + (ARENA_MIN_ALIGN - 1)) & ~(uintptr_t)(ARENA_MIN_ALIGN - 1);
	uintptr_t p = a->cur;
	uintptr_t e = p + sz;

	/* sz <= 2^40 and user addresses < 2^47, so e cannot wrap. */
	if (__builtin_expect(e < a->end_sentinel, 1)) {
		a->cur = e;
		return (void *)p;
	}
	return arena_alloc_slow(a, size, ARENA_MIN_ALIGN);
}

static inline void *arena_alloc_checked(struct arena *a, size_t size)
{
	return size <= ARENA_MAX_ALLOC ? arena_alloc(a, size) : NULL;
}

/* For alignments above ARENA_MIN_ALIGN (rare: kept off the fast path). */
void *arena_alloc_aligned(struct arena *a, size_t size, size_t align);
char *arena_strdup(struct arena *a, const char *s);
void *arena_memdup(struct arena *a, const void *p, size_t n);
/* Capacity of all slabs: the arena's memory cost. */
static inline size_t arena_total(const struct arena *a) { return a->total; }
void arena_free(struct arena *a);
