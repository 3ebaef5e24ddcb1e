/* Interning table (see strtab.h): open addressing with linear probing, load <= 1/2,
 * FNV-1a hashes kept in the slots so growing never rehashes the keys. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reporter/strtab.h"
#include "base/hash.h"

#define STRTAB_MIN_CAP 64

struct strtab_slot {
	uint64_t hash;
	size_t idx_plus1;         /* 0: empty */
};

static int grow(struct strtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : STRTAB_MIN_CAP;
	struct strtab_slot *s = calloc(cap, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->slots[i].idx_plus1)
			continue;

		size_t j = t->slots[i].hash & (cap - 1);

		while (s[j].idx_plus1)
			j = (j + 1) & (cap - 1);
		s[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = s;
	t->cap = cap;
	return 0;
}

int strtab_intern(struct strtab *t, const void *key, size_t len, size_t *idx)
{
	uint64_t h = fnv1a(key, len);

	if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
		return -ENOMEM;

	size_t j = h & (t->cap - 1);

	for (; t->slots[j].idx_plus1; j = (j + 1) & (t->cap - 1)) {
		size_t k = t->slots[j].idx_plus1 - 1;

		if (t->slots[j].hash == h && t->lens[k] == len && !memcmp(t->keys[k], key, len)) {
			*idx = k;
			return 0;
		}
	}
	if (t->n == t->keys_cap) {
		size_t cap = t->keys_cap ? t->keys_cap * 2 : STRTAB_MIN_CAP;
		char **keys = realloc(t->keys, cap * sizeof(*keys));

		if (!keys)
			return -ENOMEM;
		t->keys = keys;

		size_t *lens = realloc(t->lens, cap * sizeof(*lens));

		if (!lens)
			return -ENOMEM;
		t->lens = lens;
		t->keys_cap = cap;
	}

	char *copy = malloc(len + 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, key, len);
	copy[len] = '\0';
	t->keys[t->n] = copy;
	t->lens[t->n] = len;
	t->slots[j] = (struct strtab_slot){ .hash = h, .idx_plus1 = t->n + 1 };
	*idx = t->n++;
	return 1;
}

void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->lens);
	free(t->slots);
	*t = (struct strtab){0};
}
