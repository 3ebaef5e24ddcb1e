/* Slow paths of the bump arena: new slabs, over-aligned and oversized requests.
 * Invariant: cur <= end_sentinel - 1 whenever a slab exists; slabs are freed only
 * all at once by arena_free(). */
#include <stdlib.h>
#include <string.h>
#include "base/arena.h"

struct arena_slab {
	struct arena_slab *next;
	size_t size;
	/* data follows, aligned to 64 */
};

#define SLAB_HDR 64u

static uintptr_t align_up(uintptr_t v, size_t a)
{
	return (v + (a - 1)) & ~(uintptr_t)(a - 1);
}

void *arena_alloc_aligned(struct arena *a, size_t size, size_t align)
{
	if (size > ARENA_MAX_ALLOC || !align || (align & (align - 1)) || align > SLAB_HDR * 64)
		return NULL;
	if (align <= ARENA_MIN_ALIGN)
		return arena_alloc(a, size);
	uintptr_t sz = align_up(size, ARENA_MIN_ALIGN);
	if (a->end_sentinel) {
		uintptr_t p = align_up(a->cur, align);
		if (p + sz < a->end_sentinel) {
			a->cur = p + sz;
			return (void *)p;
		}
	}
	return arena_alloc_slow(a, size, align);
}

void *arena_alloc_slow(struct arena *a, size_t size, size_t align)
{
	if (size > ARENA_MAX_ALLOC)
		return NULL;
	uintptr_t sz = align_up(size, ARENA_MIN_ALIGN);
	size_t need = sz + align;                /* room to align inside the slab */
	size_t slab = a->next_slab ? a->next_slab : ARENA_SLAB_BYTES;
	int dedicated = need > slab / 2;         /* big requests don't waste a regular slab */

	if (dedicated)
		slab = need;
	struct arena_slab *s = aligned_alloc(SLAB_HDR, align_up(SLAB_HDR + slab, SLAB_HDR));
	if (!s)
		return NULL;
	s->size = slab;
	s->next = a->slabs;
	a->slabs = s;
	a->total += slab;

	uintptr_t base = (uintptr_t)s + SLAB_HDR;
	uintptr_t p = align_up(base, align);
	if (dedicated)
		return (void *)p;                /* keep bumping in the current slab */
	a->cur = p + sz;
	a->end_sentinel = base + slab + 1;
	if (slab < ARENA_SLAB_MAX_BYTES)
		a->next_slab = slab * 2;
	else
		a->next_slab = slab;
	return (void *)p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_memdup(a, s, strlen(s) + 1);
}

void *arena_memdup(struct arena *a, const void *p, size_t n)
{
	void *d = arena_alloc_checked(a, n);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

void arena_free(struct arena *a)
{
	struct arena_slab *s = a->slabs;

	while (s) {
		struct arena_slab *n = s->next;
		free(s);
		s = n;
	}
	*a = (struct arena){ 0 };
}
