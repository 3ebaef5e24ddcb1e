/* compiler_feedback/memprof_raw.c: the v4 MemInfoBlock layout (offsets as MIBEntryDef.inc
 * packs them, checked against a raw profile written by clang-19's runtime) and the binary
 * requirement checks with their one-line reasons; MIB-section entries with their
 * AccessHistogram counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "compiler_feedback/memprof_raw.h"
#include "store/mib.h"

static uint64_t rd(const uint8_t *p, int w)
{
	uint64_t v = 0;

	for (int i = w - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void test_mib_layout(void **state)
{
	struct mib m = { .alloc_count = 2, .total_size = 200, .min_size = 100, .max_size = 100,
			 .total_lifetime_ns = 4000000000ull, .min_lifetime_ns = 1000000000ull,
			 .max_lifetime_ns = 3000000000ull, .alloc_ts_ns = 5000000000ull,
			 .dealloc_ts_ns = 8000000000ull, .alloc_cpu = 3, .dealloc_cpu = 4,
			 .num_same_alloc_cpu = 1, .total_access_count = 400,
			 .min_access_count = 100, .max_access_count = 300 };
	uint8_t b[MEMPROF_RAW_MIB_SIZE];
	int widths = 0;

	for (int i = 0; i < MEMPROF_MIB_NFIELDS; i++)
		widths += memprof_mib_fields_def[i].width;
	assert_int_equal(widths + 4 + 8, MEMPROF_RAW_MIB_SIZE);
	memprof_raw_mib(b, &m, false, 0, 1000000000ull);
	assert_int_equal(rd(b + 0, 4), 2);           /* AllocCount */
	assert_int_equal(rd(b + 4, 8), 400);         /* TotalAccessCount */
	assert_int_equal(rd(b + 28, 8), 200);        /* TotalSize */
	assert_int_equal(rd(b + 36, 4), 100);        /* MinSize */
	assert_int_equal(rd(b + 44, 4), 4000);       /* AllocTimestamp, ms since base */
	assert_int_equal(rd(b + 48, 4), 7000);       /* DeallocTimestamp */
	assert_int_equal(rd(b + 52, 8), 4000);       /* TotalLifetime ms */
	assert_int_equal(rd(b + 60, 4), 1000);       /* MinLifetime */
	assert_int_equal(rd(b + 68, 4), 3);          /* AllocCpuId */
	assert_int_equal(rd(b + 84, 4), 1);          /* NumSameAllocCpu */
	/* density 400 / 200 / 2 s = 1 access/byte/s: TLAD / AllocCount / 100 == 1 */
	assert_int_equal(rd(b + 116, 8), 200);       /* TotalLifetimeAccessDensity */
	/* per object: at least 100 accesses / 100 B / 3 s, at most 300 / 100 B / 1 s (x 100),
	 * not the mean (100) twice */
	assert_int_equal(rd(b + 124, 4), 33);        /* MinLifetimeAccessDensity */
	assert_int_equal(rd(b + 128, 4), 300);       /* MaxLifetimeAccessDensity */
	assert_int_equal(rd(b + 108, 4), 100);       /* MinAccessDensity: 100 x 100 / 100 B */
	assert_int_equal(rd(b + 112, 4), 300);       /* MaxAccessDensity */
	assert_int_equal(rd(b + 132, 4), 0);         /* AccessHistogramSize */
	assert_int_equal(rd(b + 136, 8), 0);         /* AccessHistogram */
}

/* Two objects of one context with very different densities (issue 17): the Min/Max
 * density fields are the objects' own values, not bounds from the count, size and
 * lifetime extremes (which would give 10, 2000, 10 and 1000000). */
static void test_per_object_density_extremes(void **state)
{
	struct mib m = { 0 }, o;
	uint8_t b[MEMPROF_RAW_MIB_SIZE];

	/* A: 1000 accesses on 100 B for 1 s; B: 2000 on 10000 B for 2 ms. */
	mib_from_object(&o, 100, 0, 1000000000ull, 0, 0, 1000);
	mib_merge(&m, &o);
	mib_from_object(&o, 10000, 2000000000ull, 2002000000ull, 0, 0, 2000);
	mib_merge(&m, &o);
	assert_true(m.has_density);
	assert_int_equal(m.min_access_count, 1000);
	assert_int_equal(m.max_access_count, 2000);
	memprof_raw_mib(b, &m, false, 0, 0);
	assert_int_equal(rd(b + 12, 8), 1000);       /* MinAccessCount */
	assert_int_equal(rd(b + 20, 8), 2000);       /* MaxAccessCount */
	assert_int_equal(rd(b + 108, 4), 20);        /* MinAccessDensity: B, 0.2 x 100 */
	assert_int_equal(rd(b + 112, 4), 1000);      /* MaxAccessDensity: A, 10 x 100 */
	assert_int_equal(rd(b + 124, 4), 1000);      /* MinLifetimeAccessDensity: A, 10/s */
	assert_int_equal(rd(b + 128, 4), 10000);     /* MaxLifetimeAccessDensity: B, 100/s */
	/* Combined with an aggregate whose objects' densities are unknown (a row of an older
	 * store): only the bounds remain. */
	struct mib old = { .alloc_count = 1, .total_size = 100, .min_size = 100,
			   .max_size = 100, .total_lifetime_ns = 1000000000ull,
			   .min_lifetime_ns = 1000000000ull, .max_lifetime_ns = 1000000000ull,
			   .total_access_count = 1000, .min_access_count = 1000,
			   .max_access_count = 1000 };

	mib_combine(&m, &old);
	assert_false(m.has_density);
	memprof_raw_mib(b, &m, false, 0, 0);
	assert_int_equal(rd(b + 124, 4), 10);        /* 1000 / 10000 B / 1 s x 100 */
	assert_int_equal(rd(b + 128, 4), 1000000);   /* 2000 / 100 B / 2 ms x 100 */
}

/* Two MIB-section entries back to back, read as RawMemProfReader's readMemInfoBlocksV4
 * reads them: u64 id, sizeof(MemInfoBlock) bytes, then AccessHistogramSize u64 counts. */
static void test_mib_record_with_histogram(void **state)
{
	struct mib m = { .alloc_count = 1, .total_size = 256, .min_size = 256, .max_size = 256,
			 .total_access_count = 42 };
	uint64_t v[] = { 40, 0, 0, 2 };
	struct mib_hist h = { v, 4 };
	uint8_t buf[2 * (8 + MEMPROF_RAW_MIB_SIZE) + 4 * 8];
	size_t n = 0;

	assert_int_equal(memprof_raw_mib_record_size(&h), 8 + 144 + 32);
	assert_int_equal(memprof_raw_mib_record_size(NULL), 8 + 144);
	n += memprof_raw_mib_record(buf + n, 0x1111, &m, false, &h, 0);
	n += memprof_raw_mib_record(buf + n, 0x2222, &m, false, NULL, 0);
	assert_int_equal(n, sizeof(buf));
	assert_int_equal(n % 8, 0);                        /* sections stay 8-aligned */

	const uint8_t *p = buf;
	uint64_t ids[2], sizes[2];

	for (int i = 0; i < 2; i++) {
		ids[i] = rd(p, 8);
		p += 8;
		sizes[i] = rd(p + 132, 4);                 /* AccessHistogramSize */
		assert_int_equal(rd(p + 136, 8), 0);       /* AccessHistogram: no pointer */
		assert_int_equal(rd(p, 4), 1);             /* AllocCount */
		assert_int_equal(rd(p + 4, 8), 42);        /* TotalAccessCount */
		p += MEMPROF_RAW_MIB_SIZE;
		for (uint64_t k = 0; k < sizes[i]; k++, p += 8)
			assert_int_equal(rd(p, 8), v[k]);
	}
	assert_ptr_equal(p, buf + sizeof(buf));
	assert_int_equal(ids[0], 0x1111);
	assert_int_equal(ids[1], 0x2222);
	assert_int_equal(sizes[0], 4);
	assert_int_equal(sizes[1], 0);
}

static void test_check_binary(void **state)
{
	struct memprof_raw_seg seg;
	char err[512] = "";
	int r;

	r = memprof_raw_check_binary("/nonexistent/bin", NULL, &seg, err, sizeof(err));
	assert_true(r < 0);
	assert_non_null(strstr(err, "/nonexistent/bin"));
	/* This test executable: separate-code by default or no DWARF; either way a reason. */
	r = memprof_raw_check_binary("/proc/self/exe", NULL, &seg, err, sizeof(err));
	if (r < 0)
		assert_true(strstr(err, "noseparate-code") || strstr(err, "build-id") ||
			    strstr(err, "-gmlt"));
	else
		assert_true(seg.end > seg.start && seg.build_id_size > 0);
	r = memprof_raw_check_binary("/proc/self/exe", "00", &seg, err, sizeof(err));
	assert_true(r < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mib_layout),
		cmocka_unit_test(test_mib_record_with_histogram),
		cmocka_unit_test(test_per_object_density_extremes),
		cmocka_unit_test(test_check_binary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
