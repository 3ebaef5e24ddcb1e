/* String and stack interning over the bump arena, and the hash map under every daemon
 * table. Stacks are compared frame by frame on hash equality, so a 64-bit hash
 * collision never merges two contexts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/alloc/intern.h"
#include "base/hash.h"

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	return hash_u64(fnv1a_from(FNV1A_OFFSET ^ seed, p, n));
}

static uint64_t fix_hash(uint64_t h)
{
	return h ? h : 1;
}

void *hmap_find(const struct hmap *h, uint64_t hash, hmap_eq eq, const void *key)
{
	if (!h->cap)
		return NULL;
	hash = fix_hash(hash);
	for (size_t i = hash & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
		if (!h->hashes[i])
			return NULL;
		if (h->hashes[i] == hash && (!eq || eq(h->vals[i], key)))
			return h->vals[i];
	}
}

static void put_slot(uint64_t *hs, void **vs, size_t cap, uint64_t hash, void *val)
{
	size_t i = hash & (cap - 1);

	while (hs[i])
		i = (i + 1) & (cap - 1);
	hs[i] = hash;
	vs[i] = val;
}

static int grow(struct hmap *h)
{
	size_t cap = h->cap ? h->cap * 2 : 64;
	uint64_t *hs = calloc(cap, sizeof(*hs));
	void **vs = calloc(cap, sizeof(*vs));

	if (!hs || !vs) {
		free(hs);
		free(vs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < h->cap; i++)
		if (h->hashes[i])
			put_slot(hs, vs, cap, h->hashes[i], h->vals[i]);
	free(h->hashes);
	free(h->vals);
	h->hashes = hs;
	h->vals = vs;
	h->cap = cap;
	return 0;
}

int hmap_insert(struct hmap *h, uint64_t hash, void *val)
{
	if ((h->n + 1) * 4 > h->cap * 3) {
		int r = grow(h);
		if (r)
			return r;
	}
	put_slot(h->hashes, h->vals, h->cap, fix_hash(hash), val);
	h->n++;
	return 0;
}

void hmap_remove(struct hmap *h, uint64_t hash, const void *val)
{
	if (!h->cap)
		return;
	hash = fix_hash(hash);
	size_t i = hash & (h->cap - 1);
	while (h->hashes[i] && !(h->hashes[i] == hash && h->vals[i] == val))
		i = (i + 1) & (h->cap - 1);
	if (!h->hashes[i])
		return;
	h->hashes[i] = 0;
	h->n--;
	/* Re-insert the rest of the probe run so lookups never stop early. */
	for (size_t j = (i + 1) & (h->cap - 1); h->hashes[j]; j = (j + 1) & (h->cap - 1)) {
		uint64_t hh = h->hashes[j];
		void *v = h->vals[j];
		h->hashes[j] = 0;
		put_slot(h->hashes, h->vals, h->cap, hh, v);
	}
}

void hmap_free(struct hmap *h)
{
	free(h->hashes);
	free(h->vals);
	*h = (struct hmap){ 0 };
}

struct strkey { const char *s; size_t n; };

static bool str_eq(const void *val, const void *key)
{
	const struct strkey *k = key;
	const char *v = val;

	return strncmp(v, k->s, k->n) == 0 && v[k->n] == '\0';
}

const char *intern_strn(struct interner *in, const char *s, size_t n)
{
	struct strkey k = { s, n };
	uint64_t h = hash_bytes(s, n, 0);
	char *v = hmap_find(&in->strs, h, str_eq, &k);

	if (v)
		return v;
	v = arena_alloc_checked(&in->arena, n + 1);
	if (!v)
		return NULL;
	memcpy(v, s, n);
	v[n] = '\0';
	if (hmap_insert(&in->strs, h, v))
		return NULL;
	return v;
}

const char *intern_str(struct interner *in, const char *s)
{
	return intern_strn(in, s, strlen(s));
}

struct stackkey { const struct iframe *f; unsigned n; bool truncated; };

static bool stack_eq(const void *val, const void *key)
{
	const struct istack *s = val;
	const struct stackkey *k = key;

	if (s->nframes != k->n || s->truncated != k->truncated)
		return false;
	for (unsigned i = 0; i < k->n; i++)
		if (s->frames[i].offset != k->f[i].offset || s->frames[i].build_id != k->f[i].build_id)
			return false;
	return true;
}

/* The hash covers build-id text and offsets, not pointers, so it is stable across runs. */
static uint64_t stack_hash(const struct iframe *f, unsigned n, bool truncated)
{
	uint64_t h = 0x6d656d70726f66ULL;

	for (unsigned i = 0; i < n; i++) {
		h = hash_bytes(f[i].build_id, strlen(f[i].build_id), h);
		h = hash_bytes(&f[i].offset, sizeof(f[i].offset), h);
	}
	if (truncated)   /* a cut stack is a context of its own, not its prefix's */
		h = hash_u64(h ^ 0x7472756e63ULL);
	return fix_hash(hash_u64(h ^ n));
}

struct istack *intern_stack(struct interner *in, const struct iframe *f, unsigned n)
{
	return intern_stack_cut(in, f, n, false);
}

struct istack *intern_stack_cut(struct interner *in, const struct iframe *f, unsigned n,
				bool truncated)
{
	struct stackkey k = { f, n, truncated };
	uint64_t h = stack_hash(f, n, truncated);
	struct istack *s = hmap_find(&in->stacks, h, stack_eq, &k);

	if (s)
		return s;
	s = arena_alloc(&in->arena, sizeof(*s) + n * sizeof(s->frames[0]));
	if (!s)
		return NULL;
	s->function = arena_alloc(&in->arena, (n ? n : 1) * sizeof(char *));
	s->mangled = arena_alloc(&in->arena, (n ? n : 1) * sizeof(char *));
	s->lines = arena_alloc(&in->arena, (n ? n : 1) * sizeof(*s->lines));
	s->nlines = arena_alloc(&in->arena, (n ? n : 1) * sizeof(*s->nlines));
	if (!s->function || !s->mangled || !s->lines || !s->nlines)
		return NULL;
	s->hash = h;
	s->nframes = n;
	s->truncated = truncated;
	s->symbolized = false;
	s->sym_queued = false;
	for (unsigned i = 0; i < n; i++) {
		s->frames[i] = f[i];
		s->function[i] = s->mangled[i] = NULL;
		s->lines[i] = NULL;
		s->nlines[i] = 0;
	}
	if (hmap_insert(&in->stacks, h, s))
		return NULL;
	return s;
}

static uint64_t sym_hash(const struct iframe *f)
{
	return fix_hash(hash_u64((uint64_t)(uintptr_t)f->build_id ^ hash_u64(f->offset)));
}

static bool sym_eq(const void *val, const void *key)
{
	const struct isym *s = val;
	const struct iframe *f = key;

	return s->build_id == f->build_id && s->offset == f->offset;
}

const struct isym *intern_sym_find(const struct interner *in, const struct iframe *f)
{
	return hmap_find(&in->syms, sym_hash(f), sym_eq, f);
}

int intern_sym_add(struct interner *in, const struct iframe *f, const char *function,
		   const char *mangled, const struct store_line *lines, unsigned nlines)
{
	struct isym *s = arena_alloc(&in->arena, sizeof(*s));

	if (!s)
		return -ENOMEM;
	*s = (struct isym){ f->build_id, f->offset, function, mangled, lines, nlines };
	return hmap_insert(&in->syms, sym_hash(f), s);
}

void interner_free(struct interner *in)
{
	hmap_free(&in->syms);
	hmap_free(&in->strs);
	hmap_free(&in->stacks);
	arena_free(&in->arena);
}
