/* Reading an allocation ring while its reader is busy flushing. A flush can take
 * hundreds of ms (the first symbolization of an object: libc6-dbg's DWARF alone is
 * ~300 ms), while a program without frame pointers fills a 64 MiB ring with stack copies
 * in ~150 ms; the kernel then drops copies. During a running flush the ring is consumed
 * into memory every STASH_TICK_NS, records copied as they are, and the flush ends by
 * handling them in order: outside a flush nothing is stashed, so no other reader of the
 * ring ever sees records out of order. Bound: STASH_MAX_BYTES, then the ring waits. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STASH_MAX_BYTES (64u << 20)       /* records held while a flush runs */
#define STASH_TICK_NS (5 * 1000000ULL)    /* how often a flush reads the ring */
#define STASH_RECORD_MAX (272u << 10)      /* a ring record's largest size (a stack copy) */

struct ring_buffer;

struct stash {
	struct ring_buffer *rb;           /* the mode's ring (NULL: nothing to stash) */
	int (*handle)(void *ctx, void *data, size_t len);  /* its ring callback */
	void *ctx;
	bool on;                          /* the callback stores instead of handling */
	bool armed;                       /* within a running flush */
	unsigned char *buf;
	size_t len, cap;
	uint64_t next_ns;
	uint64_t records;                 /* stashed over the run */
};

/* Within an armed stash, every STASH_TICK_NS: consumes the ring into memory. */
void stash_tick(struct stash *s);
/* The ring callback's work while s->on: keeps the record; < 0 stops the consume. */
int stash_take(struct stash *s, const void *data, size_t len);
/* Disarms, then handles every stashed record in order through s->handle. */
void stash_replay(struct stash *s);
void stash_free(struct stash *s);
