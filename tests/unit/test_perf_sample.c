/* perf_sample: sample_id trailers built byte by byte in ABI order, parsed back; short
 * and overlong records are rejected with the documented error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/perf/perf_sample.h"

struct buf {
	unsigned char b[4096];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void put64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put16(struct buf *b, uint16_t v) { put(b, &v, 2); }

/* sample_id trailers of non-sample records (sample_id_all), as the SPE reader sees them. */
static void test_sample_id(void **state)
{
	struct perf_sample_id id;
	struct buf b = { .n = 0 };
	uint16_t sz;

	/* PERF_RECORD_SWITCH_CPU_WIDE { next_prev_pid, next_prev_tid } + every id field. */
	put32(&b, PERF_RECORD_SWITCH_CPU_WIDE);
	put16(&b, PERF_RECORD_MISC_SWITCH_OUT);
	put16(&b, 0);
	put32(&b, 77); put32(&b, 78);           /* next_prev pid/tid: not the trailer */
	put32(&b, 1000); put32(&b, 1001);       /* TID */
	put64(&b, 555);                         /* TIME */
	put64(&b, 9);                           /* ID */
	put64(&b, 10);                          /* STREAM_ID */
	put32(&b, 3); put32(&b, 0);             /* CPU */
	put64(&b, 11);                          /* IDENTIFIER */
	sz = (uint16_t)b.n;
	memcpy(b.b + 6, &sz, 2);
	uint64_t all = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
		       PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_ADDR;
	assert_int_equal(perf_sample_id_parse(b.b, b.n, all, &id), 0);
	assert_int_equal(id.pid, 1000);
	assert_int_equal(id.tid, 1001);
	assert_int_equal(id.time, 555);
	assert_int_equal(id.stream_id, 10);
	assert_int_equal(id.cpu, 3);
	assert_int_equal(id.id, 11);            /* IDENTIFIER, last, wins */
	/* Fewer fields: the trailer is the last bytes, whatever precedes it. */
	assert_int_equal(perf_sample_id_parse(b.b, b.n, PERF_SAMPLE_IDENTIFIER, &id), 0);
	assert_int_equal(id.id, 11);
	assert_int_equal(id.time, 0);
	assert_int_equal(perf_sample_id_parse(b.b, b.n, PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER, &id), 0);
	assert_int_equal(id.cpu, 3);
	/* A record too short for its trailer, or longer than the buffer. */
	sz = 16;
	memcpy(b.b + 6, &sz, 2);
	assert_int_equal(perf_sample_id_parse(b.b, b.n, all, &id), -EBADMSG);
	sz = (uint16_t)(b.n + 8);
	memcpy(b.b + 6, &sz, 2);
	assert_int_equal(perf_sample_id_parse(b.b, b.n, all, &id), -EINVAL);
	assert_int_equal(perf_sample_id_parse(b.b, 4, all, &id), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
