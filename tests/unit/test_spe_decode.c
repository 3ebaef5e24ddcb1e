/* spe_decode: every packet kind from bytes built per the Arm ARM's SPE packet formats,
 * a record published by Linux's perf (the `perf report --dump-raw-trace` example in
 * commit ffd3d18c20b8, "perf tools: Add ARM Statistical Profiling Extensions (SPE)
 * support", Kim Phillips, 2018), and hostile input: truncation, unknown headers with
 * resynchronisation, overlong records. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/access/spe_decode.h"

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *b, const uint8_t *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void byte(struct buf *b, uint8_t v) { put(b, &v, 1); }
static void le(struct buf *b, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		byte(b, (uint8_t)(v >> (8 * i)));
}
/* Short-header packets. */
static void addr(struct buf *b, unsigned idx, uint64_t payload) { byte(b, 0xb0 | idx); le(b, payload, 8); }
static void counter(struct buf *b, unsigned idx, uint16_t v) { byte(b, 0x98 | idx); le(b, v, 2); }
static void op(struct buf *b, unsigned cls, uint8_t v) { byte(b, 0x48 | cls); byte(b, v); }
static void ts(struct buf *b, uint64_t v) { byte(b, 0x71); le(b, v, 8); }
static void ctx(struct buf *b, unsigned el, uint32_t v) { byte(b, 0x64 | el); le(b, v, 4); }
static void events(struct buf *b, uint64_t v, unsigned szlog) { byte(b, 0x42 | szlog << 4); le(b, v, 1u << szlog); }
static void source(struct buf *b, uint64_t v, unsigned szlog) { byte(b, 0x43 | szlog << 4); le(b, v, 1u << szlog); }
static void end(struct buf *b) { byte(b, 0x01); }

/* PC payload: bit 63 NS, bits 62:61 EL, address in bits 55:0. */
static uint64_t pc_payload(uint64_t va, unsigned el)
{
	return (1ULL << 63) | ((uint64_t)el << 61) | (va & 0x00ffffffffffffffULL);
}

static void test_published_record(void **state)
{
	/* perf's dump: LD, VA, PA, LAT XLAT, EV, PC, LAT TOT, TS, then the next record cut. */
	static const uint8_t dump[] = {
		0x49, 0x00,
		0xb2, 0xc0, 0x3b, 0x29, 0x0f, 0x00, 0x00, 0xff, 0xff,
		0xb3, 0xc0, 0xeb, 0x24, 0xfb, 0x00, 0x00, 0x00, 0x80,
		0x9a, 0x00, 0x00,
		0x42, 0x16,
		0xb0, 0x00, 0xc4, 0x15, 0x08, 0x00, 0x00, 0xff, 0xff,
		0x98, 0x00, 0x00,
		0x71, 0x36, 0x6c, 0x21, 0x2c, 0x09, 0x00, 0x00, 0x00,
		0x49, 0x00, 0xb2, 0x80, 0x3c, 0x29,
	};
	struct spe_decoder d;
	struct spe_record r;

	spe_decoder_init(&d);
	spe_decoder_reset(&d, dump, sizeof(dump), 0);
	assert_int_equal(spe_decoder_next(&d, &r), 1);
	assert_int_equal(r.op, SPE_OP_LOAD);
	assert_int_equal(r.op_flags, 0);                       /* GP-REG */
	assert_true(r.va == 0xffff00000f293bc0ULL);             /* perf: VA 0xffff00000f293bc0 */
	assert_true(r.pa == 0xfb24ebc0ULL);                     /* perf: PA 0xfb24ebc0 ns=1 */
	assert_int_equal(r.events, SPE_EV_RETIRED | SPE_EV_L1D_ACCESS | SPE_EV_TLB_ACCESS);
	assert_true(r.pc == 0xffff00000815c400ULL);             /* bytes 0-6 0xff00000815c400 */
	assert_int_equal(r.pc_el, 3);                           /* perf: el3 ns=1 */
	assert_true(r.pc_ns);
	assert_true(r.ts == 39395093558ULL);                    /* perf: TS 39395093558 */
	assert_int_equal(r.lat_total, 0);
	assert_int_equal(r.lat_xlat, 0);
	assert_int_equal(r.has, SPE_HAS_OP | SPE_HAS_VA | SPE_HAS_PA | SPE_HAS_XLAT | SPE_HAS_EVENTS |
			 SPE_HAS_PC | SPE_HAS_LAT | SPE_HAS_TS);
	assert_int_equal(r.offset, 0);
	/* The dump cuts the next record inside its VA packet. */
	assert_int_equal(spe_decoder_next(&d, &r), 0);
	assert_int_equal(d.st.records, 1);
	assert_int_equal(d.st.loads, 1);
	assert_int_equal(d.st.truncated, 1);
	assert_int_equal(d.st.dropped_records, 1);
	assert_int_equal(d.st.bad_packets, 0);
}

static void test_user_load_store(void **state)
{
	struct buf b = { .n = 0 };
	struct spe_decoder d;
	struct spe_record r;

	/* A user load through a tagged pointer (TBI: tag 0x2a in bits 63:56). */
	ctx(&b, 1, 4242);                                  /* CONTEXTIDR_EL2 */
	op(&b, 1, 0x00);
	addr(&b, 0, pc_payload(0x401234, 0));
	addr(&b, 2, 0x2a007fff12345678ULL);
	counter(&b, 0, 120);
	counter(&b, 1, 7);
	counter(&b, 2, 33);
	events(&b, SPE_EV_RETIRED | SPE_EV_L1D_REFILL | SPE_EV_LLC_MISS, 1);   /* 2-byte form */
	source(&b, 0x0e, 0);                               /* Neoverse: DRAM */
	ts(&b, 1000);
	/* A store record closed by an end packet (no timestamps). */
	op(&b, 1, 0x01);
	addr(&b, 0, pc_payload(0x401240, 0));
	addr(&b, 2, 0x7fff00000010ULL);
	end(&b);

	spe_decoder_init(&d);
	spe_decoder_reset(&d, b.b, b.n, 4096);
	assert_int_equal(spe_decoder_next(&d, &r), 1);
	assert_int_equal(r.op, SPE_OP_LOAD);
	assert_true(r.has & SPE_HAS_CONTEXT);
	assert_int_equal(r.context, 4242);
	assert_int_equal(r.context_el, 2);
	assert_true(r.pc == 0x401234);
	assert_int_equal(r.pc_el, 0);
	assert_true(r.va == 0x7fff12345678ULL);            /* tag dropped */
	assert_int_equal(r.lat_total, 120);
	assert_int_equal(r.lat_issue, 7);
	assert_int_equal(r.lat_xlat, 33);
	assert_int_equal(r.events, SPE_EV_RETIRED | SPE_EV_L1D_REFILL | SPE_EV_LLC_MISS);
	assert_int_equal(r.data_source, 0x0e);
	assert_int_equal(r.ts, 1000);
	assert_int_equal(r.size, 0);                       /* SPE does not report it */
	assert_int_equal(r.offset, 4096);

	assert_int_equal(spe_decoder_next(&d, &r), 1);
	assert_int_equal(r.op, SPE_OP_STORE);
	assert_false(r.has & SPE_HAS_TS);
	assert_false(r.has & SPE_HAS_CONTEXT);
	assert_true(r.va == 0x7fff00000010ULL);
	assert_int_equal(spe_decoder_next(&d, &r), 0);
	assert_int_equal(d.st.records, 2);
	assert_int_equal(d.st.loads, 1);
	assert_int_equal(d.st.stores, 1);
	assert_int_equal(d.st.truncated, 0);
	assert_int_equal(d.st.dropped_records, 0);
}

/* Operation type subclasses: one record each, checked in order. */
static void test_op_subclasses(void **state)
{
	static const struct { unsigned cls; uint8_t v; enum spe_op op; uint32_t flags; uint16_t evl; } c[] = {
		{ 1, 0x06, SPE_OP_LOAD, SPE_OPF_ATOMIC, 0 },            /* LD AT */
		{ 1, 0x07, SPE_OP_STORE, SPE_OPF_ATOMIC, 0 },           /* ST AT */
		{ 1, 0x0a, SPE_OP_LOAD, SPE_OPF_EXCL, 0 },              /* LDXR */
		{ 1, 0x13, SPE_OP_STORE, SPE_OPF_ACQREL, 0 },           /* STLR */
		{ 1, 0x04, SPE_OP_LOAD, SPE_OPF_SIMD_FP, 0 },
		{ 1, 0x28, SPE_OP_LOAD, SPE_OPF_SVE, 128 },             /* SVE, EVL 32 << 2 */
		{ 1, 0xad, SPE_OP_STORE, SPE_OPF_SVE | SPE_OPF_SVE_SG | SPE_OPF_SVE_PRED, 128 },
		{ 1, 0x78, SPE_OP_LOAD, SPE_OPF_SVE, 4096 },            /* EVL field 7 */
		{ 2, 0x01, SPE_OP_BRANCH, 0, 0 },                       /* conditional branch */
		{ 0, 0x00, SPE_OP_OTHER, 0, 0 },
		{ 3, 0x00, SPE_OP_OTHER, 0, 0 },                        /* reserved class */
	};
	size_t n = sizeof(c) / sizeof(c[0]);
	struct buf b = { .n = 0 };
	struct spe_decoder d;
	struct spe_record r;

	for (size_t i = 0; i < n; i++) {
		op(&b, c[i].cls, c[i].v);
		addr(&b, 2, 0x1000 + i);
		end(&b);
	}
	spe_decoder_init(&d);
	spe_decoder_reset(&d, b.b, b.n, 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(spe_decoder_next(&d, &r), 1);
		assert_int_equal(r.op, c[i].op);
		assert_int_equal(r.op_flags, c[i].flags);
		assert_int_equal(r.sve_evl_bits, c[i].evl);
		assert_int_equal(r.op_class, c[i].cls);
		assert_true(r.va == 0x1000 + i);
	}
	assert_int_equal(spe_decoder_next(&d, &r), 0);
	assert_int_equal(d.st.unknown_index, 1);                    /* class 3 */
	assert_int_equal(d.st.loads + d.st.stores, 8);
	assert_int_equal(d.st.other_ops, 3);
}

/* Extended headers (5-bit index), alignment packets, padding, other address indexes. */
static void test_extended_and_padding(void **state)
{
	struct spe_packet p;
	struct buf b = { .n = 0 };
	struct spe_decoder d;
	struct spe_record r;

	byte(&b, 0x00);                           /* padding between records */
	byte(&b, 0x00);
	op(&b, 1, 0x00);
	byte(&b, 0x20); byte(&b, 0xb2); le(&b, 0x5000, 8);       /* extended VA, index 0:2 */
	byte(&b, 0x21); byte(&b, 0x98); le(&b, 9, 2);           /* extended counter index 8 */
	addr(&b, 1, pc_payload(0x402000, 0));                     /* branch target */
	addr(&b, 4, pc_payload(0x403000, 0));                     /* previous branch target */
	byte(&b, 0x22); byte(&b, 0xb7); le(&b, 1, 8);            /* address index 0x17: unknown */
	end(&b);
	assert_int_equal(b.n, 47);
	/* Align to 4 from 47: one byte is too few for its own header, so on to 52. */
	byte(&b, 0x21); byte(&b, 0x00); byte(&b, 0); byte(&b, 0); byte(&b, 0);
	op(&b, 1, 0x01);                          /* at 52 */
	addr(&b, 2, 0x6000);
	end(&b);

	assert_int_equal(spe_packet_decode(b.b + 47, b.n - 47, 47, &p), 5);
	assert_int_equal(p.type, SPE_PKT_ALIGN);
	assert_int_equal(spe_packet_decode(b.b + 47, b.n - 47, 48, &p), 4);   /* at a boundary: a full step */
	assert_int_equal(spe_packet_decode(b.b + 47, b.n - 47, 46, &p), 2);
	assert_int_equal(spe_packet_decode(b.b + 4, b.n - 4, 4, &p), 10);
	assert_int_equal(p.type, SPE_PKT_ADDRESS);
	assert_int_equal(p.index, 2);
	assert_int_equal(p.payload_len, 8);

	spe_decoder_init(&d);
	spe_decoder_reset(&d, b.b, b.n, 0);
	assert_int_equal(spe_decoder_next(&d, &r), 1);
	assert_true(r.va == 0x5000);
	assert_true(r.branch_target == 0x402000);
	assert_int_equal(r.offset, 2);
	assert_int_equal(spe_decoder_next(&d, &r), 1);
	assert_int_equal(r.op, SPE_OP_STORE);
	assert_true(r.va == 0x6000);
	assert_int_equal(r.offset, 52);
	assert_int_equal(spe_decoder_next(&d, &r), 0);
	assert_int_equal(d.st.unknown_index, 2);  /* counter 8, address 0x17 */
	assert_int_equal(d.st.pad_bytes, 7);
	assert_int_equal(d.st.bad_packets, 0);
}

static void test_packet_lengths(void **state)
{
	struct spe_packet p;
	uint8_t b[16];

	memset(b, 0, sizeof(b));
	/* Events and data source in all four sizes. */
	for (unsigned sz = 0; sz < 4; sz++) {
		b[0] = (uint8_t)(0x42 | sz << 4);
		assert_int_equal(spe_packet_decode(b, sizeof(b), 0, &p), 1 + (1 << sz));
		assert_int_equal(p.type, SPE_PKT_EVENTS);
		b[0] = (uint8_t)(0x43 | sz << 4);
		assert_int_equal(spe_packet_decode(b, sizeof(b), 0, &p), 1 + (1 << sz));
		assert_int_equal(p.type, SPE_PKT_DATA_SOURCE);
		/* One byte short of the payload: truncated, never a read past len. */
		assert_int_equal(spe_packet_decode(b, 1u << sz, 0, &p), 0);
	}
	b[0] = 0x71;
	assert_int_equal(spe_packet_decode(b, 9, 0, &p), 9);
	assert_int_equal(spe_packet_decode(b, 8, 0, &p), 0);
	b[0] = 0x65;
	assert_int_equal(spe_packet_decode(b, 5, 0, &p), 5);
	assert_int_equal(p.type, SPE_PKT_CONTEXT);
	assert_int_equal(p.index, 1);
	b[0] = 0x20;                              /* an extended header needs its 2nd byte */
	assert_int_equal(spe_packet_decode(b, 1, 0, &p), 0);
	assert_int_equal(spe_packet_decode(b, 0, 0, &p), 0);
	/* Header bytes that are no packet. */
	static const uint8_t bad[] = { 0x02, 0x41, 0x51, 0x61, 0x80, 0xff, 0x30, 0x18 };
	for (size_t i = 0; i < sizeof(bad); i++) {
		b[0] = bad[i];
		assert_int_equal(spe_packet_decode(b, sizeof(b), 0, &p), -EBADMSG);
	}
	b[0] = 0x20;
	b[1] = 0x42;                              /* extended + a non-address/counter header */
	assert_int_equal(spe_packet_decode(b, sizeof(b), 0, &p), -EBADMSG);
}

static void one_record(struct buf *b, uint64_t va)
{
	op(b, 1, 0x00);
	addr(b, 2, va);
	ts(b, va);
}

static void test_resync(void **state)
{
	struct buf b = { .n = 0 };
	struct spe_decoder d;
	struct spe_record r;

	one_record(&b, 0x1000);
	op(&b, 1, 0x00);                          /* a record with an unknown packet inside */
	byte(&b, 0xff);
	addr(&b, 2, 0x2000);
	ts(&b, 0x2000);
	one_record(&b, 0x3000);
	byte(&b, 0x02);                           /* garbage between records */
	one_record(&b, 0x4000);                   /* ... takes the next record with it */
	one_record(&b, 0x5000);
	for (int i = 0; i < SPE_RECORD_MAX_PACKETS + 1; i++)   /* an endless "record" */
		events(&b, 1, 0);
	one_record(&b, 0x6000);
	one_record(&b, 0x7000);

	spe_decoder_init(&d);
	spe_decoder_reset(&d, b.b, b.n, 0);
	uint64_t seen[8];
	int n = 0;
	while (spe_decoder_next(&d, &r) == 1) {
		assert_true(n < 8);
		seen[n++] = r.va;
	}
	assert_int_equal(n, 4);
	assert_true(seen[0] == 0x1000);
	assert_true(seen[1] == 0x3000);
	assert_true(seen[2] == 0x5000);
	assert_true(seen[3] == 0x7000);
	assert_int_equal(d.st.bad_packets, 2);
	/* 0x2000 (bad packet), 0x4000 (after garbage), the endless one, 0x6000 (resync) */
	assert_int_equal(d.st.dropped_records, 4);
	assert_int_equal(d.st.records, 4);

	/* Truncation at every length: never a crash, never a record from a cut buffer. */
	for (size_t len = 0; len < 30; len++) {
		struct spe_decoder d2;
		spe_decoder_init(&d2);
		spe_decoder_reset(&d2, b.b, len, 0);
		int got = 0;
		while (spe_decoder_next(&d2, &r) == 1)
			got++;
		assert_int_equal(got, len >= 20 ? 1 : 0);    /* the first record is 20 bytes */
	}
	spe_decoder_reset(&d, NULL, 100, 0);
	assert_int_equal(spe_decoder_next(&d, &r), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_record),
		cmocka_unit_test(test_user_load_store),
		cmocka_unit_test(test_op_subclasses),
		cmocka_unit_test(test_extended_and_padding),
		cmocka_unit_test(test_packet_lengths),
		cmocka_unit_test(test_resync),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
