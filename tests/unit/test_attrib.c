/* attrib: a sample maps to the object live at its address at its time, whatever order
 * samples and alloc/free events come in; objects settle only behind the watermark;
 * classes from a maps fixture; MemProf's density arithmetic and hot/cold thresholds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "daemon/attrib.h"
#include "symbolizer/insn.h"

#define NOBJ 16
struct got {
	unsigned n;
	struct attrib_object o[NOBJ];
	uint64_t hist2[NOBJ];
	struct maps maps;
};

static void on_object(void *arg, const struct attrib_object *o)
{
	struct got *g = arg;

	assert_true(g->n < NOBJ);
	g->o[g->n] = *o;
	g->hist2[g->n] = o->hist && o->hist_len > 2 ? o->hist[2] : 0;
	g->o[g->n].hist = NULL;
	g->n++;
}

static struct access_sample smp(uint64_t addr, uint64_t t, uint64_t w)
{
	return (struct access_sample){ .tgid = 10, .start_ns = 5, .time_ns = t, .addr = addr,
				       .size = 4, .rw = 1, .weight = w };
}

static int c1, c2;   /* contexts: their addresses are the identities */

static void test_time_and_address(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .arg = &g };
	struct attrib *a;
	struct access_sample s;

	assert_int_equal(attrib_open(&a, &ops), 0);
	/* exact mode: an object is known only at its death; the sample came first */
	s = smp(0x1010, 150, 1000);
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(attrib_counts(a)->pending, 1);
	assert_int_equal(attrib_object(a, 10, 5, 0x1000, 0x100, &c1, 100, 200, 0, 1), 0);
	assert_int_equal(attrib_counts(a)->pending, 0);
	assert_int_equal(attrib_counts(a)->pending_resolved, 1);
	/* the same address reused by another context later */
	assert_int_equal(attrib_object(a, 10, 5, 0x1000, 0x40, &c2, 300, 400, 1, 1), 0);
	s = smp(0x1010, 350, 7);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	s = smp(0x1000 + 130, 160, 5);                /* offset 130: granule 2 of c1's object */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	s = smp(0x1050, 350, 1);                      /* past c2's 0x40 bytes, inside c1's range */
	assert_int_equal(attrib_sample(a, &s), -1);   /* c1 was dead at 350: held, then unknown */
	s = smp(0x1010, 250, 1);                      /* between the two lifetimes */
	assert_int_equal(attrib_sample(a, &s), -1);

	attrib_advance(a, 199);
	assert_int_equal(g.n, 0);                     /* free at 200 not yet behind the watermark */
	attrib_advance(a, 200);
	assert_int_equal(g.n, 1);
	assert_ptr_equal(g.o[0].ctx, &c1);
	assert_int_equal(g.o[0].samples, 2);
	assert_int_equal(g.o[0].est_accesses, 1005);
	assert_int_equal(g.o[0].hist_len, 4);
	assert_int_equal(g.hist2[0], 5);
	assert_int_equal(g.o[0].free_cpu, 1);
	attrib_advance(a, 100);                       /* watermarks never go back */
	s = smp(0x1010, 150, 1);                      /* a straggler: counted late */
	attrib_sample(a, &s);
	assert_int_equal(attrib_counts(a)->late, 1);
	attrib_finish(a, 1000);
	assert_int_equal(g.n, 2);
	assert_ptr_equal(g.o[1].ctx, &c2);
	assert_int_equal(g.o[1].samples, 1);
	assert_false(g.o[1].live_at_end);
	assert_int_equal(attrib_counts(a)->by_class[ATTRIB_UNKNOWN], 3);
	assert_int_equal(attrib_counts(a)->by_class[ATTRIB_HEAP], 3);
	assert_int_equal(attrib_counts(a)->pending, 0);
	assert_int_equal(attrib_counts(a)->objects_settled, 2);
	attrib_close(a);
}

/* Both ends known (sampled mode): a sample processed after the free still maps to the
 * object, and a sample taken before the alloc event was processed too. */
static void test_alloc_free(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .arg = &g };
	struct attrib *a;
	struct access_sample s;

	assert_int_equal(attrib_open(&a, &ops), 0);
	s = smp(0x5008, 120, 3);                      /* sample first, alloc event later */
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(attrib_alloc(a, 10, 5, 0x5000, 64, &c1, 110, 2), 0);
	assert_int_equal(attrib_counts(a)->pending_resolved, 1);
	assert_int_equal(attrib_free(a, 10, 5, 0x5000, 300, 3), 0);
	s = smp(0x5030, 290, 3);                      /* processed after the free: still c1 */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	assert_int_equal(attrib_free(a, 10, 5, 0x5000, 310, 3), 0);   /* double free */
	assert_int_equal(attrib_counts(a)->unmatched_free, 1);
	/* reuse without a free seen: the old one dies at the new alloc */
	assert_int_equal(attrib_alloc(a, 10, 5, 0x9000, 16, &c1, 400, 0), 0);
	assert_int_equal(attrib_alloc(a, 10, 5, 0x9000, 16, &c2, 500, 0), 0);
	assert_int_equal(attrib_counts(a)->unmatched_free, 2);
	s = smp(0x9004, 450, 1);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	s = smp(0x9004, 550, 1);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	/* another process's address space is separate */
	s = smp(0x9004, 550, 1);
	s.tgid = 11;
	assert_int_equal(attrib_sample(a, &s), -1);
	attrib_advance(a, 600);
	assert_int_equal(g.n, 2);                     /* 0x5000 and the first 0x9000 */
	assert_int_equal(g.o[0].samples + g.o[1].samples, 3);
	attrib_process_exit(a, 10, 5, 700);
	attrib_advance(a, 700);
	assert_int_equal(g.n, 3);
	assert_ptr_equal(g.o[2].ctx, &c2);
	assert_true(g.o[2].live_at_end);
	assert_int_equal(g.o[2].free_ns, 700);
	assert_int_equal(g.o[2].samples, 1);
	attrib_finish(a, 800);
	assert_int_equal(g.n, 3);
	attrib_close(a);
}

static const char maps_txt[] =
	"00400000-00401000 r-xp 00000000 08:01 100 /bin/app\n"
	"00600000-00601000 rw-p 00000000 08:01 100 /bin/app\n"
	"00601000-00700000 rw-p 00000000 00:00 0 \n"
	"01000000-02000000 rw-p 00000000 00:00 0 [heap]\n"
	"7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
	"7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n"
	"7f0000400000-7f0000401000 rw-s 00000000 00:05 7 /dev/shm/x\n"
	"7ffd00000000-7ffd00100000 rw-p 00000000 00:00 0 [stack]\n";

static void region(void *arg, uint32_t tgid, uint64_t start, uint64_t addr, uint64_t sp,
		   struct attrib_region *out)
{
	attrib_region_from_maps(&((struct got *)arg)->maps, addr, sp, out);
}

static const char *const bin = "buildid-app";
static const char *const hot = "hot_arr", *const cold = "cold_arr";
static int datasym(void *arg, const struct attrib_region *r, uint64_t addr,
		   struct attrib_datasym *out)
{
	if (strcmp(r->path, "/bin/app"))
		return -ENOENT;
	assert_int_equal(r->map_start, 0x600000);     /* .bss resolves through the file mapping */
	out->binary = bin;
	out->symbol = addr < 0x601000 ? hot : cold;
	out->section = addr < 0x601000 ? ".data" : ".bss";
	return 0;
}

static void test_classes(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .region = region, .datasym = datasym, .arg = &g };
	struct attrib *a;
	struct access_sample s;
	size_t n;

	assert_int_equal(maps_parse(&g.maps, maps_txt, sizeof(maps_txt) - 1, NULL), 0);
	assert_int_equal(attrib_open(&a, &ops), 0);
	s = smp(0x600010, 1, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STATIC);
	s = smp(0x600020, 1, 10);
	s.rw = 2;
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STATIC);
	s = smp(0x601100, 1, 10);                     /* .bss beyond the file */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STATIC);
	s = smp(0x1000100, 1, 10);                    /* [heap], no tracked object */
	assert_int_equal(attrib_sample(a, &s), -1);
	s = smp(0x7f0000000100, 1, 10);               /* anonymous mmap */
	assert_int_equal(attrib_sample(a, &s), -1);
	s = smp(0x7f00000fff00, 1, 10);               /* just below fs_base: TLS block */
	s.fs_base = 0x7f0000100000 - 64;
	assert_int_equal(attrib_sample(a, &s), ATTRIB_TLS);
	s = smp(0x7f0000001000, 1, 10);
	s.flags = INSN_F_TLS;                         /* fs:-relative instruction */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_TLS);
	s = smp(0x7ffd00000100, 1, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STACK);
	s = smp(0x7f0000200100, 1, 10);               /* a thread stack: the mapping holding sp */
	s.sp = 0x7f00002ff000;
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STACK);
	s = smp(0x1234, 1, 10);
	s.flags = INSN_F_STACK;                       /* implicit push/pop */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STACK);
	s = smp(0x7f0000400010, 1, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_FILE);
	s = smp(0x10, 1, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_UNKNOWN);
	/* a tracked object inside [heap] wins over the region (allocated after the held
	 * sample's time, so it does not claim it) */
	assert_int_equal(attrib_alloc(a, 10, 5, 0x1000000, 0x1000, &c1, 5, 0), 0);
	s = smp(0x1000010, 6, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);

	attrib_finish(a, 10);
	const struct attrib_counts *c = attrib_counts(a);
	assert_int_equal(c->by_class[ATTRIB_STATIC], 3);
	assert_int_equal(c->by_class[ATTRIB_HEAP_UNTRACKED], 1);
	assert_int_equal(c->by_class[ATTRIB_ANON], 1);
	assert_int_equal(c->by_class[ATTRIB_TLS], 2);
	assert_int_equal(c->by_class[ATTRIB_STACK], 3);
	assert_int_equal(c->by_class[ATTRIB_FILE], 1);
	assert_int_equal(c->by_class[ATTRIB_UNKNOWN], 1);
	assert_int_equal(c->by_class[ATTRIB_HEAP], 1);
	assert_int_equal(c->est_by_class[ATTRIB_STATIC], 30);
	uint64_t sum = 0;
	for (int i = 0; i < ATTRIB_CLASS_MAX; i++)
		sum += c->by_class[i];
	assert_int_equal(sum, c->samples);            /* every sample counted exactly once */

	const struct attrib_data_entry *d = attrib_data(a, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_ptr_equal(d[i].sym.binary, bin);
		if (d[i].sym.symbol == hot) {
			assert_int_equal(d[i].samples, 2);
			assert_int_equal(d[i].est_accesses, 20);
			assert_int_equal(d[i].reads, 1);
			assert_int_equal(d[i].writes, 1);
		} else {
			assert_ptr_equal(d[i].sym.symbol, cold);
			assert_string_equal(d[i].sym.section, ".bss");
			assert_int_equal(d[i].samples, 1);
		}
	}
	assert_string_equal(attrib_class_name(ATTRIB_HEAP_UNTRACKED), "heap_untracked");
	attrib_close(a);
	maps_free(&g.maps);
}

static void test_density(void **state)
{
	struct attrib_thresholds t;

	/* MemProf: accesses*100/size, then *1000/lifetime_ms */
	assert_int_equal(attrib_access_density_x100(1000, 100), 1000);
	assert_int_equal(attrib_lifetime_access_density_x100(1000, 100, 2000000000ULL), 500);
	assert_int_equal(attrib_lifetime_access_density_x100(100, 100, 0), 100000);  /* min 1 ms */
	assert_int_equal(attrib_access_density_x100(1, 0), 0);
	assert_int_equal(attrib_access_density_x100(UINT64_MAX, 1), UINT32_MAX);
	assert_true(attrib_density(1000, 100, 2000000000ULL) == 5.0);
	assert_true(attrib_density(1, 1, 0) == 1000.0);

	attrib_thresholds_default(&t);
	assert_true(t.cold_density == 0.05 && t.hot_density == 1000.0);
	assert_int_equal(t.cold_min_lifetime_ns, 200000000000ULL);
	/* 2 objects, 300 s each, density 0.04 -> x100 = 4 per object */
	assert_int_equal(attrib_classify_context(&t, 8, 2, 600000000000ULL), ATTRIB_COLD);
	/* same density, 100 s average: short-lived is never cold */
	assert_int_equal(attrib_classify_context(&t, 8, 2, 200000000000ULL), ATTRIB_NOTCOLD);
	/* exactly 0.05: not below the threshold */
	assert_int_equal(attrib_classify_context(&t, 10, 2, 600000000000ULL), ATTRIB_NOTCOLD);
	/* hot: > 1000 per byte per second */
	assert_int_equal(attrib_classify_context(&t, 2 * 100100, 2, 1000000), ATTRIB_HOT);
	assert_int_equal(attrib_classify_context(&t, 2 * 100000, 2, 1000000), ATTRIB_NOTCOLD);
	assert_int_equal(attrib_classify_context(&t, 0, 0, 0), ATTRIB_NOTCOLD);
	/* per-object arithmetic feeds the context rule */
	uint32_t d = attrib_lifetime_access_density_x100(40, 1000, 1000000000ULL);   /* 0.04 */
	assert_int_equal(d, 4);
	t.cold_min_lifetime_ns = 0;                   /* configurable */
	assert_int_equal(attrib_classify_context(&t, d, 1, 1000000000ULL), ATTRIB_COLD);

	attrib_thresholds_default(&t);
	assert_int_equal(attrib_classify_data(&t, 0, 64, 1000000000ULL), ATTRIB_COLD);
	assert_int_equal(attrib_classify_data(&t, 64 * 2000, 64, 1000000000ULL), ATTRIB_HOT);
	assert_int_equal(attrib_classify_data(&t, 64 * 10, 64, 1000000000ULL), ATTRIB_NOTCOLD);
	assert_int_equal(attrib_classify_data(&t, 1, 1 << 20, 1000000000ULL), ATTRIB_COLD);
	assert_string_equal(attrib_hotness_name(ATTRIB_HOT), "hot");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_and_address),
		cmocka_unit_test(test_alloc_free),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_density),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
