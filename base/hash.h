/* FNV-1a, 64-bit: a byte-at-a-time hash of short keys (build-ids, paths, natural keys).
 * Cheap and good enough for hash tables whose callers mix the result where the low bits
 * pick the bucket; not for anything an attacker could exploit beyond a slow bucket. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define FNV1A_OFFSET 0xcbf29ce484222325ULL
#define FNV1A_PRIME 0x100000001b3ULL

/* Continues the hash h over n bytes of p (start with FNV1A_OFFSET). */
static inline uint64_t fnv1a_from(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * FNV1A_PRIME;
	return h;
}

static inline uint64_t fnv1a(const void *p, size_t n)
{
	return fnv1a_from(FNV1A_OFFSET, p, n);
}
