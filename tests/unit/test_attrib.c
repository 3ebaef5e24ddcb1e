/* attrib: a sample maps to the object live at its address at its time, whatever order
 * samples and alloc/free events come in; objects settle only behind the watermark;
 * classes from a maps fixture; MemProf's density arithmetic and hot/cold thresholds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/attrib/attrib.h"
#include "symbolizer/insn.h"

#define NOBJ 16
#define W1 ATTRIB_WEIGHT_ONE
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
	s.weight_err = 40;                            /* its stall factor's error: kept */
	s.bytes = 9000;                               /* bytes the source gave: kept */
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(attrib_counts(a)->pending, 1);
	/* with 30 ns of exact mode's probe time in its life, handed on with the object */
	assert_int_equal(attrib_object(a, 10, 5, 0x1000, 0x100, &c1, 100, 200, 0, 1, 30), 0);
	assert_int_equal(attrib_counts(a)->pending, 0);
	assert_int_equal(attrib_counts(a)->pending_resolved, 1);
	/* the same address reused by another context later */
	assert_int_equal(attrib_object(a, 10, 5, 0x1000, 0x40, &c2, 300, 400, 1, 1, 0), 0);
	s = smp(0x1010, 350, 7);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	s = smp(0x1000 + 130, 160, 5);                /* offset 130: granule 2 of c1's object */
	s.weight_err = 2;
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
	assert_int_equal(g.o[0].est_err, 40);        /* sqrt(40^2 + 2^2): held and direct alike */
	assert_int_equal(g.o[0].est_bytes, 9000 + 5 * 4);   /* given; else weight x 4-byte size */
	assert_int_equal(g.o[0].hist_len, 4);
	assert_int_equal(g.hist2[0], 5);
	assert_int_equal(g.o[0].free_cpu, 1);
	assert_int_equal(g.o[0].probe_ns, 30);
	attrib_advance(a, 100);                       /* watermarks never go back */
	s = smp(0x1010, 150, 1);                      /* a straggler: counted late */
	attrib_sample(a, &s);
	assert_int_equal(attrib_counts(a)->late, 1);
	attrib_finish(a, 1000);
	assert_int_equal(g.n, 2);
	assert_ptr_equal(g.o[1].ctx, &c2);
	assert_int_equal(g.o[1].samples, 1);
	assert_false(g.o[1].live_at_end);
	assert_int_equal(g.o[1].probe_ns, 0);
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
	assert_int_equal(attrib_alloc(a, 10, 5, 0x5000, 64, &c1, 110, 2, W1), 0);
	assert_int_equal(attrib_counts(a)->pending_resolved, 1);
	assert_int_equal(attrib_free(a, 10, 5, 0x5000, 300, 3), 0);
	s = smp(0x5030, 290, 3);                      /* processed after the free: still c1 */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	assert_int_equal(attrib_free(a, 10, 5, 0x5000, 310, 3), -ENOENT);   /* double free */
	assert_int_equal(attrib_counts(a)->unmatched_free, 1);
	/* reuse without a free seen: the old one dies at the new alloc */
	assert_int_equal(attrib_alloc(a, 10, 5, 0x9000, 16, &c1, 400, 0, W1), 0);
	assert_int_equal(attrib_alloc(a, 10, 5, 0x9000, 16, &c2, 500, 0, W1), 0);
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
	if (addr >= 0x680000)
		return -ERANGE;                        /* past the image: merged onto the .bss */
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
	s = smp(0x690000, 1, 10);                     /* anon merged onto the .bss */
	assert_int_equal(attrib_sample(a, &s), -1);
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
	assert_int_equal(attrib_alloc(a, 10, 5, 0x1000000, 0x1000, &c1, 5, 0, W1), 0);
	s = smp(0x1000010, 6, 10);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);

	attrib_finish(a, 10);
	const struct attrib_counts *c = attrib_counts(a);
	assert_int_equal(c->by_class[ATTRIB_STATIC], 3);
	assert_int_equal(c->by_class[ATTRIB_HEAP_UNTRACKED], 1);
	assert_int_equal(c->by_class[ATTRIB_ANON], 2);
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
	/* MemProf: accesses*100/size, then *1000/lifetime_ms */
	assert_int_equal(attrib_access_density_x100(1000, 100), 1000);
	assert_int_equal(attrib_lifetime_access_density_x100(1000, 100, 2000000000ULL), 500);
	assert_int_equal(attrib_lifetime_access_density_x100(100, 100, 0), 100000);  /* min 1 ms */
	assert_int_equal(attrib_access_density_x100(1, 0), 0);
	assert_int_equal(attrib_access_density_x100(UINT64_MAX, 1), UINT32_MAX);
}

/* Sources that see both ends, with the allocation watermark: a sample waits until every
 * alloc and free before it has come, so one taken after a free whose event is still on
 * its way is not credited to the dead object; objects settle behind both watermarks. */
static void test_alloc_watermark(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .region = region, .arg = &g,
				  .objects_sampled = true };
	struct attrib *a;
	struct access_sample s;
	const struct attrib_counts *c;

	assert_int_equal(maps_parse(&g.maps, maps_txt, sizeof(maps_txt) - 1, NULL), 0);
	assert_int_equal(attrib_open(&a, &ops), 0);
	c = attrib_counts(a);
	attrib_alloc_watermark(a, 100);
	s = smp(0x1000010, 150, 1);                   /* ahead of the allocation events */
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(c->deferred, 1);
	assert_int_equal(attrib_alloc(a, 10, 5, 0x1000000, 64, &c1, 120, 0, 3 * W1), 0);
	s = smp(0x1000020, 260, 1);                   /* after the free, before its event */
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(attrib_free(a, 10, 5, 0x1000000, 250, 1), 0);
	attrib_advance(a, 1000);                      /* samples far ahead, allocations not */
	assert_int_equal(g.n, 0);
	attrib_alloc_watermark(a, 200);               /* 150 is behind: credited; 260 waits */
	assert_int_equal(c->deferred, 1);
	assert_int_equal(c->by_class[ATTRIB_HEAP], 1);
	assert_int_equal(g.n, 0);                     /* free at 250 not behind 200 */
	attrib_alloc_watermark(a, 300);
	assert_int_equal(c->deferred, 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.o[0].samples, 1);
	assert_int_equal(g.o[0].weight_q16, 3 * W1);
	/* the index is complete at 260: the [heap] miss is counted at once, never held */
	assert_int_equal(c->by_class[ATTRIB_HEAP_UNSAMPLED], 1);
	assert_int_equal(c->pending, 0);
	s = smp(0x7f0000000100, 290, 1);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_ANON);
	s = smp(0x1234, 5000, 1);                     /* stack and TLS never wait */
	s.flags = INSN_F_STACK;
	assert_int_equal(attrib_sample(a, &s), ATTRIB_STACK);
	assert_int_equal(attrib_free(a, 10, 5, 0x1000040, 310, 1), -ENOENT);
	assert_int_equal(attrib_free(a, 99, 5, 0x1000040, 310, 1), -ENOENT);  /* unknown process */
	/* process exit: its live objects end there, once both watermarks pass */
	assert_int_equal(attrib_alloc(a, 10, 5, 0x1000100, 32, &c2, 400, 0, W1), 0);
	s = smp(0x1000104, 450, 1);
	assert_int_equal(attrib_sample(a, &s), -1);
	attrib_process_exit(a, 10, 5, 500);
	attrib_alloc_watermark(a, 600);
	assert_int_equal(g.n, 2);
	assert_true(g.o[1].live_at_end);
	assert_int_equal(g.o[1].free_ns, 500);
	assert_int_equal(g.o[1].samples, 1);
	assert_string_equal(attrib_class_name(ATTRIB_HEAP_UNSAMPLED), "heap_unsampled");
	attrib_finish(a, 700);
	uint64_t sum = 0;
	for (int i = 0; i < ATTRIB_CLASS_MAX; i++)
		sum += c->by_class[i];
	assert_int_equal(sum, c->samples);
	assert_int_equal(c->objects, 0);
	attrib_close(a);
	maps_free(&g.maps);
}

/* Exact mode holds heap misses for objects reported later; once the process exited (and
 * its last objects were given), nothing can claim them: they go to their class, and so
 * does a straggler that arrives after the exit. */
static void test_exit_releases(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .region = region, .arg = &g };
	struct attrib *a;
	struct access_sample s;
	const struct attrib_counts *c;

	assert_int_equal(maps_parse(&g.maps, maps_txt, sizeof(maps_txt) - 1, NULL), 0);
	assert_int_equal(attrib_open(&a, &ops), 0);
	c = attrib_counts(a);
	s = smp(0x1000100, 10, 1);
	assert_int_equal(attrib_sample(a, &s), -1);
	s = smp(0x1000200, 12, 1);
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_int_equal(attrib_object(a, 10, 5, 0x1000200, 16, &c1, 11, 30, 0, 0, 0), 0);
	assert_int_equal(c->pending, 1);
	attrib_process_exit(a, 10, 5, 40);
	assert_int_equal(c->pending, 0);
	assert_int_equal(c->by_class[ATTRIB_HEAP_UNTRACKED], 1);
	s = smp(0x1000300, 35, 1);                    /* late, after the exit */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP_UNTRACKED);
	s = smp(0x1000204, 20, 1);                    /* still finds the unsettled object */
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	attrib_advance(a, 50);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.o[0].samples, 2);
	attrib_close(a);
	maps_free(&g.maps);
}

/* ---- scale and arrival order, checked against a simulated allocator's own ledger ---- */

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

struct sobj {
	uint64_t addr, size, alloc_ns, free_ns;
	uint64_t want;                /* samples taken inside it while it was live */
	uint64_t got;                 /* samples it settled with */
	bool settled;
};

enum { SE_FREE, SE_ALLOC, SE_OBJECT, SE_SAMPLE };   /* tie order: a free before the next alloc */
struct sev {
	uint64_t arrive, t, addr;
	uint32_t kind, idx;
};

struct sim {
	struct sobj *o;
	size_t no, misses, nsamples;
	struct sev *ev;
	size_t nev;
	uint64_t bound;               /* settles must lie behind it */
	size_t settled;
};

static void sim_object(void *arg, const struct attrib_object *ob)
{
	struct sim *s = arg;
	struct sobj *o = ob->ctx;

	assert_false(o->settled);
	assert_true(ob->free_ns <= s->bound);
	assert_int_equal(ob->addr, o->addr);
	assert_int_equal(ob->size, o->size);
	assert_int_equal(ob->alloc_ns, o->alloc_ns);
	assert_int_equal(ob->free_ns, o->free_ns);
	o->got = ob->samples;
	o->settled = true;
	s->settled++;
}

static int sev_cmp(const void *x, const void *y)
{
	const struct sev *a = x, *b = y;

	if (a->arrive != b->arrive)
		return a->arrive < b->arrive ? -1 : 1;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (int)a->kind - (int)b->kind;
}

static void push(struct sim *s, struct sev e)
{
	s->ev[s->nev++] = e;
}

/* slots of 4 KiB, each reused by per_slot objects one after another (sometimes the next
 * one allocated at the very time of the previous free), samples inside objects and in
 * the holes (past an object's end, or between two lifetimes). Allocation events arrive
 * `lag` after their time, in order; samples up to `jitter` after theirs, in any order. */
static void sim_build(struct sim *s, unsigned slots, unsigned per_slot, bool both_ends,
		      uint64_t lag, uint64_t jitter)
{
	size_t max_ev = (size_t)slots * per_slot * 6;

	memset(s, 0, sizeof(*s));
	s->o = calloc((size_t)slots * per_slot, sizeof(*s->o));
	s->ev = calloc(max_ev, sizeof(*s->ev));
	assert_non_null(s->o);
	assert_non_null(s->ev);
	for (unsigned k = 0; k < slots; k++) {
		uint64_t base = 0x10000000 + (uint64_t)k * 4096, t = rnd() % 1000;
		for (unsigned j = 0; j < per_slot; j++) {
			struct sobj *o = &s->o[s->no];
			uint32_t idx = (uint32_t)s->no++;
			o->addr = base;
			o->size = 1 + rnd() % 4096;
			o->alloc_ns = t;
			o->free_ns = t + 1 + rnd() % 5000;
			t = o->free_ns + rnd() % 3;
			if (both_ends) {
				push(s, (struct sev){ o->alloc_ns + lag, o->alloc_ns, 0, SE_ALLOC, idx });
				push(s, (struct sev){ o->free_ns + lag, o->free_ns, 0, SE_FREE, idx });
			} else {
				push(s, (struct sev){ o->free_ns + lag, o->free_ns, 0, SE_OBJECT, idx });
			}
			for (unsigned n = rnd() % 3; n; n--) {
				uint64_t st = o->alloc_ns + rnd() % (o->free_ns - o->alloc_ns);
				push(s, (struct sev){ st + rnd() % jitter, st, o->addr + rnd() % o->size,
						      SE_SAMPLE, idx });
				o->want++;
				s->nsamples++;
			}
			if (rnd() % 4 == 0 && o->size < 4096) {     /* past its end */
				uint64_t st = o->alloc_ns + rnd() % (o->free_ns - o->alloc_ns);
				push(s, (struct sev){ st + rnd() % jitter, st,
						      o->addr + o->size + rnd() % (4096 - o->size),
						      SE_SAMPLE, UINT32_MAX });
				s->misses++;
				s->nsamples++;
			}
			if (t > o->free_ns && rnd() % 2) {          /* between two lifetimes */
				uint64_t st = o->free_ns + rnd() % (t - o->free_ns);
				push(s, (struct sev){ st + rnd() % jitter, st, o->addr, SE_SAMPLE,
						      UINT32_MAX });
				s->misses++;
				s->nsamples++;
			}
		}
	}
	assert_true(s->nev <= max_ev);
	qsort(s->ev, s->nev, sizeof(*s->ev), sev_cmp);
}

static void sim_run(bool both_ends, uint64_t lag, uint64_t jitter)
{
	struct sim s;
	struct attrib_ops ops = { .object = sim_object, .arg = &s };
	struct attrib *a;
	uint64_t *min_sample, *min_event;   /* times of what has not arrived yet, from i on */

	sim_build(&s, 1024, 48, both_ends, lag, jitter);
	min_sample = malloc((s.nev + 1) * sizeof(uint64_t));
	min_event = malloc((s.nev + 1) * sizeof(uint64_t));
	assert_non_null(min_sample);
	assert_non_null(min_event);
	min_sample[s.nev] = min_event[s.nev] = UINT64_MAX;
	for (size_t i = s.nev; i-- > 0;) {
		bool smpl = s.ev[i].kind == SE_SAMPLE;
		min_sample[i] = smpl && s.ev[i].t < min_sample[i + 1] ? s.ev[i].t : min_sample[i + 1];
		min_event[i] = !smpl && s.ev[i].t < min_event[i + 1] ? s.ev[i].t : min_event[i + 1];
	}
	assert_int_equal(attrib_open(&a, &ops), 0);
	if (both_ends)
		attrib_alloc_watermark(a, 0);
	for (size_t i = 0, next_wm = 1; i < s.nev; i++) {
		const struct sev *e = &s.ev[i];
		struct sobj *o = e->idx == UINT32_MAX ? NULL : &s.o[e->idx];
		switch (e->kind) {
		case SE_ALLOC:
			assert_int_equal(attrib_alloc(a, 10, 5, o->addr, o->size, o, o->alloc_ns, 0, W1), 0);
			break;
		case SE_FREE:
			assert_int_equal(attrib_free(a, 10, 5, o->addr, o->free_ns, 0), 0);
			break;
		case SE_OBJECT:
			assert_int_equal(attrib_object(a, 10, 5, o->addr, o->size, o, o->alloc_ns,
						       o->free_ns, 0, 0, 0), 0);
			break;
		default: {
			struct access_sample smpl = smp(e->addr, e->t, 1);
			attrib_sample(a, &smpl);
		}
		}
		if (i + 1 == next_wm) {   /* as the recorder: every few records, both watermarks */
			uint64_t ws = min_sample[i + 1], wa = min_event[i + 1];
			s.bound = both_ends && wa < ws ? wa : ws;
			attrib_advance(a, ws);
			if (both_ends)
				attrib_alloc_watermark(a, wa);
			next_wm += 1 + rnd() % 64;
		}
	}
	s.bound = UINT64_MAX;
	attrib_finish(a, UINT64_MAX - 1);
	const struct attrib_counts *c = attrib_counts(a);
	uint64_t hits = 0;
	assert_int_equal(s.settled, s.no);
	for (size_t i = 0; i < s.no; i++) {
		if (s.o[i].got != s.o[i].want)
			fail_msg("object %zu [%#lx+%lu, %lu..%lu): %lu samples, want %lu", i,
				 (unsigned long)s.o[i].addr, (unsigned long)s.o[i].size,
				 (unsigned long)s.o[i].alloc_ns, (unsigned long)s.o[i].free_ns,
				 (unsigned long)s.o[i].got, (unsigned long)s.o[i].want);
		hits += s.o[i].want;
	}
	assert_int_equal(c->samples, s.nsamples);
	assert_int_equal(c->by_class[ATTRIB_HEAP], hits);
	assert_int_equal(c->by_class[ATTRIB_UNKNOWN], s.misses);
	assert_int_equal(c->pending, 0);
	assert_int_equal(c->deferred, 0);
	assert_int_equal(c->objects, 0);
	assert_int_equal(c->objects_settled, s.no);
	assert_int_equal(c->unmatched_free, 0);
	attrib_close(a);
	free(min_sample);
	free(min_event);
	free(s.ev);
	free(s.o);
}

/* ~50k objects; samples and deaths out of order (exact mode: objects known at death). */
static void test_scale_exact(void **state)
{
	sim_run(false, 3000, 4000);
	sim_run(false, 0, 1);
}

/* The same with both ends seen: samples overtake allocs and frees and vice versa. */
static void test_scale_both_ends(void **state)
{
	sim_run(true, 3000, 4000);
	sim_run(true, 0, 5000);
	sim_run(true, 5000, 1);
}

/* 200k objects indexed at once, inserted in random address order: a sorted array paid a
 * memmove per insert (quadratic; hours here); the tree pays O(log n). */
static void test_many_live(void **state)
{
	enum { N = 200000 };
	struct sim s = { 0 };
	struct attrib_ops ops = { .object = sim_object, .arg = &s };
	uint32_t *perm = malloc(N * sizeof(*perm));
	struct attrib *a;

	s.o = calloc(N, sizeof(*s.o));
	s.no = N;
	assert_non_null(perm);
	assert_non_null(s.o);
	for (uint32_t i = 0; i < N; i++)
		perm[i] = i;
	for (uint32_t i = N - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rnd() % (i + 1)), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int exact = 0; exact < 2; exact++) {
		assert_int_equal(attrib_open(&a, &ops), 0);
		s.settled = 0;
		s.bound = 0;
		if (!exact)
			attrib_alloc_watermark(a, 0);
		for (uint32_t i = 0; i < N; i++) {
			struct sobj *o = &s.o[i];
			*o = (struct sobj){ .addr = 0x40000000 + (uint64_t)perm[i] * 64, .size = 48,
					    .alloc_ns = 1000 + i, .free_ns = 2000000 + perm[i] };
			int r = exact ? attrib_object(a, 10, 5, o->addr, o->size, o, o->alloc_ns,
						      o->free_ns, 0, 0, 0)
				      : attrib_alloc(a, 10, 5, o->addr, o->size, o, o->alloc_ns, 0, W1);
			assert_int_equal(r, 0);
		}
		assert_int_equal(attrib_counts(a)->objects, N);
		if (!exact)
			attrib_alloc_watermark(a, 2000000);
		for (int k = 0; k < 50000; k++) {
			struct sobj *o = &s.o[rnd() % N];
			struct access_sample smpl = smp(o->addr + rnd() % o->size,
							o->alloc_ns + rnd() % (o->free_ns - o->alloc_ns), 1);
			if (!exact)
				smpl.time_ns = 1000 + N + rnd() % (2000000 - 1000 - N);
			if (smpl.time_ns >= o->alloc_ns && smpl.time_ns < o->free_ns) {
				assert_int_equal(attrib_sample(a, &smpl), ATTRIB_HEAP);
				o->want++;
			}
		}
		if (!exact)
			for (uint32_t i = 0; i < N; i++)
				assert_int_equal(attrib_free(a, 10, 5, s.o[perm[i]].addr,
							     s.o[perm[i]].free_ns, 0), 0);
		s.bound = 2000000 + N;
		attrib_advance(a, 2000000 + N);
		if (!exact)
			attrib_alloc_watermark(a, 2000000 + N);
		assert_int_equal(s.settled, N);
		for (uint32_t i = 0; i < N; i++) {
			assert_int_equal(s.o[i].got, s.o[i].want);
			s.o[i].want = 0;
		}
		assert_int_equal(attrib_counts(a)->objects, 0);
		attrib_close(a);
	}
	free(perm);
	free(s.o);
}

static void count_object(void *arg, const struct attrib_object *o)
{
	(void)o;
	(*(size_t *)arg)++;
}

/* The sampler's region hands the same slot out again and again: 200k objects allocated
 * and freed at one address before any settles. A free that stabbed the index for the
 * live object walked every unsettled one there (quadratic: minutes); the live hash finds
 * it at once, and each object still settles with its own lifetime. */
static void test_reused_address(void **state)
{
	enum { N = 200000 };
	size_t settled = 0;
	struct attrib_ops ops = { .object = count_object, .arg = &settled };
	struct attrib *a;

	assert_int_equal(attrib_open(&a, &ops), 0);
	attrib_alloc_watermark(a, 0);
	for (uint64_t i = 0; i < N; i++) {
		assert_int_equal(attrib_alloc(a, 10, 5, 0x7f0000001000, 4096, &c1, 10 + 2 * i, 0, W1), 0);
		assert_int_equal(attrib_free(a, 10, 5, 0x7f0000001000, 11 + 2 * i, 0), 0);
	}
	assert_int_equal(attrib_counts(a)->objects, N);
	assert_int_equal(attrib_counts(a)->unmatched_free, 0);
	/* A sample finds the one object live at its time among them. */
	struct access_sample s = smp(0x7f0000001010, 10 + 2 * 777, 1);
	attrib_advance(a, 10 + 2 * 777);
	attrib_alloc_watermark(a, UINT64_MAX);
	assert_int_equal(attrib_sample(a, &s), ATTRIB_HEAP);
	attrib_advance(a, UINT64_MAX);
	assert_int_equal(settled, N);
	attrib_close(a);
}

static bool gone_all(void *arg, uint32_t tgid, uint64_t start_ns)
{
	(void)arg; (void)tgid; (void)start_ns;
	return true;
}

static bool gone_none(void *arg, uint32_t tgid, uint64_t start_ns)
{
	(void)arg; (void)tgid; (void)start_ns;
	return false;
}

/* The daemon forgets exited processes: attribution holds a process while an object of it
 * is unsettled or a sample waits for one; a process that gone() rules out is dropped,
 * its held samples counted first, and nothing of a process gone() keeps is dropped. */
static void test_forget(void **state)
{
	struct got g = {0};
	struct attrib_ops ops = { .object = on_object, .region = region, .arg = &g };
	struct attrib *a;
	struct access_sample s;

	assert_int_equal(maps_parse(&g.maps, maps_txt, sizeof(maps_txt) - 1, NULL), 0);
	assert_int_equal(attrib_open(&a, &ops), 0);
	assert_false(attrib_holds(a, 10, 5));
	s = smp(0x1000100, 10, 1);                    /* held: exact mode knows objects late */
	assert_int_equal(attrib_sample(a, &s), -1);
	assert_true(attrib_holds(a, 10, 5));
	assert_false(attrib_holds(a, 10, 6));         /* another instance of the PID */
	assert_int_equal(attrib_forget_gone(a, gone_none, NULL), 0);
	assert_int_equal(attrib_object(a, 10, 5, 0x1000200, 16, &c1, 11, 30, 0, 0, 0), 0);
	attrib_process_exit(a, 10, 5, 40);            /* the held sample goes to its class */
	assert_true(attrib_holds(a, 10, 5));          /* the object is not settled yet */
	assert_int_equal(attrib_forget_gone(a, gone_all, NULL), 0);
	attrib_advance(a, 50);
	assert_int_equal(g.n, 1);
	assert_false(attrib_holds(a, 10, 5));
	assert_int_equal(attrib_forget_gone(a, gone_none, NULL), 0);
	assert_int_equal(attrib_forget_gone(a, gone_all, NULL), 1);
	/* A sample read after the process was dropped brings it back, held; dropping it
	 * again counts the sample in its class. */
	s = smp(0x1000300, 35, 1);
	assert_int_equal(attrib_sample(a, &s), -1);
	uint64_t before = attrib_counts(a)->by_class[ATTRIB_HEAP_UNTRACKED];
	assert_int_equal(attrib_forget_gone(a, gone_all, NULL), 1);
	assert_int_equal(attrib_counts(a)->by_class[ATTRIB_HEAP_UNTRACKED], before + 1);
	assert_int_equal(attrib_counts(a)->pending, 0);
	attrib_close(a);
	maps_free(&g.maps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reused_address),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_time_and_address),
		cmocka_unit_test(test_alloc_free),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_density),
		cmocka_unit_test(test_alloc_watermark),
		cmocka_unit_test(test_exit_releases),
		cmocka_unit_test(test_scale_exact),
		cmocka_unit_test(test_scale_both_ends),
		cmocka_unit_test(test_many_live),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
