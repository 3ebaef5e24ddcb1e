/* perf data ring + AUX area reader (see perf_aux.h for why it is not libperf). Heads are
 * loaded with acquire and tails stored with release, the pairing the kernel's
 * perf_output_put_handle() and perf_aux_output_end() expect. Positions are free-running
 * u64 counters; a buffer offset is position & (size - 1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "daemon/perf/perf_aux.h"

static bool pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int perf_ring_init(struct perf_ring *r, void *page, uint64_t data_size, void *aux,
		   uint64_t aux_size)
{
	long psz = sysconf(_SC_PAGESIZE);

	memset(r, 0, sizeof(*r));
	if (!page || !pow2(data_size) || (aux && !pow2(aux_size)))
		return -EINVAL;
	r->pg = page;
	r->data = (uint8_t *)page + (r->pg->data_offset ? r->pg->data_offset : (uint64_t)psz);
	r->data_size = data_size;
	r->aux = aux;
	r->aux_size = aux ? aux_size : 0;
	r->scratch_size = PERF_RING_RECORD_MAX > r->aux_size ? PERF_RING_RECORD_MAX : r->aux_size;
	r->scratch = malloc(r->scratch_size);
	if (!r->scratch)
		return -ENOMEM;
	/* Resume where a previous reader of this ring stopped. */
	r->aux_pos = r->aux_seen_head = aux ? __atomic_load_n(&r->pg->aux_tail, __ATOMIC_RELAXED) : 0;
	return 0;
}

int perf_ring_mmap(struct perf_ring *r, int fd, size_t data_pages, size_t aux_pages)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (1 + data_pages) * psz, alen = aux_pages * psz;
	struct perf_event_mmap_page *pg;
	void *base, *aux = NULL;
	int err;

	memset(r, 0, sizeof(*r));
	if (!pow2(data_pages) || (aux_pages && !pow2(aux_pages)))
		return -EINVAL;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	pg = base;
	if (aux_pages) {
		/* The AUX area is announced in the page, then mapped at that offset;
		 * PROT_WRITE selects the mode where aux_tail holds the writer back. */
		pg->aux_offset = len;
		pg->aux_size = alen;
		aux = mmap(NULL, alen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)len);
		if (aux == MAP_FAILED) {
			err = -errno;
			munmap(base, len);
			return err;
		}
	}
	if ((err = perf_ring_init(r, base, data_pages * psz, aux, alen)) < 0) {
		if (aux)
			munmap(aux, alen);
		munmap(base, len);
		return err;
	}
	r->map_len = len;
	r->aux_map_len = aux ? alen : 0;
	return 0;
}

void perf_ring_free(struct perf_ring *r)
{
	if (r->aux_map_len)
		munmap(r->aux, r->aux_map_len);
	if (r->map_len)
		munmap(r->pg, r->map_len);
	free(r->scratch);
	memset(r, 0, sizeof(*r));
}

/* n bytes of a ring of size (power of two) from position pos into dst. */
static void ring_copy(uint8_t *dst, const uint8_t *ring, uint64_t size, uint64_t pos, size_t n)
{
	uint64_t off = pos & (size - 1), first = size - off;

	if (first >= n) {
		memcpy(dst, ring + off, n);
	} else {
		memcpy(dst, ring + off, first);
		memcpy(dst + first, ring, n - first);
	}
}

static void give_aux(struct perf_ring *r, const struct perf_ring_ops *ops, uint64_t pos,
		     uint64_t len, uint64_t flags, const struct perf_event_header *auxrec)
{
	uint64_t off = pos & (r->aux_size - 1);
	const uint8_t *p;

	if (!len)
		return;
	if (off + len <= r->aux_size) {
		p = r->aux + off;
	} else {
		ring_copy(r->scratch, r->aux, r->aux_size, pos, len);
		p = r->scratch;
	}
	r->st.aux_bytes += len;
	if (flags & PERF_RING_AUX_UNDESCRIBED)
		r->st.aux_undescribed += len;
	if (ops->aux)
		ops->aux(ops->arg, p, len, pos, flags, auxrec);
}

/* Bytes between what was consumed and pos: undescribed but still in the buffer (the
 * kernel cannot overwrite past aux_tail), unless hostile numbers say otherwise. */
static void give_gap(struct perf_ring *r, const struct perf_ring_ops *ops, uint64_t pos)
{
	uint64_t gap = pos - r->aux_pos;

	if (pos <= r->aux_pos)
		return;
	if (gap > r->aux_size) {
		r->st.aux_lost_bytes += gap;
		r->aux_pos = pos;
		return;
	}
	give_aux(r, ops, r->aux_pos, gap, PERF_RING_AUX_UNDESCRIBED, NULL);
	r->aux_pos = pos;
}

#define PERF_AUX_RECORD_MAX 256        /* PERF_RECORD_AUX: 32 bytes + a sample_id of at most 48 */

struct aux_rec {
	struct perf_event_header h;
	uint64_t aux_offset, aux_size, flags;
};

static void aux_chunk(struct perf_ring *r, const struct perf_ring_ops *ops, const uint8_t *copy)
{
	struct aux_rec a;
	uint64_t off, len;

	memcpy(&a, copy, sizeof(a));
	r->st.aux_records++;
	if (a.flags & PERF_AUX_FLAG_TRUNCATED)
		r->st.aux_truncated++;
	if (a.flags & PERF_AUX_FLAG_PARTIAL)
		r->st.aux_partial++;
	if (a.flags & PERF_AUX_FLAG_COLLISION)
		r->st.aux_collision++;
	if (a.flags & PERF_AUX_FLAG_OVERWRITE)
		r->st.aux_overwrite++;
	off = a.aux_offset;
	len = a.aux_size;
	if (!r->aux || !len)
		return;
	if (off + len < off || len > r->aux_size) {
		r->st.aux_bad++;
		return;
	}
	if (off + len <= r->aux_pos)
		return;               /* already handed out as undescribed */
	if (off < r->aux_pos) {
		len -= r->aux_pos - off;
		off = r->aux_pos;
	}
	if (off > r->aux_pos && off + len - r->aux_pos > r->aux_size) {
		/* Gap and chunk cannot both fit: the gap's start was overwritten. */
		r->st.aux_lost_bytes += off - r->aux_pos;
		r->aux_pos = off;
	}
	give_gap(r, ops, off);
	give_aux(r, ops, off, len, a.flags & ~PERF_RING_AUX_UNDESCRIBED,
		 (const struct perf_event_header *)copy);
	r->aux_pos = off + len;
}

/* PERF_RECORD_AUX: its bytes first, then the record itself to ops->record. */
static void on_aux_record(struct perf_ring *r, const struct perf_ring_ops *ops,
			  const struct perf_event_header *h, const void *rec)
{
	uint8_t copy[PERF_AUX_RECORD_MAX];   /* rec may sit in the scratch a wrapped chunk needs */

	if (h->size < sizeof(struct aux_rec) || h->size > sizeof(copy)) {
		r->st.aux_bad++;
		return;
	}
	memcpy(copy, rec, h->size);
	aux_chunk(r, ops, copy);
	if (ops->record)
		ops->record(ops->arg, h, copy);
}

static int drain(struct perf_ring *r, const struct perf_ring_ops *ops, bool final)
{
	struct perf_event_mmap_page *pg = r->pg;
	struct perf_event_header h;
	uint64_t aux_head = 0, head, tail;
	int n = 0, ret = 0;

	/* aux_head first: the kernel writes a chunk's PERF_RECORD_AUX before it moves
	 * aux_head, so records for everything below it are (nearly always) visible now. */
	if (r->aux)
		aux_head = __atomic_load_n(&pg->aux_head, __ATOMIC_ACQUIRE);
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = __atomic_load_n(&pg->data_tail, __ATOMIC_RELAXED);
	if (head - tail > r->data_size) {
		r->st.bad_records++;
		tail = head;
		ret = -EIO;
	}
	while (head - tail >= sizeof(h)) {
		const void *rec;
		uint64_t off = tail & (r->data_size - 1);

		ring_copy((uint8_t *)&h, r->data, r->data_size, tail, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail) {
			r->st.bad_records++;
			tail = head;
			ret = -EIO;
			break;
		}
		if (off + h.size <= r->data_size) {
			rec = r->data + off;
		} else {
			ring_copy(r->scratch, r->data, r->data_size, tail, h.size);
			rec = r->scratch;
		}
		r->st.records++;
		n++;
		if (h.type == PERF_RECORD_AUX) {
			on_aux_record(r, ops, &h, rec);
		} else {
			if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
				uint64_t lost;   /* { header; u64 id; u64 lost; sample_id } */
				memcpy(&lost, (const uint8_t *)rec + sizeof(h) + 8, 8);
				r->st.lost_records++;
				r->st.lost += lost;
			}
			if (ops->record)
				ops->record(ops->arg, &h, rec);
		}
		tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	if (r->aux) {
		/* A head seen last time that is still undescribed lost its record (or was
		 * padding the kernel skipped): hand it out now. At the end, everything. */
		give_gap(r, ops, final ? aux_head : r->aux_seen_head);
		r->aux_seen_head = aux_head;
		__atomic_store_n(&pg->aux_tail, r->aux_pos, __ATOMIC_RELEASE);
	}
	return ret < 0 ? ret : n;
}

int perf_ring_drain(struct perf_ring *r, const struct perf_ring_ops *ops)
{
	return drain(r, ops, false);
}

int perf_ring_drain_final(struct perf_ring *r, const struct perf_ring_ops *ops)
{
	return drain(r, ops, true);
}

int perf_ring_time_conv(const struct perf_ring *r, struct perf_time_conv *tc)
{
	const struct perf_event_mmap_page *pg = r->pg;

	for (unsigned i = 0; i < PERF_TIME_CONV_RETRIES; i++) {
		uint32_t seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;                /* an update is in progress */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		tc->cap_zero = pg->cap_user_time_zero;
		tc->cap_short = pg->cap_user_time_short;
		tc->time_zero = pg->time_zero;
		tc->time_mult = pg->time_mult;
		tc->time_shift = pg->time_shift;
		tc->time_cycles = pg->time_cycles;
		tc->time_mask = pg->time_mask;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq)
			continue;
		if (!tc->cap_zero || tc->time_shift > 63)
			return -EOPNOTSUPP;
		return 0;
	}
	return -EAGAIN;
}

uint64_t perf_time_from_cycles(const struct perf_time_conv *tc, uint64_t cyc)
{
	uint64_t quot, rem;

	if (tc->time_shift > 63)
		return tc->time_zero;
	/* A counter narrower than 64 bits: place cyc in the epoch around time_cycles. */
	if (tc->cap_short)
		cyc = tc->time_cycles + ((cyc - tc->time_cycles) & tc->time_mask);
	quot = cyc >> tc->time_shift;
	rem = cyc & ((1ULL << tc->time_shift) - 1);
	return tc->time_zero + quot * tc->time_mult + ((rem * tc->time_mult) >> tc->time_shift);
}
