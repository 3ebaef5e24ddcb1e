/* perf_aux: the ring reader on rings built in memory (a perf_event_mmap_page, a data ring
 * and an AUX area, written the way the kernel writes them): records and AUX chunks that
 * wrap, AUX flags, LOST records, gaps and undescribed AUX bytes, hostile headers, the
 * time_zero conversion; then the real kernel: a mapped dummy event's COMM record, and
 * perf_clock's offset checked against CLOCK_MONOTONIC readings around a rename. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/perf/perf_aux.h"
#include "daemon/perf/perf_clock.h"
#include "daemon/perf/perf_sample.h"

#define AUXSZ 128
#define MAXREC 32

struct fake {
	uint8_t *mem;
	struct perf_event_mmap_page *pg;
	uint8_t *data;
	size_t dsz;
	uint64_t head;
	uint8_t aux[AUXSZ];
};

struct seen {
	unsigned nrec;
	uint32_t type[MAXREC];
	uint16_t size[MAXREC];
	uint8_t body[MAXREC][128];
	unsigned naux;
	uint64_t aux_off[MAXREC], aux_len[MAXREC], aux_flags[MAXREC];
	uint8_t aux_bytes[MAXREC][AUXSZ];
	bool aux_had_rec[MAXREC];
};

static void fake_init(struct fake *f, size_t dsz, uint64_t start)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);

	memset(f, 0, sizeof(*f));
	size_t len = (psz + dsz + psz - 1) / psz * psz;   /* a multiple of the alignment */

	f->mem = aligned_alloc(psz, len);
	assert_non_null(f->mem);
	memset(f->mem, 0, len);
	f->pg = (struct perf_event_mmap_page *)f->mem;
	f->pg->data_offset = psz;
	f->pg->data_size = dsz;
	f->data = f->mem + psz;
	f->dsz = dsz;
	f->head = start;
	f->pg->data_head = f->pg->data_tail = start;
}

static void wr(struct fake *f, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f->data[(f->head + i) & (f->dsz - 1)] = ((const uint8_t *)p)[i];
	f->head += n;
}

static void publish(struct fake *f, uint64_t aux_head)
{
	f->pg->data_head = f->head;
	f->pg->aux_head = aux_head;
}

static void rec_raw(struct fake *f, uint32_t type, uint16_t misc, const void *body, uint16_t n)
{
	struct perf_event_header h = { .type = type, .misc = misc, .size = (uint16_t)(8 + n) };

	wr(f, &h, sizeof(h));
	wr(f, body, n);
}

static void rec_aux(struct fake *f, uint64_t off, uint64_t size, uint64_t flags)
{
	uint64_t b[3] = { off, size, flags };

	rec_raw(f, PERF_RECORD_AUX, 0, b, sizeof(b));
}

static void aux_fill(struct fake *f, uint64_t pos, uint64_t n, uint8_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		f->aux[(pos + i) & (AUXSZ - 1)] = (uint8_t)(seed + i);
}

static void on_rec(void *arg, const struct perf_event_header *h, const void *rec)
{
	struct seen *s = arg;

	assert_true(s->nrec < MAXREC);
	s->type[s->nrec] = h->type;
	s->size[s->nrec] = h->size;
	memcpy(s->body[s->nrec], rec, h->size < 128 ? h->size : 128);
	s->nrec++;
}

static void on_aux(void *arg, const uint8_t *buf, size_t len, uint64_t off, uint64_t flags,
		   const struct perf_event_header *auxrec)
{
	struct seen *s = arg;

	assert_true(s->naux < MAXREC);
	assert_true(len <= AUXSZ);
	s->aux_off[s->naux] = off;
	s->aux_len[s->naux] = len;
	s->aux_flags[s->naux] = flags;
	s->aux_had_rec[s->naux] = auxrec != NULL;
	if (auxrec)
		assert_int_equal(auxrec->type, PERF_RECORD_AUX);
	memcpy(s->aux_bytes[s->naux], buf, len);
	s->naux++;
}

static void check_chunk(const struct seen *s, unsigned i, uint64_t off, uint64_t len, uint8_t seed)
{
	assert_true(s->aux_off[i] == off);
	assert_true(s->aux_len[i] == len);
	for (uint64_t k = 0; k < len; k++)
		assert_int_equal(s->aux_bytes[i][k], (uint8_t)(seed + k));
}

static void test_data_ring_wrap(void **state)
{
	struct fake f;
	struct perf_ring r;
	struct seen s;
	struct perf_ring_ops ops = { .record = on_rec, .aux = on_aux, .arg = &s };
	uint8_t body[56];

	fake_init(&f, 256, 200);                  /* a reader resuming at 200 of 256 */
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)i;
	rec_raw(&f, PERF_RECORD_COMM, 1, body, 32);    /* 200..240 */
	rec_raw(&f, PERF_RECORD_EXIT, 2, body, 40);    /* 240..288: wraps at 256 */
	rec_raw(&f, PERF_RECORD_FORK, 3, body, 56);    /* 288..352 */
	publish(&f, 0);
	assert_int_equal(perf_ring_init(&r, f.mem, f.dsz, NULL, 0), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 3);
	assert_int_equal(s.nrec, 3);
	assert_int_equal(s.type[1], PERF_RECORD_EXIT);
	assert_int_equal(s.size[1], 48);
	assert_memory_equal(s.body[1] + 8, body, 40);     /* contiguous across the wrap */
	assert_int_equal(s.type[2], PERF_RECORD_FORK);
	assert_memory_equal(s.body[2] + 8, body, 56);
	assert_true(f.pg->data_tail == 352);
	assert_int_equal(s.naux, 0);

	/* A header split by the wrap, and nothing new: nothing read twice. */
	f.head = 508;
	f.pg->data_tail = 508;
	rec_raw(&f, PERF_RECORD_COMM, 0, body, 16);    /* header bytes 508..516 wrap */
	publish(&f, 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 1);
	assert_int_equal(s.type[0], PERF_RECORD_COMM);
	assert_memory_equal(s.body[0] + 8, body, 16);
	assert_int_equal(perf_ring_drain(&r, &ops), 0);
	assert_int_equal(r.st.records, 4);
	perf_ring_free(&r);
	free(f.mem);
}

static void test_aux_chunks(void **state)
{
	struct fake f;
	struct perf_ring r;
	struct seen s;
	struct perf_ring_ops ops = { .record = on_rec, .aux = on_aux, .arg = &s };

	fake_init(&f, 512, 0);
	aux_fill(&f, 0, 50, 1);
	rec_aux(&f, 0, 50, 0);
	aux_fill(&f, 50, 50, 100);
	rec_aux(&f, 50, 50, PERF_AUX_FLAG_TRUNCATED | PERF_AUX_FLAG_COLLISION);
	uint64_t lost[2] = { 7, 5 };               /* { id, lost } */
	rec_raw(&f, PERF_RECORD_LOST, 0, lost, sizeof(lost));
	publish(&f, 100);
	assert_int_equal(perf_ring_init(&r, f.mem, f.dsz, f.aux, AUXSZ), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 3);
	assert_int_equal(s.naux, 2);
	check_chunk(&s, 0, 0, 50, 1);
	check_chunk(&s, 1, 50, 50, 100);
	assert_true(s.aux_flags[1] == (PERF_AUX_FLAG_TRUNCATED | PERF_AUX_FLAG_COLLISION));
	assert_true(s.aux_had_rec[0] && s.aux_had_rec[1]);
	/* The AUX record reaches ops->record after its bytes went to ops->aux. */
	assert_int_equal(s.nrec, 3);
	assert_int_equal(s.type[0], PERF_RECORD_AUX);
	assert_int_equal(s.type[2], PERF_RECORD_LOST);
	assert_true(f.pg->aux_tail == 100);
	assert_int_equal(r.st.lost, 5);
	assert_int_equal(r.st.lost_records, 1);

	/* A chunk that wraps the AUX area (100..160 of 128) arrives contiguous. */
	aux_fill(&f, 100, 60, 200);
	rec_aux(&f, 100, 60, PERF_AUX_FLAG_PARTIAL);
	publish(&f, 160);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 1);
	assert_int_equal(s.naux, 1);
	check_chunk(&s, 0, 100, 60, 200);
	assert_true(f.pg->aux_tail == 160);
	assert_int_equal(r.st.aux_records, 3);
	assert_int_equal(r.st.aux_truncated, 1);
	assert_int_equal(r.st.aux_collision, 1);
	assert_int_equal(r.st.aux_partial, 1);
	assert_int_equal(r.st.aux_bytes, 160);
	assert_int_equal(r.st.aux_undescribed, 0);
	perf_ring_free(&r);
	free(f.mem);
}

static void test_aux_gaps(void **state)
{
	struct fake f;
	struct perf_ring r;
	struct seen s;
	struct perf_ring_ops ops = { .record = on_rec, .aux = on_aux, .arg = &s };

	fake_init(&f, 512, 0);
	assert_int_equal(perf_ring_init(&r, f.mem, f.dsz, f.aux, AUXSZ), 0);
	/* aux_head moves with no record (its record lost, or skipped padding): held back
	 * one drain (the record may still be on its way), then handed out undescribed. */
	aux_fill(&f, 0, 40, 10);
	publish(&f, 40);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 0);
	assert_int_equal(s.naux, 0);
	assert_true(f.pg->aux_tail == 0);
	assert_int_equal(perf_ring_drain(&r, &ops), 0);
	assert_int_equal(s.naux, 1);
	check_chunk(&s, 0, 0, 40, 10);
	assert_true(s.aux_flags[0] == PERF_RING_AUX_UNDESCRIBED);
	assert_false(s.aux_had_rec[0]);
	assert_true(f.pg->aux_tail == 40);
	/* Its late record changes nothing; a record after a gap brings the gap first. */
	rec_aux(&f, 20, 20, 0);
	aux_fill(&f, 40, 16, 50);                  /* padding the kernel skipped */
	aux_fill(&f, 56, 24, 80);
	rec_aux(&f, 56, 24, 0);
	publish(&f, 80);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 2);
	assert_int_equal(s.naux, 2);
	check_chunk(&s, 0, 40, 16, 50);
	assert_true(s.aux_flags[0] == PERF_RING_AUX_UNDESCRIBED);
	check_chunk(&s, 1, 56, 24, 80);
	assert_true(s.aux_flags[1] == 0);
	/* A chunk whose record overlaps what was consumed: only the new part. */
	aux_fill(&f, 80, 20, 120);
	rec_aux(&f, 70, 30, 0);
	publish(&f, 100);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 1);
	assert_int_equal(s.naux, 1);
	check_chunk(&s, 0, 80, 20, 120);
	/* At the end, bytes without a record go out at once. */
	aux_fill(&f, 100, 10, 1);
	publish(&f, 110);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain_final(&r, &ops), 0);
	assert_int_equal(s.naux, 1);
	check_chunk(&s, 0, 100, 10, 1);
	assert_true(f.pg->aux_tail == 110);
	assert_int_equal(r.st.aux_undescribed, 40 + 16 + 10);
	assert_int_equal(r.st.aux_bytes, 110);
	perf_ring_free(&r);
	free(f.mem);
}

static void test_hostile(void **state)
{
	struct fake f;
	struct perf_ring r;
	struct seen s;
	struct perf_ring_ops ops = { .record = on_rec, .aux = on_aux, .arg = &s };
	uint64_t big[40];

	memset(big, 0, sizeof(big));
	fake_init(&f, 512, 0);
	assert_int_equal(perf_ring_init(&r, f.mem, f.dsz, f.aux, AUXSZ), 0);
	rec_aux(&f, 0, AUXSZ + 1, 0);                        /* more than the area */
	rec_aux(&f, UINT64_MAX - 4, 10, 0);                  /* offset + size overflows */
	rec_raw(&f, PERF_RECORD_AUX, 0, big, 16);            /* too short for an AUX record */
	rec_raw(&f, PERF_RECORD_AUX, 0, big, sizeof(big));   /* longer than any AUX record */
	aux_fill(&f, 1000, 8, 0);
	rec_aux(&f, 1000, 8, 0);                             /* 1000 bytes ahead: gap lost */
	publish(&f, 1008);
	memset(&s, 0, sizeof(s));
	assert_int_equal(perf_ring_drain(&r, &ops), 5);
	assert_int_equal(r.st.aux_bad, 4);
	assert_int_equal(r.st.aux_lost_bytes, 1000);
	assert_int_equal(s.naux, 1);
	check_chunk(&s, 0, 1000, 8, 0);

	/* A header that cannot be a record: the rest of the ring is skipped. */
	struct perf_event_header h = { .type = PERF_RECORD_COMM, .size = 4 };
	wr(&f, &h, sizeof(h));
	wr(&f, big, 32);
	publish(&f, 1008);
	assert_int_equal(perf_ring_drain(&r, &ops), -EIO);
	assert_true(f.pg->data_tail == f.head);
	/* A record longer than what was published. */
	h.size = 64;
	wr(&f, &h, sizeof(h));
	publish(&f, 1008);
	assert_int_equal(perf_ring_drain(&r, &ops), -EIO);
	/* A head further than a whole ring from the tail. */
	f.head += 4096;
	publish(&f, 1008);
	assert_int_equal(perf_ring_drain(&r, &ops), -EIO);
	assert_int_equal(r.st.bad_records, 3);
	assert_true(f.pg->data_tail == f.head);

	perf_ring_free(&r);
	assert_int_equal(perf_ring_init(&r, NULL, 512, NULL, 0), -EINVAL);
	assert_int_equal(perf_ring_init(&r, f.mem, 500, NULL, 0), -EINVAL);
	assert_int_equal(perf_ring_init(&r, f.mem, 512, f.aux, 100), -EINVAL);
	free(f.mem);
}

static void test_time_conv(void **state)
{
	struct fake f;
	struct perf_ring r;
	struct perf_time_conv tc;

	fake_init(&f, 512, 0);
	assert_int_equal(perf_ring_init(&r, f.mem, f.dsz, NULL, 0), 0);
	assert_int_equal(perf_ring_time_conv(&r, &tc), -EOPNOTSUPP);   /* no cap_user_time_zero */
	f.pg->cap_user_time_zero = 1;
	f.pg->time_zero = 1000;
	f.pg->time_mult = 3;
	f.pg->time_shift = 1;
	assert_int_equal(perf_ring_time_conv(&r, &tc), 0);
	assert_true(perf_time_from_cycles(&tc, 10) == 1000 + 15);
	assert_true(perf_time_from_cycles(&tc, 11) == 1000 + 16);   /* 33 >> 1 */
	/* A 25 MHz generic timer (arm64's usual): 40 ns per tick, as sched_clock sets
	 * mult/shift; the ABI's split form must equal the exact 128-bit product. */
	f.pg->time_zero = 123456789;
	f.pg->time_mult = 1342177280;             /* 40 << 25 */
	f.pg->time_shift = 25;
	assert_int_equal(perf_ring_time_conv(&r, &tc), 0);
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < 1000; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		uint64_t cyc = x >> 8;            /* a 56-bit counter */
		unsigned __int128 want = ((unsigned __int128)cyc * tc.time_mult) >> tc.time_shift;
		assert_true(perf_time_from_cycles(&tc, cyc) == tc.time_zero + (uint64_t)want);
	}
	assert_true(perf_time_from_cycles(&tc, 25000000) == 123456789 + 1000000000ULL);
	/* A short counter: cycles are taken in the epoch around time_cycles. */
	f.pg->cap_user_time_short = 1;
	f.pg->time_cycles = 0x1000000;
	f.pg->time_mask = 0xffffff;               /* 24 bits */
	f.pg->time_mult = 1;
	f.pg->time_shift = 0;
	f.pg->time_zero = 0;
	assert_int_equal(perf_ring_time_conv(&r, &tc), 0);
	assert_true(tc.cap_short);
	assert_true(perf_time_from_cycles(&tc, 0x10) == 0x1000010);
	/* An update never finishing: the reader gives up. */
	f.pg->lock = 3;
	assert_int_equal(perf_ring_time_conv(&r, &tc), -EAGAIN);
	perf_ring_free(&r);
	free(f.mem);
}

/* ---- the real kernel -------------------------------------------------------------- */

struct comm { uint64_t time; uint32_t tid; int n; };

static void on_comm(void *arg, const struct perf_event_header *h, const void *rec)
{
	struct comm *c = arg;
	struct perf_sample_id id;

	if (h->type == PERF_RECORD_COMM &&
	    perf_sample_id_parse(rec, h->size, PERF_SAMPLE_TID | PERF_SAMPLE_TIME, &id) == 0 &&
	    id.tid == c->tid) {
		c->time = id.time;
		c->n++;
	}
}

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void test_real_ring_and_clock(void **state)
{
	struct perf_event_attr a;
	struct perf_ring r;
	struct comm c = { .tid = (uint32_t)syscall(SYS_gettid) };
	struct perf_ring_ops ops = { .record = on_comm, .arg = &c };
	char name[17] = "";
	int64_t off;

	/* First: its own rename must not reach the event below. */
	int err = perf_clock_offset(&off);
	if (err == -EACCES || err == -EPERM) {
		print_message("perf_clock_offset: %s\n", strerror(-err));
		skip();
	}
	assert_int_equal(err, 0);
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a.sample_id_all = 1;
	a.comm = 1;
	a.exclude_kernel = 1;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0) {
		print_message("perf_event_open: %s\n", strerror(errno));
		skip();
	}
	assert_int_equal(perf_ring_mmap(&r, fd, 1, 0), 0);
	assert_true(r.map_len > 0);
	assert_int_equal(prctl(PR_GET_NAME, name), 0);
	uint64_t t1 = mono();
	assert_int_equal(prctl(PR_SET_NAME, name), 0);
	uint64_t t2 = mono();
	assert_true(perf_ring_drain(&r, &ops) >= 1);
	assert_int_equal(c.n, 1);
	/* The record's perf-clock time, moved by the measured offset, falls between the
	 * CLOCK_MONOTONIC readings around the rename (20 us for the offset's drift since). */
	int64_t m = (int64_t)c.time + off;
	print_message("perf clock - monotonic offset %lld ns; rename at [%llu, %llu], record %lld\n",
		      (long long)-off, (unsigned long long)t1, (unsigned long long)t2, (long long)m);
	assert_true(m >= (int64_t)t1 - 20000 && m <= (int64_t)t2 + 20000);
	assert_true(r.pg->data_tail == r.pg->data_head);
	perf_ring_free(&r);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_ring_wrap),
		cmocka_unit_test(test_aux_chunks),
		cmocka_unit_test(test_aux_gaps),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_time_conv),
		cmocka_unit_test(test_real_ring_and_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
