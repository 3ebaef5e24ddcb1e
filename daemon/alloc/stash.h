/* Reading an allocation ring while its reader is busy flushing. A flush can take
 * hundreds of ms (the first symbolization of an object: libc6-dbg's DWARF alone is
 * ~300 ms), while a program without frame pointers fills a 64 MiB ring with stack copies
 * in ~150 ms; the kernel then drops copies. During a running flush the ring is consumed
 * into memory every STASH_TICK_NS, records copied as they are, and the flush ends by
 * handling them in order: outside a flush nothing is stashed, so no other reader of the
 * ring ever sees records out of order. Bound: STASH_MAX_BYTES, then the ring waits.
 * One tick copies at most STASH_TICK_BYTES (and one record more): a ring read while its
 * producer keeps it from running empty would otherwise copy until the stash is full, and
 * the flush whose commit it interrupts would wait for it (a first flush beside a python
 * allocating ~50k stack copies a second spent 0.7 s copying 24 MiB, under ASan on a busy
 * host: fresh pages cost ~12 us each under this hypervisor). The next tick comes
 * STASH_TICK_NS after one ends, so the flush's own work goes on in between: 4 MiB per
 * 5 ms and the copy's time (~1 ms, ~12 ms where every page is a fresh one here), 240-670
 * MB/s against the ~430 MB/s a program without frame pointers writes; the ring holds what
 * a tick leaves, for the next. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STASH_MAX_BYTES (64u << 20)       /* records held while a flush runs */
#define STASH_TICK_NS (5 * 1000000ULL)    /* how often a flush reads the ring */
#define STASH_RECORD_MAX (272u << 10)      /* a ring record's largest size (a stack copy) */
#define STASH_TICK_BYTES (4u << 20)       /* copied by one tick, then the ring waits */

struct ring_buffer;

struct stash {
	struct ring_buffer *rb;           /* the mode's ring (NULL: nothing to stash) */
	int (*handle)(void *ctx, void *data, size_t len);  /* its ring callback */
	void *ctx;
	bool on;                          /* the callback stores instead of handling */
	bool armed;                       /* within a running flush */
	unsigned char *buf;
	size_t len, cap;
	size_t tick_left;                 /* bytes this tick may still copy */
	uint64_t next_ns;
	uint64_t records;                 /* stashed over the run */
};

/* Within an armed stash, every STASH_TICK_NS: consumes the ring into memory, at most
 * STASH_TICK_BYTES of it (then one record more). */
void stash_tick(struct stash *s);
/* The ring callback's work while s->on: keeps the record; < 0 stops the consume (the
 * record is kept all the same: libbpf has moved past it). */
int stash_take(struct stash *s, const void *data, size_t len);
/* Disarms, then handles every stashed record in order through s->handle. */
void stash_replay(struct stash *s);
void stash_free(struct stash *s);
