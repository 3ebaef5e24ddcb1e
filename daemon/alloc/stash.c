/* Ring records kept in memory during a flush (see stash.h). Layout of buf: records one
 * after another, each a size_t length then its bytes, padded to 8. Cost: one memcpy per
 * record stashed, one clock read per tick. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "base/clock.h"
#include "daemon/alloc/stash.h"
#include "bpf/alloc.h"

_Static_assert(sizeof(struct ev_ustack) <= STASH_RECORD_MAX, "the largest ring record fits");

#define STASH_ALIGN 8

static size_t rec_size(size_t len)
{
	return sizeof(size_t) + ((len + STASH_ALIGN - 1) & ~(size_t)(STASH_ALIGN - 1));
}

/* Room for the largest record, growing buf up to STASH_MAX_BYTES. */
static bool room(struct stash *s)
{
	size_t need = s->len + rec_size(STASH_RECORD_MAX);

	if (need <= s->cap)
		return true;
	if (need > STASH_MAX_BYTES)
		return false;
	size_t cap = s->cap ? s->cap : (1u << 20);
	while (cap < need)
		cap *= 2;
	if (cap > STASH_MAX_BYTES)
		cap = STASH_MAX_BYTES;
	unsigned char *b = realloc(s->buf, cap);
	if (!b)
		return false;
	s->buf = b;
	s->cap = cap;
	return true;
}

void stash_tick(struct stash *s)
{
	uint64_t now;

	if (!s->armed || !s->rb || (now = mono_ns()) < s->next_ns)
		return;
	s->next_ns = now + STASH_TICK_NS;
	if (!room(s))
		return;   /* full: the ring holds the rest, as without a stash */
	s->on = true;
	s->tick_left = STASH_TICK_BYTES;
	ring_buffer__consume(s->rb);
	s->on = false;
	s->next_ns = mono_ns() + STASH_TICK_NS;   /* the flush's own work in between */
}

int stash_take(struct stash *s, const void *data, size_t len)
{
	if (len > STASH_RECORD_MAX || s->len + rec_size(len) > s->cap)
		return -ENOSPC;   /* cannot happen (room() before each consume): dropped */
	memcpy(s->buf + s->len, &len, sizeof(len));
	memcpy(s->buf + s->len + sizeof(len), data, len);
	s->len += rec_size(len);
	s->records++;
	s->tick_left = s->tick_left > rec_size(len) ? s->tick_left - rec_size(len) : 0;
	if (!s->tick_left)
		return -EAGAIN;   /* this tick's share: libbpf stops after this record */
	return room(s) ? 0 : -ENOSPC;
}

void stash_replay(struct stash *s)
{
	size_t off = 0, len;

	s->armed = false;
	while (off < s->len) {
		memcpy(&len, s->buf + off, sizeof(len));
		s->handle(s->ctx, s->buf + off + sizeof(len), len);
		off += rec_size(len);
	}
	s->len = 0;
	if (s->cap > (4u << 20)) {   /* a burst's buffer is not kept for the whole run */
		free(s->buf);
		s->buf = NULL;
		s->cap = 0;
	}
}

void stash_free(struct stash *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}
