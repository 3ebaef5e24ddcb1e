/* Interning of strings and allocation-context stacks, in one arena, plus the small
 * open-addressing hash map the daemon's tables are built on. Invariant: an interned
 * object's address is its identity (pointer equality == content equality) and lives
 * until interner_free(). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/arena.h"
#include "store/store.h"

/* hmap: 64-bit hash -> pointer, linear probing, grows at 3/4 load. Entries with equal
 * hashes are told apart by the caller's eq callback, so hashes need not be unique. */
struct hmap {
	uint64_t *hashes;       /* 0 = empty slot (hashes are forced non-zero) */
	void **vals;
	size_t cap, n;
};
typedef bool (*hmap_eq)(const void *val, const void *key);
void *hmap_find(const struct hmap *h, uint64_t hash, hmap_eq eq, const void *key);
int hmap_insert(struct hmap *h, uint64_t hash, void *val);     /* 0 or -ENOMEM */
/* Removes the entry whose value is val (pointer identity). */
void hmap_remove(struct hmap *h, uint64_t hash, const void *val);
void hmap_free(struct hmap *h);
#define hmap_foreach(h, i) for (size_t i = 0; i < (h)->cap; i++) if ((h)->hashes[i])

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
	return x;
}

/* The slot of a BPF stack key in a process's stacks map: frame-pointer keys are hashes
 * already; an allocation's own key (bpf/alloc.h ALLOC_USTACK_KEY, a sequence number in
 * its middle bits) is mixed, bijectively, so that linear probing spreads them. */
#define STACK_KEY_OWN (1ULL << 63)
static inline uint64_t stack_slot(uint64_t key)
{
	return key & STACK_KEY_OWN ? hash_u64(key) : key;
}

/* One frame of a context: a return address as (build-id, file offset). An empty
 * build_id means unresolvable; offset is then the absolute address. */
struct iframe {
	const char *build_id;   /* interned lowercase hex */
	uint64_t offset;
};

struct istack {
	uint64_t hash;          /* stable across processes and runs: the store's stack_hash */
	unsigned nframes;
	bool truncated;         /* the walk stopped before the outermost frame */
	bool symbolized;        /* function[]/mangled[] filled (NULL where unknown) */
	bool sym_queued;        /* stored bare, awaiting recorder_symbolize */
	const char **function;  /* per frame, demangled, NULL until symbolized */
	const char **mangled;
	const struct store_line **lines;  /* per frame, its DWARF inline chain (NULL if none) */
	unsigned *nlines;
	struct iframe frames[];
};

struct interner {
	struct arena arena;
	struct hmap strs;
	struct hmap stacks;
	struct hmap syms;       /* (build-id, offset) -> struct isym: names found once */
};

/* What symbolization found for one frame, shared by every context holding it (so each
 * (object, return address) is looked up once per run, not once per context). */
struct isym {
	const char *build_id;   /* interned: compared by pointer */
	uint64_t offset;
	const char *function, *mangled;
	const struct store_line *lines;
	unsigned nlines;
};

const char *intern_str(struct interner *in, const char *s);            /* NULL on ENOMEM */
const char *intern_strn(struct interner *in, const char *s, size_t n);
struct istack *intern_stack(struct interner *in, const struct iframe *f, unsigned n);
/* The same, for a stack whose walk stopped before its outermost frame when truncated. */
struct istack *intern_stack_cut(struct interner *in, const struct iframe *f, unsigned n,
				bool truncated);
/* The frame's symbols found earlier, or NULL. */
const struct isym *intern_sym_find(const struct interner *in, const struct iframe *f);
/* Keeps what was found for f (strings interned, lines in the arena); -ENOMEM. */
int intern_sym_add(struct interner *in, const struct iframe *f, const char *function,
		   const char *mangled, const struct store_line *lines, unsigned nlines);
void interner_free(struct interner *in);
