/* perf_sample: PERF_RECORD_SAMPLE records built byte by byte in ABI order, parsed back;
 * truncated, overlong and malformed records are rejected with the documented error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
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

static void begin(struct buf *b, uint16_t misc)
{
	b->n = 0;
	put32(b, PERF_RECORD_SAMPLE);
	put16(b, misc);
	put16(b, 0);   /* size, patched by end() */
}

static void end(struct buf *b)
{
	uint16_t sz = (uint16_t)b->n;

	memcpy(b->b + 6, &sz, 2);
}

#define PEBS_TYPE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | \
		   PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC)

static void build_pebs(struct buf *b)
{
	union perf_mem_data_src ds = { .val = 0 };

	ds.mem_op = PERF_MEM_OP_LOAD;
	ds.mem_lvl = PERF_MEM_LVL_L1 | PERF_MEM_LVL_HIT;
	begin(b, PERF_RECORD_MISC_USER);
	put64(b, 0x401234);                 /* ip */
	put32(b, 1000); put32(b, 1001);     /* pid, tid */
	put64(b, 123456789);                /* time */
	put64(b, 0x7fff0010);               /* addr */
	put32(b, 3); put32(b, 0);           /* cpu, res */
	put64(b, 20003);                    /* period */
	put64(b, 42);                       /* weight */
	put64(b, ds.val);                   /* data_src */
	end(b);
}

static void test_pebs_layout(void **state)
{
	struct perf_sample_layout lay = { .sample_type = PEBS_TYPE };
	struct perf_sample s;
	struct buf b;

	build_pebs(&b);
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), 0);
	assert_int_equal(s.misc, PERF_RECORD_MISC_USER);
	assert_int_equal(s.ip, 0x401234);
	assert_int_equal(s.pid, 1000);
	assert_int_equal(s.tid, 1001);
	assert_int_equal(s.time, 123456789);
	assert_int_equal(s.addr, 0x7fff0010);
	assert_int_equal(s.cpu, 3);
	assert_int_equal(s.period, 20003);
	assert_int_equal(s.weight, 42);
	assert_int_equal(perf_data_src_rw(s.data_src), 1);

	/* Any alignment: the same record one byte off. */
	static unsigned char shifted[4097];
	memcpy(shifted + 1, b.b, b.n);
	struct perf_sample s2;
	assert_int_equal(perf_sample_parse(shifted + 1, b.n, &lay, &s2), 0);
	assert_int_equal(s2.addr, s.addr);
	assert_int_equal(s2.data_src, s.data_src);
}

/* Every proper prefix is rejected, whether header.size claims the full length
 * (buffer too short: -EINVAL) or the prefix (fields overrun: -EBADMSG). */
static void test_truncated(void **state)
{
	struct perf_sample_layout lay = { .sample_type = PEBS_TYPE };
	struct perf_sample s;
	struct buf b, t;

	build_pebs(&b);
	for (size_t n = 0; n < b.n; n++) {
		assert_int_equal(perf_sample_parse(b.b, n, &lay, &s), -EINVAL);
		t = b;
		t.n = n;
		if (n >= 8) {
			end(&t);
			assert_int_equal(perf_sample_parse(t.b, n, &lay, &s), -EBADMSG);
		}
	}
	/* trailing bytes the sample_type does not explain */
	t = b;
	put64(&t, 0);
	end(&t);
	assert_int_equal(perf_sample_parse(t.b, t.n, &lay, &s), -EBADMSG);
	/* header.size smaller than a header */
	t = b;
	memset(t.b + 6, 0, 2);
	t.b[6] = 4;
	assert_int_equal(perf_sample_parse(t.b, t.n, &lay, &s), -EINVAL);
	/* not a sample */
	t = b;
	t.b[0] = PERF_RECORD_MMAP;
	assert_int_equal(perf_sample_parse(t.b, t.n, &lay, &s), -EINVAL);
	/* a layout the parser does not know */
	lay.sample_type |= PERF_SAMPLE_READ;
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EOPNOTSUPP);
	lay.sample_type = PEBS_TYPE | PERF_SAMPLE_BRANCH_STACK;
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EOPNOTSUPP);
}

#define RICH_TYPE (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
		   PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | \
		   PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT_STRUCT | \
		   PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_DATA_PAGE_SIZE)

static void build_rich(struct buf *b, uint64_t regs_abi, uint64_t chain_nr, uint32_t raw_sz,
		       uint64_t dyn)
{
	begin(b, PERF_RECORD_MISC_USER);
	put64(b, 77);                           /* identifier */
	put64(b, 0x1000);                       /* ip */
	put32(b, 5); put32(b, 6);               /* pid, tid */
	put64(b, 99);                           /* stream_id */
	put64(b, chain_nr);
	for (uint64_t i = 0; i < 3; i++)
		put64(b, 0xa000 + i);
	put32(b, raw_sz);                       /* raw: 4 + 12 = 16, u64 aligned */
	for (int i = 0; i < 12; i++) {
		unsigned char c = (unsigned char)i;
		put(b, &c, 1);
	}
	put64(b, regs_abi);
	if (regs_abi) {
		put64(b, 0x11); put64(b, 0x22); put64(b, 0x33);   /* mask bits 0, 5, 8 */
	}
	put64(b, 16);                           /* stack size */
	put64(b, 0x1111111111111111ULL);
	put64(b, 0x2222222222222222ULL);
	put64(b, dyn);                          /* dyn_size */
	put32(b, 300); put16(b, 7); put16(b, 9);   /* weight struct */
	put64(b, 0);                            /* data_src */
	put64(b, 0x123000);                     /* phys_addr */
	put64(b, 4096);                         /* data page size */
	end(b);
}

static void test_rich_layout(void **state)
{
	struct perf_sample_layout lay = { .sample_type = RICH_TYPE,
					  .regs_user_mask = (1 << 0) | (1 << 5) | (1 << 8) };
	struct perf_sample s;
	struct buf b;

	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 3, 12, 8);
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), 0);
	assert_int_equal(s.id, 77);
	assert_int_equal(s.stream_id, 99);
	assert_int_equal(s.nr_callchain, 3);
	assert_int_equal(perf_sample_chain(&s, 2), 0xa002);
	assert_int_equal(perf_sample_chain(&s, 3), 0);
	assert_int_equal(s.raw_size, 12);
	assert_int_equal(((const unsigned char *)s.raw)[11], 11);
	assert_int_equal(s.regs_user_abi, PERF_SAMPLE_REGS_ABI_64);
	assert_int_equal(s.nregs_user, 3);
	assert_int_equal(s.regs_user[2], 0x33);
	assert_int_equal(s.stack_size, 16);
	assert_int_equal(s.stack_dyn_size, 8);
	assert_int_equal(s.weight, 300);
	assert_int_equal(s.weight_var2, 7);
	assert_int_equal(s.weight_var3, 9);
	assert_int_equal(s.phys_addr, 0x123000);
	assert_int_equal(s.data_page_size, 4096);
	assert_int_equal(perf_data_src_rw(s.data_src), 0);

	/* ABI none: no register values follow */
	build_rich(&b, PERF_SAMPLE_REGS_ABI_NONE, 3, 12, 8);
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), 0);
	assert_int_equal(s.nregs_user, 0);
	assert_int_equal(s.data_page_size, 4096);

	/* malformed counts */
	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 4, 12, 8);          /* chain one too long */
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EBADMSG);
	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 1ULL << 40, 12, 8); /* absurd chain */
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EBADMSG);
	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 3, 0xffffffffu, 8); /* raw past the end */
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EBADMSG);
	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 3, 12, 17);         /* dyn_size > size */
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EBADMSG);
	lay.regs_user_mask |= 1 << 9;                               /* one reg more than sent */
	build_rich(&b, PERF_SAMPLE_REGS_ABI_64, 3, 12, 8);
	assert_int_equal(perf_sample_parse(b.b, b.n, &lay, &s), -EBADMSG);
}

static void test_data_src(void **state)
{
	union perf_mem_data_src d = { .val = 0 };

	d.mem_op = PERF_MEM_OP_STORE;
	assert_int_equal(perf_data_src_rw(d.val), 2);
	d.mem_op = PERF_MEM_OP_LOAD | PERF_MEM_OP_STORE;
	assert_int_equal(perf_data_src_rw(d.val), 3);
	d.mem_op = PERF_MEM_OP_NA;
	assert_int_equal(perf_data_src_rw(d.val), 0);
}

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
		cmocka_unit_test(test_pebs_layout),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_rich_layout),
		cmocka_unit_test(test_data_src),
		cmocka_unit_test(test_sample_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
