/* realloc as malloc + copy + free, preloaded into a program run under valgrind DHAT by
 * bench/access_dhat_cmd.py: DHAT keeps a realloc'ed block (grown or shrunk) under the
 * stack of its first allocation, while MemProf and memprofd give every realloc's result
 * the realloc's own context; with this shim DHAT sees the same objects. valgrind must be
 * told not to replace this realloc (--soname-synonyms=somalloc=<no such library>).
 * Costs one copy per realloc, which DHAT counts as reads of the old block and writes of
 * the new one, as it counts its own realloc's copy. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

void *realloc(void *old, size_t n)
{
	void *p;
	size_t have;

	if (!old)
		return malloc(n);
	if (!n) {
		free(old);
		return NULL;
	}
	p = malloc(n);
	if (!p)
		return NULL;
	have = malloc_usable_size(old);
	memcpy(p, old, have < n ? have : n);
	free(old);
	return p;
}
