/* Growable arrays: room for one more element, by doubling (amortised O(1) appends), from
 * a first capacity the caller names. The array, its length and its capacity stay the
 * caller's own fields; on failure nothing changes. */
#pragma once
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes *v (n elements of size bytes, room for *cap) hold at least n + 1: 0 or -ENOMEM. */
static inline int array_grow(void **v, size_t *cap, size_t n, size_t size, size_t min)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : min;
	if (nc <= n || nc > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*v, nc * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}

/* ARRAY_GROW(s->v, s->cap, s->n, 64): v a typed pointer, cap a size_t. */
#define ARRAY_GROW(v, cap, n, min) \
	array_grow((void **)&(v), &(cap), (n), sizeof(*(v)), (min))
