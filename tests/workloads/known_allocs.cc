// known_allocs: every allocator entry point memprofd traces, each called from its own
// noinline site function, with counts and sizes known exactly. --expect FILE writes the
// workload's own account (tests/workloads/ledger.h) for tests/integration/check_exact.py.
// What counts, as the recorder must count it:
//  - an allocation is attributed to the site function that calls the allocator directly;
//    its size is the size the caller asked for (calloc: nmemb*size; operator new[]: the
//    array size including the ABI's 8-byte cookie for types with a destructor);
//  - realloc/reallocarray of a live block = free of the old block + one allocation of the
//    new size at the realloc's caller; realloc(NULL, n) = one allocation of n;
//  - blocks still live at exit are counted, their lifetime ending at the exit.
// With the default options (site: alloc_count, total_size, min_size, max_size):
//   small_mallocs      15000  440000    24   40  (2 contexts: 10000x24 via phase_one,
//                                                 5000x40 via phase_two)
//   large_callocs          5  5242880 1048576 1048576  (calloc(256, 4096))
//   chain_start            1       16    16   16  (malloc; dies at the first realloc)
//   chain_grow            10    32736    32 16384  (realloc to 32, 64, ..., 16384)
//   realloc_from_null      5      500   100  100
//   array_reallocs        12    14000   500 2000  (4 x reallocarray to 10, 20, 40 x 50)
//   aligned_posix         50    10000   200  200  (posix_memalign, 64)
//   aligned_c11           20    10240   512  512  (aligned_alloc, 128)
//   legacy_memalign       10    10000  1000 1000  (memalign, 256)
//   page_valloc            4    32768  8192 8192
//   page_pvalloc           3    36864 12288 12288
//   new_char_arrays      300   300000  1000 1000  (new char[1000])
//   new_objects          100     4800    48   48  (new Obj)
//   nothrow_objects       40     1920    48   48
//   nothrow_arrays        11      847    77   77
//   aligned_objects       25     4800   192  192  (operator new(size_t, align_val_t))
//   aligned_arrays         5     2880   576  576  (new Aligned[3])
//   aligned_nothrow        9     1728   192  192
//   tracked_arrays         6     1968   328  328  (new Tracked[10]: 10*32 + 8 cookie)
//   long_lived             3      999   333  333  (min_lifetime_ms >= 300)
//   leaks                  7  7340032 1048576 1048576 (never freed; lifetime >= 200 ms)
#include "ledger.h"

#include <malloc.h>
#include <initializer_list>
#include <new>


namespace known {

struct Obj { long a[6]; };                          // 48 bytes: plain new/delete
struct alignas(64) Aligned { char b[192]; };         // 192 bytes: aligned new
struct Tracked {                                      // 32 bytes; the destructor makes
	long v[4];                                        // new Tracked[n] ask n*32 + 8
	~Tracked();
};
Tracked::~Tracked() { asm volatile("" ::: "memory"); }

// The objects a phase made, in the order made; released by one of the release_* helpers.
struct Run {
	struct ledger *l;
	void **slot;
	uint32_t *h;
	size_t n;
};

// Site names exactly as memprofd prints them (demangled ELF symbols).
#define RUN "known::Run&"
static const char *const F_SMALL = "known::small_mallocs(" RUN ", unsigned long, unsigned long)";
static const char *const F_CALLOC = "known::large_callocs(" RUN ", unsigned long, unsigned long, unsigned long)";
static const char *const F_CHAIN0 = "known::chain_start(known::Run&)";
static const char *const F_CHAIN = "known::chain_grow(known::Run&, unsigned long)";
static const char *const F_RNULL = "known::realloc_from_null(" RUN ", unsigned long, unsigned long)";
static const char *const F_RARRAY = "known::array_reallocs(" RUN ", unsigned long)";
static const char *const F_POSIX = "known::aligned_posix(" RUN ", unsigned long, unsigned long, unsigned long)";
static const char *const F_C11 = "known::aligned_c11(" RUN ", unsigned long, unsigned long, unsigned long)";
static const char *const F_MEMALIGN = "known::legacy_memalign(" RUN ", unsigned long, unsigned long, unsigned long)";
static const char *const F_VALLOC = "known::page_valloc(" RUN ", unsigned long, unsigned long)";
static const char *const F_PVALLOC = "known::page_pvalloc(" RUN ", unsigned long, unsigned long)";
static const char *const F_NEWARR = "known::new_char_arrays(" RUN ", unsigned long, unsigned long)";
static const char *const F_NEWOBJ = "known::new_objects(" RUN ", unsigned long)";
static const char *const F_NTOBJ = "known::nothrow_objects(" RUN ", unsigned long)";
static const char *const F_NTARR = "known::nothrow_arrays(" RUN ", unsigned long, unsigned long)";
static const char *const F_ALOBJ = "known::aligned_objects(" RUN ", unsigned long)";
static const char *const F_ALARR = "known::aligned_arrays(" RUN ", unsigned long, unsigned long)";
static const char *const F_ALNT = "known::aligned_nothrow(" RUN ", unsigned long)";
static const char *const F_TRACKED = "known::tracked_arrays(" RUN ", unsigned long, unsigned long)";
static const char *const F_LIVED = "known::long_lived(" RUN ", unsigned long, unsigned long)";
static const char *const F_LEAK = "known::leaks(" RUN ", unsigned long, unsigned long)";
// Callers (second frames).
static const char *const C_MAIN = "main";
static const char *const C_ONE = "known::phase_one(known::Run&)";
static const char *const C_TWO = "known::phase_two(known::Run&)";
static const char *const C_CHAIN = "known::realloc_chain(known::Run&)";

// Every option (--small-count N, ...), with its default: the numbers above.
static long o_small_count = 10000, o_small_size = 24, o_small2_count = 5000, o_small2_size = 40;
static long o_calloc_count = 5, o_calloc_nmemb = 256, o_calloc_size = 4096;
static long o_chain_steps = 10;
static long o_rnull_count = 5, o_rnull_size = 100, o_rarray_rounds = 4;
static long o_posix_count = 50, o_posix_size = 200;
static long o_c11_count = 20, o_c11_size = 512;
static long o_memalign_count = 10, o_memalign_size = 1000;
static long o_valloc_count = 4, o_valloc_size = 8192, o_pvalloc_count = 3, o_pvalloc_size = 12288;
static long o_newarr_count = 300, o_newarr_size = 1000, o_newobj_count = 100;
static long o_ntobj_count = 40, o_ntarr_count = 11, o_ntarr_size = 77;
static long o_alobj_count = 25, o_alarr_count = 5, o_alarr_elems = 3, o_alnt_count = 9;
static long o_tracked_count = 6, o_tracked_elems = 10;
static long o_lived_count = 3, o_lived_size = 333, o_lived_ms = 300;
static long o_leak_count = 7, o_leak_size = 1 << 20, o_exit_delay_ms = 200;

[[noreturn]] static void oom(const char *site)
{
	dprintf(2, "known_allocs: %s: allocation failed\n", site);
	_exit(3);
}

static void keep(Run &r, unsigned site, void *p, uint64_t size, int64_t tb, int64_t ta)
{
	r.slot[r.n] = p;
	r.h[r.n] = ledger_alloc(r.l, site, size, tb, ta);
	r.n++;
}

// ---- sites: each is the allocator's direct caller ----

SITE void small_mallocs(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_SMALL, "malloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = malloc(size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_SMALL);
		keep(r, s, p, size, tb, ta);
	}
}

SITE void large_callocs(Run &r, unsigned long count, unsigned long nmemb, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_CALLOC, "calloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = calloc(nmemb, size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_CALLOC);
		keep(r, s, p, nmemb * size, tb, ta);
	}
}

SITE void chain_start(Run &r)
{
	unsigned s = ledger_site(r.l, F_CHAIN0, "malloc");
	int64_t tb = ledger_now();
	void *p = malloc(16);
	int64_t ta = ledger_now();
	if (!p)
		oom(F_CHAIN0);
	keep(r, s, p, 16, tb, ta);
}

// Grows the last object of r to `size`: the old block dies, a new one is born here.
SITE void chain_grow(Run &r, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_CHAIN, "realloc");
	size_t last = r.n - 1;
	int64_t tb = ledger_now();
	void *p = realloc(r.slot[last], size);
	int64_t ta = ledger_now();
	if (!p)
		oom(F_CHAIN);
	ledger_free(r.l, r.h[last], tb, ta);
	r.n--;
	keep(r, s, p, size, tb, ta);
}

SITE void realloc_from_null(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_RNULL, "realloc(NULL)");
	void *volatile null = NULL;   // a literal NULL lets GCC turn realloc into malloc
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = realloc(null, size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_RNULL);
		keep(r, s, p, size, tb, ta);
	}
}

// Per round: reallocarray(NULL, 10, 50), then to 20*50, then to 40*50: three allocations.
SITE void array_reallocs(Run &r, unsigned long rounds)
{
	unsigned s = ledger_site(r.l, F_RARRAY, "reallocarray");
	for (unsigned long i = 0; i < rounds; i++) {
		void *p = NULL;
		uint32_t h = 0;
		for (size_t nmemb = 10; nmemb <= 40; nmemb *= 2) {
			int64_t tb = ledger_now();
			void *q = reallocarray(p, nmemb, 50);
			int64_t ta = ledger_now();
			if (!q)
				oom(F_RARRAY);
			if (p)
				ledger_free(r.l, h, tb, ta);
			p = q;
			h = ledger_alloc(r.l, s, nmemb * 50, tb, ta);
		}
		r.slot[r.n] = p;
		r.h[r.n++] = h;
	}
}

SITE void aligned_posix(Run &r, unsigned long count, unsigned long align, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_POSIX, "posix_memalign");
	for (unsigned long i = 0; i < count; i++) {
		void *p = NULL;
		int64_t tb = ledger_now();
		int err = posix_memalign(&p, align, size);
		int64_t ta = ledger_now();
		if (err)
			oom(F_POSIX);
		keep(r, s, p, size, tb, ta);
	}
}

SITE void aligned_c11(Run &r, unsigned long count, unsigned long align, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_C11, "aligned_alloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = aligned_alloc(align, size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_C11);
		keep(r, s, p, size, tb, ta);
	}
}

SITE void legacy_memalign(Run &r, unsigned long count, unsigned long align, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_MEMALIGN, "memalign");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = memalign(align, size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_MEMALIGN);
		keep(r, s, p, size, tb, ta);
	}
}

// Sizes are whole pages, so "asked" and "rounded to a page" agree.
SITE void page_valloc(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_VALLOC, "valloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = valloc(size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_VALLOC);
		keep(r, s, p, size, tb, ta);
	}
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SITE void page_pvalloc(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_PVALLOC, "pvalloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = pvalloc(size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_PVALLOC);
		keep(r, s, p, size, tb, ta);
	}
}
#pragma GCC diagnostic pop

SITE void new_char_arrays(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_NEWARR, "operator new[](unsigned long)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		char *p = new char[size];
		int64_t ta = ledger_now();
		keep(r, s, p, size, tb, ta);
	}
}

SITE void new_objects(Run &r, unsigned long count)
{
	unsigned s = ledger_site(r.l, F_NEWOBJ, "operator new(unsigned long)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Obj *p = new Obj;
		int64_t ta = ledger_now();
		keep(r, s, p, sizeof(Obj), tb, ta);
	}
}

SITE void nothrow_objects(Run &r, unsigned long count)
{
	unsigned s = ledger_site(r.l, F_NTOBJ, "operator new(unsigned long, std::nothrow_t const&)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Obj *p = new (std::nothrow) Obj;
		int64_t ta = ledger_now();
		if (!p)
			oom(F_NTOBJ);
		keep(r, s, p, sizeof(Obj), tb, ta);
	}
}

SITE void nothrow_arrays(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_NTARR, "operator new[](unsigned long, std::nothrow_t const&)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		char *p = new (std::nothrow) char[size];
		int64_t ta = ledger_now();
		if (!p)
			oom(F_NTARR);
		keep(r, s, p, size, tb, ta);
	}
}

SITE void aligned_objects(Run &r, unsigned long count)
{
	unsigned s = ledger_site(r.l, F_ALOBJ, "operator new(unsigned long, std::align_val_t)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Aligned *p = new Aligned;
		int64_t ta = ledger_now();
		keep(r, s, p, sizeof(Aligned), tb, ta);
	}
}

SITE void aligned_arrays(Run &r, unsigned long count, unsigned long elems)
{
	unsigned s = ledger_site(r.l, F_ALARR, "operator new[](unsigned long, std::align_val_t)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Aligned *p = new Aligned[elems];
		int64_t ta = ledger_now();
		keep(r, s, p, elems * sizeof(Aligned), tb, ta);
	}
}

SITE void aligned_nothrow(Run &r, unsigned long count)
{
	unsigned s = ledger_site(r.l, F_ALNT,
				 "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Aligned *p = new (std::nothrow) Aligned;
		int64_t ta = ledger_now();
		if (!p)
			oom(F_ALNT);
		keep(r, s, p, sizeof(Aligned), tb, ta);
	}
}

SITE void tracked_arrays(Run &r, unsigned long count, unsigned long elems)
{
	unsigned s = ledger_site(r.l, F_TRACKED, "operator new[](unsigned long) with cookie");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		Tracked *p = new Tracked[elems];
		int64_t ta = ledger_now();
		keep(r, s, p, elems * sizeof(Tracked) + sizeof(size_t), tb, ta);
	}
}

SITE void long_lived(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_LIVED, "malloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = malloc(size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_LIVED);
		keep(r, s, p, size, tb, ta);
	}
}

SITE void leaks(Run &r, unsigned long count, unsigned long size)
{
	unsigned s = ledger_site(r.l, F_LEAK, "malloc");
	for (unsigned long i = 0; i < count; i++) {
		int64_t tb = ledger_now();
		void *p = malloc(size);
		int64_t ta = ledger_now();
		if (!p)
			oom(F_LEAK);
		static_cast<char *>(p)[0] = 1;
		keep(r, s, p, size, tb, ta);
	}
}

// ---- releasers and drivers: never the allocator's direct caller ----

template <typename Del> static void release(Run &r, Del del)
{
	for (size_t i = 0; i < r.n; i++) {
		int64_t fb = ledger_now();
		del(r.slot[i]);
		int64_t fa = ledger_now();
		ledger_free(r.l, r.h[i], fb, fa);
	}
	r.n = 0;
}

static void release_free(Run &r) { release(r, [](void *p) { free(p); }); }

// Each caller below is one call stack into small_mallocs: two contexts, one site.
NOT_SITE void phase_one(Run &r)
{
	ledger_context(r.l, ledger_site(r.l, F_SMALL, "malloc"), C_ONE);
	small_mallocs(r, o_small_count, o_small_size);
	release_free(r);
}

NOT_SITE void phase_two(Run &r)
{
	ledger_context(r.l, ledger_site(r.l, F_SMALL, "malloc"), C_TWO);
	small_mallocs(r, o_small2_count, o_small2_size);
	release_free(r);
}

NOT_SITE void realloc_chain(Run &r)
{
	ledger_context(r.l, ledger_site(r.l, F_CHAIN0, "malloc"), C_CHAIN);
	ledger_context(r.l, ledger_site(r.l, F_CHAIN, "realloc"), C_CHAIN);
	chain_start(r);
	for (long k = 1; k <= o_chain_steps; k++)
		chain_grow(r, 16ul << k);
	release_free(r);
}

} // namespace known

using namespace known;

// One context per site, reached from main; declared before the site runs.
static void from_main(Run &r, const char *function, const char *allocator)
{
	ledger_context(r.l, ledger_site(r.l, function, allocator), C_MAIN);
}

int main(int argc, char **argv)
{
	static const struct ledger_opt opts[] = {
		{"small-count", &o_small_count}, {"small-size", &o_small_size},
		{"small2-count", &o_small2_count}, {"small2-size", &o_small2_size},
		{"calloc-count", &o_calloc_count}, {"calloc-nmemb", &o_calloc_nmemb},
		{"calloc-size", &o_calloc_size}, {"chain-steps", &o_chain_steps},
		{"rnull-count", &o_rnull_count}, {"rnull-size", &o_rnull_size},
		{"rarray-rounds", &o_rarray_rounds},
		{"posix-count", &o_posix_count}, {"posix-size", &o_posix_size},
		{"c11-count", &o_c11_count}, {"c11-size", &o_c11_size},
		{"memalign-count", &o_memalign_count}, {"memalign-size", &o_memalign_size},
		{"valloc-count", &o_valloc_count}, {"valloc-size", &o_valloc_size},
		{"pvalloc-count", &o_pvalloc_count}, {"pvalloc-size", &o_pvalloc_size},
		{"newarr-count", &o_newarr_count}, {"newarr-size", &o_newarr_size},
		{"newobj-count", &o_newobj_count}, {"ntobj-count", &o_ntobj_count},
		{"ntarr-count", &o_ntarr_count}, {"ntarr-size", &o_ntarr_size},
		{"alobj-count", &o_alobj_count}, {"alarr-count", &o_alarr_count},
		{"alarr-elems", &o_alarr_elems}, {"alnt-count", &o_alnt_count},
		{"tracked-count", &o_tracked_count}, {"tracked-elems", &o_tracked_elems},
		{"lived-count", &o_lived_count}, {"lived-size", &o_lived_size},
		{"lived-ms", &o_lived_ms},
		{"leak-count", &o_leak_count}, {"leak-size", &o_leak_size},
		{"exit-delay-ms", &o_exit_delay_ms},
	};
	const char *expect = ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	if (o_chain_steps > 40 || (o_valloc_size | o_pvalloc_size) % 4096 ||
	    o_c11_size % 128) {
		dprintf(2, "known_allocs: chain-steps <= 40; valloc/pvalloc sizes whole pages; "
			   "c11-size a multiple of 128\n");
		return 2;
	}

	Run r = {};
	r.l = ledger_new("known_allocs");
	size_t cap = 64;
	for (long n : {o_small_count, o_small2_count, o_calloc_count, o_rnull_count,
		       o_rarray_rounds, o_posix_count, o_c11_count, o_memalign_count,
		       o_valloc_count, o_pvalloc_count, o_newarr_count, o_newobj_count,
		       o_ntobj_count, o_ntarr_count, o_alobj_count, o_alarr_count, o_alnt_count,
		       o_tracked_count, o_lived_count})
		if ((size_t)n > cap)
			cap = (size_t)n;
	r.slot = ledger_slots(cap);
	r.h = (uint32_t *)ledger_slots(cap);
	Run leaked = r;
	leaked.slot = ledger_slots((size_t)o_leak_count);
	leaked.h = (uint32_t *)ledger_slots((size_t)o_leak_count);
	for (const char *f : {"main", C_ONE, C_TWO, C_CHAIN})
		ledger_not_site(r.l, f);

	phase_one(r);
	phase_two(r);

	from_main(r, F_CALLOC, "calloc");
	large_callocs(r, o_calloc_count, o_calloc_nmemb, o_calloc_size);
	release_free(r);

	realloc_chain(r);

	from_main(r, F_RNULL, "realloc(NULL)");
	realloc_from_null(r, o_rnull_count, o_rnull_size);
	release_free(r);

	from_main(r, F_RARRAY, "reallocarray");
	array_reallocs(r, o_rarray_rounds);
	release_free(r);

	from_main(r, F_POSIX, "posix_memalign");
	aligned_posix(r, o_posix_count, 64, o_posix_size);
	release_free(r);

	from_main(r, F_C11, "aligned_alloc");
	aligned_c11(r, o_c11_count, 128, o_c11_size);
	release_free(r);

	from_main(r, F_MEMALIGN, "memalign");
	legacy_memalign(r, o_memalign_count, 256, o_memalign_size);
	release_free(r);

	from_main(r, F_VALLOC, "valloc");
	page_valloc(r, o_valloc_count, o_valloc_size);
	release_free(r);

	from_main(r, F_PVALLOC, "pvalloc");
	page_pvalloc(r, o_pvalloc_count, o_pvalloc_size);
	release_free(r);

	from_main(r, F_NEWARR, "operator new[](unsigned long)");
	new_char_arrays(r, o_newarr_count, o_newarr_size);
	release(r, [](void *p) { delete[] static_cast<char *>(p); });

	from_main(r, F_NEWOBJ, "operator new(unsigned long)");
	new_objects(r, o_newobj_count);
	release(r, [](void *p) { delete static_cast<Obj *>(p); });

	from_main(r, F_NTOBJ, "operator new(unsigned long, std::nothrow_t const&)");
	nothrow_objects(r, o_ntobj_count);
	release(r, [](void *p) { delete static_cast<Obj *>(p); });

	from_main(r, F_NTARR, "operator new[](unsigned long, std::nothrow_t const&)");
	nothrow_arrays(r, o_ntarr_count, o_ntarr_size);
	release(r, [](void *p) { delete[] static_cast<char *>(p); });

	from_main(r, F_ALOBJ, "operator new(unsigned long, std::align_val_t)");
	aligned_objects(r, o_alobj_count);
	release(r, [](void *p) { delete static_cast<Aligned *>(p); });

	from_main(r, F_ALARR, "operator new[](unsigned long, std::align_val_t)");
	aligned_arrays(r, o_alarr_count, o_alarr_elems);
	release(r, [](void *p) { delete[] static_cast<Aligned *>(p); });

	from_main(r, F_ALNT, "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)");
	aligned_nothrow(r, o_alnt_count);
	release(r, [](void *p) { delete static_cast<Aligned *>(p); });

	from_main(r, F_TRACKED, "operator new[](unsigned long) with cookie");
	tracked_arrays(r, o_tracked_count, o_tracked_elems);
	release(r, [](void *p) { delete[] static_cast<Tracked *>(p); });

	from_main(r, F_LIVED, "malloc");
	long_lived(r, o_lived_count, o_lived_size);
	ledger_sleep_ms(o_lived_ms);
	release_free(r);

	from_main(r, F_LEAK, "malloc");
	leaks(leaked, o_leak_count, o_leak_size);
	ledger_sleep_ms(o_exit_delay_ms);

	ledger_exit(r.l, ledger_now());
	ledger_write(r.l, expect);
	return 0;
}
