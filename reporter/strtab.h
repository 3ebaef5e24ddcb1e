/* Interning table: byte strings -> dense indices in insertion order (pprof's string,
 * function, location and mapping tables; the HTML report's name table). Keys are copied
 * and NUL-terminated, so strtab_key() can go straight into a string table. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct strtab {
	struct strtab_slot *slots;
	size_t cap;               /* power of two */
	char **keys;              /* by index */
	size_t *lens;
	size_t n, keys_cap;
};

/* *idx = the index of key (len bytes); returns 1 if it was added, 0 if it was there,
 * -ENOMEM. */
int strtab_intern(struct strtab *t, const void *key, size_t len, size_t *idx);
static inline const char *strtab_key(const struct strtab *t, size_t idx) { return t->keys[idx]; }
void strtab_free(struct strtab *t);
