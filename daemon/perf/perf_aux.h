/* Reader of a perf event's mmap: the data ring (perf records) and the AUX area that
 * hardware tracers (arm_spe) write into, per the perf ABI of linux/perf_event.h and
 * Documentation/userspace-api/perf_ring_buffer.rst. Hand-written, not libperf: libperf
 * (tools/lib/perf) maps and reads only the data ring of events it opened itself, and has
 * no AUX support at all (that lives in the perf tool's auxtrace.c, not in the library);
 * the two rings here are read as one unit because PERF_RECORD_AUX records in the data
 * ring say which AUX bytes belong together and what was lost. The reader works on a page
 * pointer, so tests drive it with rings built in memory.
 * Invariants: nothing outside [tail, head) of either ring is read; data_tail/aux_tail
 * advance only over what was handed out (store-release after the reads, load-acquire
 * of the heads); every loss the kernel reports is counted. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>

#define PERF_RING_RECORD_MAX 65536     /* header.size is 16 bits */
#define PERF_RING_AUX_UNDESCRIBED (1ULL << 63)   /* aux() flag: no PERF_RECORD_AUX for these
                                                  * bytes (padding the kernel skipped, or its
                                                  * record was lost) */
#define PERF_TIME_CONV_RETRIES 1000    /* seqlock retries before giving up on the page */

struct perf_ring_stats {
	uint64_t records;              /* data-ring records read */
	uint64_t lost_records;         /* PERF_RECORD_LOST records */
	uint64_t lost;                 /* records the kernel dropped (sum of their counts) */
	uint64_t bad_records;          /* impossible headers: the rest of the ring skipped */
	uint64_t aux_records;          /* PERF_RECORD_AUX */
	uint64_t aux_bytes;            /* AUX bytes handed out (described or not) */
	uint64_t aux_undescribed;      /* ... of which no PERF_RECORD_AUX described */
	uint64_t aux_truncated;        /* AUX records flagged TRUNCATED (buffer full: data lost) */
	uint64_t aux_partial;          /* ... PARTIAL (the last record is corrupt) */
	uint64_t aux_collision;        /* ... COLLISION (samples dropped in the hardware) */
	uint64_t aux_overwrite;        /* ... OVERWRITE (snapshot mode: not ours) */
	uint64_t aux_bad;              /* AUX records out of range: ignored */
	uint64_t aux_lost_bytes;       /* AUX bytes gone before they could be read */
};

struct perf_ring {
	struct perf_event_mmap_page *pg;
	uint8_t *data;                 /* data_size bytes, a power of two */
	uint64_t data_size;
	uint8_t *aux;                  /* aux_size bytes, a power of two; NULL: no AUX area */
	uint64_t aux_size;
	uint8_t *scratch;              /* a wrapped record or AUX chunk, made contiguous */
	size_t scratch_size;
	uint64_t aux_pos;              /* AUX bytes consumed (free-running, like aux_head) */
	uint64_t aux_seen_head;        /* aux_head at the previous drain */
	size_t map_len, aux_map_len;   /* > 0 when perf_ring_mmap mapped them */
	struct perf_ring_stats st;
};

struct perf_ring_ops {
	/* Every data-ring record, in ring order (PERF_RECORD_AUX after its bytes went to
	 * aux()). rec is contiguous and h->size bytes long; valid during the call only. */
	void (*record)(void *arg, const struct perf_event_header *h, const void *rec);
	/* AUX bytes [off, off + len) of the AUX stream (off free-running), contiguous.
	 * flags: the describing record's PERF_AUX_FLAG_*, or PERF_RING_AUX_UNDESCRIBED;
	 * auxrec: that PERF_RECORD_AUX (its sample_id tells when), NULL if undescribed. */
	void (*aux)(void *arg, const uint8_t *buf, size_t len, uint64_t off, uint64_t flags,
		    const struct perf_event_header *auxrec);
	void *arg;
};

/* A ring whose memory the caller owns (tests, or an mmap made elsewhere): data at
 * page + pg->data_offset (or page + page_size when data_offset is 0, pre-4.1 layout).
 * data_size and aux_size must be powers of two. 0 or -EINVAL/-ENOMEM. */
int perf_ring_init(struct perf_ring *r, void *page, uint64_t data_size, void *aux,
		   uint64_t aux_size);
/* mmap of fd: 1 + data_pages (power of two) pages, then aux_pages (power of two, 0 =
 * none) read-write at aux_offset, the non-overwrite mode. 0 or -errno. */
int perf_ring_mmap(struct perf_ring *r, int fd, size_t data_pages, size_t aux_pages);
void perf_ring_free(struct perf_ring *r);

/* Reads everything the rings hold now. AUX bytes go to ops->aux in stream order, each
 * chunk once; bytes below an aux_head seen at the previous drain that no record has
 * described by now are handed out as undescribed. Returns data records read, or -EIO
 * when the page is corrupt (the rest is skipped, counted in bad_records). */
int perf_ring_drain(struct perf_ring *r, const struct perf_ring_ops *ops);
/* At the end: also hands out AUX bytes up to the current aux_head. */
int perf_ring_drain_final(struct perf_ring *r, const struct perf_ring_ops *ops);

/* Hardware-counter -> perf timestamp conversion (cap_user_time_zero). */
struct perf_time_conv {
	uint64_t time_zero, time_cycles, time_mask;
	uint32_t time_mult;
	uint16_t time_shift;
	bool cap_zero, cap_short;
};
/* Copies the page's conversion fields under its seqlock. 0, -EOPNOTSUPP when the kernel
 * does not offer cap_user_time_zero for this event, -EAGAIN if the lock never settled. */
int perf_ring_time_conv(const struct perf_ring *r, struct perf_time_conv *tc);
/* perf clock ns of a counter value, as the ABI defines (linux/perf_event.h). */
uint64_t perf_time_from_cycles(const struct perf_time_conv *tc, uint64_t cyc);
