/* libmemprofd_sampler: replaces the malloc family and operator new/delete (LD_PRELOAD or
 * linking) and samples allocations by bytes with a per-thread Poisson countdown.
 * Invariants: an unsampled malloc costs one thread-local subtract and compare before the
 * real allocator; an unsampled free costs one unsigned range compare (sampled objects,
 * and nothing else, live in one region mapped once, as GWP-ASan does); USDT probes fire
 * only for sampled objects, and only while a tracer holds their semaphore.
 *
 * Estimation: with mean T, bytes are sampled as a Poisson process, so an object of s
 * bytes is sampled with probability p(s) = 1 - exp(-s/T), independently of the others.
 * Each sample carries weight 1/p(s) objects (and s/p(s) bytes): the Horvitz-Thompson
 * estimator, unbiased for counts and bytes per context.
 *
 * Allocators with their own sampling (item 5 of issue 5):
 * - jemalloc 5.3 (Debian 12): opt.prof with opt.lg_prof_sample=19 samples the same way
 *   (exponential byte intervals, 512 KiB), but it must be enabled at startup
 *   (MALLOC_CONF=prof:true, costs a per-thread prof_tdata), and 5.3 has no per-sample
 *   callback with address and size and no callback at the free of a sampled object:
 *   experimental.hooks.prof_backtrace only replaces the unwinder, and prof_sample_hook /
 *   prof_sample_free_hook exist only after 5.3. Its output is a dump of the live sampled
 *   heap (prof.dump), without lifetimes, so it cannot fill MemInfoBlocks. Where jemalloc
 *   is a shared library this sampler is preloaded in front of it (RTLD_NEXT finds
 *   jemalloc's malloc); where it is linked into the executable the executable's malloc
 *   wins over any preload, and only exact mode (uprobes on its je_* entry points) works.
 * - gperftools tcmalloc: samples every ~512 KiB (TCMALLOC_SAMPLE_PARAMETER) for
 *   MallocExtension::GetHeapSample, again a live-heap snapshot without lifetimes; its
 *   MallocHook new/delete hooks run on every call, which is the cost this sampler exists
 *   to avoid. Same conclusion: preload in front of a shared libtcmalloc, exact mode for a
 *   static one. (Google's newer tcmalloc has lifetime-aware sampled profiles through
 *   MallocExtension::StartAllocationProfiling, not packaged in Debian 12.)
 * So neither is used; the daemon reports which allocator a target has (see
 * daemon/alloc/alloc_sampled.c). */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include "sampler/sampler.h"
#include "sampler/sampler_watch.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#define EXPORT __attribute__((visibility("default")))
/* An entry point whose every call into a slow path is a tail call: it needs no frame of
 * its own (the file is built with frame pointers for the slow paths, which the BPF stack
 * walk goes through, and which get the caller's return address as an argument), so its
 * common path is the countdown and a jump to the allocator. */
#if defined(__clang__)   /* no per-function optimize attribute: keeps the frame */
#define ENTRY EXPORT
#else
#define ENTRY __attribute__((visibility("default"), optimize("omit-frame-pointer")))
#endif
#define RA __builtin_return_address(0)

#define NCLASSES 33            /* free lists for extents of 1..32 pages; [0] for larger ones */
#define MADVISE_PAGES 16       /* freed extents this large go back to the kernel (and read zero) */
#define NONE UINT32_MAX

/* Semaphores: the kernel increments them while a uprobe is attached to the probe. */
__extension__ unsigned short memprofd_alloc_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));
__extension__ unsigned short memprofd_free_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));
/* The OpenTelemetry memory contract (sampler.h): the same samples for its profiler. */
__extension__ unsigned short otel_memory_alloc_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));
__extension__ unsigned short otel_memory_free_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));

#ifdef SAMPLER_PREFIX
struct mps_last_probe mps_last;
#define NOTE_ALLOC(a, s, w, f) (mps_last.addr = (a), mps_last.size = (s), \
	mps_last.weight_q16 = (w), mps_last.flags = (f), mps_last.nalloc++)
#define NOTE_FREE(a) (mps_last.addr = (a), mps_last.nfree++)
#else
#define NOTE_ALLOC(a, s, w, f) ((void)0)
#define NOTE_FREE(a) ((void)0)
#endif

/* The allocator calls are forwarded to (RTLD_NEXT: glibc, or a jemalloc/tcmalloc
 * loaded after us). free and malloc_usable_size start as stubs that initialise first,
 * so their fast paths need no "initialised?" test. */
static void boot_free(void *p);
static size_t boot_usable(void *p);
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
	void *(*new_throw)(size_t);          /* libstdc++'s operator new, for its failure path */
	void *(*new_align_throw)(size_t, size_t);
} real = { .free = boot_free, .usable = boot_usable };

/* Region: [region_lo, region_lo + region_size). The first SAMPLER_BOOT_BYTES are the
 * bootstrap arena; the rest is handed out in pages. meta[] is indexed by page. */
enum { PG_FREE = 0, PG_USED, PG_BOOT, PG_INNER };
struct pmeta {
	uint64_t size;         /* PG_USED: bytes asked for */
	uint32_t npages;       /* extent length (its first page only) */
	uint32_t next;         /* free-list link (first page of a free extent) */
	uint8_t state;
	uint8_t zero;          /* free extent known to read zero */
};
static uintptr_t region_lo;
static size_t region_size;
static struct pmeta *meta;
static uint32_t npages_total, bump;          /* pages; bump: first never-used page */
static uint32_t free_head[NCLASSES];
static size_t boot_used;
static int region_lock_word;
static _Alignas(4096) char region_fallback[256 << 10];   /* when mmap is refused */
static struct pmeta meta_fallback[sizeof(region_fallback) / SAMPLER_PAGE];

static uint64_t mean_bytes = SAMPLER_DEFAULT_MEAN;
static int force_region;     /* sample into the region with no tracer (tests) */
static int init_state;       /* 0 not started, 1 in progress, 2 done */
static uint64_t seed_salt;

static struct {
	uint64_t samples, untraced, ralloc, rfree, rfull, rlive, boot, bad;
} st;

struct tstate {
	int64_t left;          /* bytes until the next sample; <= 0 means sample now */
	uint64_t rng;
	uint64_t epoch;        /* reseed when it differs from seed_epoch (after fork) */
	int in_init;
};
static __thread struct tstate ts __attribute__((tls_model("initial-exec")));
static uint64_t seed_epoch = 1;

#define STAT(f) __atomic_fetch_add(&st.f, 1, __ATOMIC_RELAXED)

static void lock(void)
{
	while (__atomic_exchange_n(&region_lock_word, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&region_lock_word, __ATOMIC_RELAXED))
			sched_yield();
}

static void unlock(void)
{
	__atomic_store_n(&region_lock_word, 0, __ATOMIC_RELEASE);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	char *end;

	if (!s || !*s)
		return def;
	unsigned long long v = strtoull(s, &end, 0);
	return *end ? def : v;
}

/* ---- bootstrap arena: allocations made while dlsym runs ---- */

static void *boot_alloc(size_t n, size_t align)
{
	size_t a = align > 16 ? align : 16, off;
	void *p = NULL;

	lock();
	off = (boot_used + sizeof(uint64_t) + a - 1) & ~(a - 1);   /* room for the size header */
	if (region_size && off + n <= SAMPLER_BOOT_BYTES) {
		p = (char *)region_lo + off;
		((uint64_t *)p)[-1] = n;
		boot_used = off + n;
		STAT(boot);
	}
	unlock();
	return p;
}

/* ---- region pages ---- */

static unsigned cls_of(uint32_t np)
{
	return np < NCLASSES ? np : 0;
}

static void push_free(uint32_t pg, uint32_t np, int zero)
{
	unsigned c = cls_of(np);

	meta[pg] = (struct pmeta){ .npages = np, .next = free_head[c], .state = PG_FREE, .zero = zero };
	free_head[c] = pg;
}

/* An extent of exactly np pages, or NONE. Under the lock. */
static uint32_t take_pages(uint32_t np, int *zero)
{
	uint32_t *link, pg;

	if (np < NCLASSES && free_head[np] != NONE) {
		pg = free_head[np];
		free_head[np] = meta[pg].next;
		*zero = meta[pg].zero;
		return pg;
	}
	for (link = &free_head[0]; *link != NONE; link = &meta[*link].next) {   /* first fit */
		pg = *link;
		if (meta[pg].npages < np)
			continue;
		*link = meta[pg].next;
		*zero = meta[pg].zero;
		if (meta[pg].npages > np)
			push_free(pg + np, meta[pg].npages - np, meta[pg].zero);
		return pg;
	}
	if (npages_total - bump < np)
		return NONE;
	pg = bump;
	bump += np;
	*zero = 1;
	return pg;
}

/* A sampled object of n bytes aligned to align (a power of two), or NULL when full. */
static void *region_alloc(size_t n, size_t align, int want_zero)
{
	uint64_t np = (n + SAMPLER_PAGE - 1) / SAMPLER_PAGE, ap = align > SAMPLER_PAGE ? align / SAMPLER_PAGE : 1;
	uint32_t pg, start;
	int zero;

	if (np == 0)
		np = 1;
	if (np + ap - 1 > npages_total)
		return NULL;
	lock();
	pg = take_pages((uint32_t)(np + ap - 1), &zero);
	if (pg == NONE) {
		unlock();
		return NULL;
	}
	start = pg;
	if (ap > 1) {
		uint64_t base = (region_lo / SAMPLER_PAGE) + pg, a = (base + ap - 1) & ~(ap - 1);
		start = pg + (uint32_t)(a - base);
		if (start > pg)
			push_free(pg, start - pg, zero);
		if (pg + np + ap - 1 > start + np)
			push_free(start + np, pg + np + ap - 1 - (start + np), zero);
	}
	meta[start] = (struct pmeta){ .size = n, .npages = (uint32_t)np, .next = NONE, .state = PG_USED };
	for (uint32_t i = 1; i < np && i < 2; i++)
		meta[start + i].state = PG_INNER;    /* enough to reject an inner pointer's free */
	st.rlive += np * SAMPLER_PAGE;
	st.ralloc++;
	unlock();
	void *p = (char *)region_lo + (uint64_t)start * SAMPLER_PAGE;
	if (want_zero && !zero)
		memset(p, 0, n);
	return p;
}

/* Page index of p if it starts a live region object, else NONE (bootstrap blocks too). */
static uint32_t region_obj(const void *p)
{
	uintptr_t off = (uintptr_t)p - region_lo;

	if (off % SAMPLER_PAGE || off < SAMPLER_BOOT_BYTES)
		return NONE;
	uint32_t pg = (uint32_t)(off / SAMPLER_PAGE);
	return meta[pg].state == PG_USED ? pg : NONE;
}

static void region_release(uint32_t pg)
{
	uint32_t np;
	int zero = 0;

	lock();
	np = meta[pg].npages;
	if (np > 1)
		meta[pg + 1].state = PG_FREE;
	meta[pg].state = PG_FREE;
	st.rlive -= (uint64_t)np * SAMPLER_PAGE;
	st.rfree++;
	unlock();
	/* Outside the lock: a syscall. The extent is not on a free list yet, so no one races. */
	if (np >= MADVISE_PAGES && region_lo != (uintptr_t)region_fallback)
		zero = madvise((char *)region_lo + (uint64_t)pg * SAMPLER_PAGE,
			       (uint64_t)np * SAMPLER_PAGE, MADV_DONTNEED) == 0;
	lock();
	push_free(pg, np, zero);
	unlock();
}

/* ---- initialisation ---- */

static void on_fork_prepare(void) { lock(); }
static void on_fork_parent(void) { unlock(); }
static void on_fork_child(void)
{
	region_lock_word = 0;
	seed_epoch++;          /* the child must not repeat the parent's sample points */
	ts.epoch = 0;
	ts.left = 0;
	sampler_watch_forget();
}

static void map_region(void)
{
	uint64_t mb = env_u64("MEMPROFD_SAMPLER_REGION_MB", SAMPLER_DEFAULT_REGION_MB);
	size_t size = (size_t)mb << 20, npg, msize;
	void *r = MAP_FAILED, *m = MAP_FAILED;

	if (size < 2 * SAMPLER_BOOT_BYTES)
		size = 2 * SAMPLER_BOOT_BYTES;
	npg = size / SAMPLER_PAGE;
	msize = (npg * sizeof(struct pmeta) + SAMPLER_PAGE - 1) & ~(size_t)(SAMPLER_PAGE - 1);
	r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r != MAP_FAILED)
		m = mmap(NULL, msize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED || m == MAP_FAILED) {
		if (r != MAP_FAILED)
			munmap(r, size);
		r = region_fallback;
		m = meta_fallback;
		size = sizeof(region_fallback);
		npg = size / SAMPLER_PAGE;
	}
	meta = m;
	npages_total = (uint32_t)npg;
	bump = SAMPLER_BOOT_BYTES / SAMPLER_PAGE;
	for (uint32_t i = 0; i < bump; i++)
		meta[i].state = PG_BOOT;
	for (unsigned c = 0; c < NCLASSES; c++)
		free_head[c] = NONE;
	region_lo = (uintptr_t)r;
	__atomic_store_n(&region_size, size, __ATOMIC_RELEASE);
}

#define LOOKUP(field, name) (*(void **)&real.field = dlsym(RTLD_NEXT, name))

static NOINLINE void init(void)
{
	int expect = 0;

	if (ts.in_init)
		return;
	if (!__atomic_compare_exchange_n(&init_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
			sched_yield();
		return;
	}
	ts.in_init = 1;
	mean_bytes = env_u64("MEMPROFD_SAMPLE_BYTES", SAMPLER_DEFAULT_MEAN);
	force_region = (int)env_u64("MEMPROFD_SAMPLER_FORCE", 0);
	seed_salt = env_u64("MEMPROFD_SAMPLER_SEED", 0);
	sampler_watch_init(env_u64("MEMPROFD_SAMPLER_WATCH_PPM", SAMPLER_WATCH_PPM),
			   env_u64("MEMPROFD_SAMPLER_WATCH_TRAP_NS", SAMPLER_WATCH_TRAP_NS));
	map_region();
	LOOKUP(malloc, "malloc");
	LOOKUP(calloc, "calloc");
	LOOKUP(realloc, "realloc");
	LOOKUP(posix_memalign, "posix_memalign");
	LOOKUP(aligned_alloc, "aligned_alloc");
	LOOKUP(memalign, "memalign");
	LOOKUP(valloc, "valloc");
	LOOKUP(pvalloc, "pvalloc");
	LOOKUP(new_throw, "_Znwm");
	LOOKUP(new_align_throw, "_ZnwmSt11align_val_t");
	void (*f)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	size_t (*u)(void *) = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	real.usable = u;
	real.free = f;
	ts.in_init = 0;
	__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
	pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

static void boot_free(void *p)
{
	init();
	if (real.free != boot_free && real.free)
		real.free(p);
}

static size_t boot_usable(void *p)
{
	init();
	return real.usable && real.usable != boot_usable ? real.usable(p) : 0;
}

/* ---- the countdown ---- */

static uint64_t next_rand(struct tstate *t)
{
	uint64_t x = t->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Bytes to the next sample point: exponential with mean mean_bytes. */
static int64_t draw(struct tstate *t)
{
	if (mean_bytes == 0)
		return INT64_MAX;      /* sampling off */
	if (mean_bytes == 1)
		return 0;              /* every allocation, weight 1 */
	double u = ((next_rand(t) >> 11) + 1) * (1.0 / 9007199254740992.0);   /* (0, 1] */
	double d = -log(u) * (double)mean_bytes;
	if (d < 1)
		return 1;
	return d > 9e18 ? INT64_MAX : (int64_t)d;
}

static void seed(struct tstate *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t->rng = seed_salt ? seed_salt ^ 0x9E3779B97F4A7C15ULL * (uintptr_t)&ts
			   : (uint64_t)now.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uintptr_t)t ^ ((uint64_t)getpid() << 32);
	if (!t->rng)
		t->rng = 1;
	t->epoch = __atomic_load_n(&seed_epoch, __ATOMIC_RELAXED);
}

/* Called when the countdown crossed zero on an allocation of n bytes (already
 * subtracted). Returns 1 if this allocation is a sample to put in the region. */
static int decide(size_t n)
{
	struct tstate *t = &ts;

	if (unlikely(__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2))
		init();
	if (unlikely(t->epoch != seed_epoch)) {
		/* A new thread, or the child of a fork: its first interval starts here. */
		seed(t);
		t->left = draw(t) - (int64_t)n;
		if (t->left > 0)
			return 0;
	}
	t->left = draw(t);
	STAT(samples);
	if (!memprofd_alloc_semaphore && !otel_memory_alloc_semaphore && !force_region) {
		STAT(untraced);
		return 0;
	}
	return 1;
}

static uint64_t weight_q16(size_t n)
{
	double p = mean_bytes <= 1 ? 1.0 : -expm1(-(double)n / (double)mean_bytes);
	double w = p > 0 ? 1.0 / p : (double)mean_bytes;
	return (uint64_t)(w * (double)(1u << SAMPLER_WEIGHT_SHIFT) + 0.5);
}

static void fire_alloc(void *p, size_t n, unsigned flags, void *caller)
{
	uint64_t w = weight_q16(n);

	NOTE_ALLOC((uintptr_t)p, n, w, flags);
	if (memprofd_alloc_semaphore)
		STAP_PROBE5(memprofd, alloc, p, n, w, flags, caller);
	/* Its weight is the bytes the sample stands for; the free is seen for region objects. */
	if (otel_memory_alloc_semaphore)
		STAP_PROBE3(otel_memory, alloc, p, n, (uint64_t)(((unsigned __int128)w * n) >> SAMPLER_WEIGHT_SHIFT));
	if (flags & SAMPLER_F_REGION)     /* only a region object's free is seen */
		sampler_watch_arm(p, n, next_rand(&ts));
}

static void fire_free(void *p)
{
	NOTE_FREE((uintptr_t)p);
	sampler_watch_end(p);      /* before memprofd:free: the daemon sees the watch first */
	if (memprofd_free_semaphore)
		STAP_PROBE1(memprofd, free, p);
	if (otel_memory_free_semaphore)
		STAP_PROBE1(otel_memory, free, p);
}

static inline int in_region(const void *p)
{
	return (uintptr_t)p - region_lo < region_size;
}

/* ---- slow paths: everything that is not "countdown still positive" ---- */

enum kind { K_MALLOC, K_CALLOC, K_ALIGN, K_VALLOC, K_PVALLOC };

static void *forward(enum kind k, size_t n, size_t align)
{
	switch (k) {
	case K_MALLOC: return real.malloc(n);
	case K_CALLOC: return real.calloc(n, 1);
	case K_ALIGN: return real.memalign(align, n);
	case K_VALLOC: return real.valloc ? real.valloc(n) : real.memalign(SAMPLER_PAGE, n);
	case K_PVALLOC: return real.pvalloc ? real.pvalloc(n) :
		real.memalign(SAMPLER_PAGE, (n + SAMPLER_PAGE - 1) & ~(size_t)(SAMPLER_PAGE - 1));
	}
	return NULL;
}

/* The countdown reached zero (or the sampler is not initialised yet). */
static NOINLINE void *alloc_slow(enum kind k, size_t n, size_t align, void *caller)
{
	if (unlikely(ts.in_init))
		return boot_alloc(n, align);
	if (!decide(n))
		return forward(k, n, align);
	if (k == K_PVALLOC)
		n = (n + SAMPLER_PAGE - 1) & ~(size_t)(SAMPLER_PAGE - 1);
	void *p = region_alloc(n, align, k == K_CALLOC);
	unsigned flags = SAMPLER_F_REGION;
	if (!p) {
		STAT(rfull);
		flags = 0;
		p = forward(k, n, align);
		if (!p)
			return NULL;
	}
	fire_alloc(p, n, flags, caller);
	return p;
}

static NOINLINE void free_slow(void *p)
{
	uint32_t pg = region_obj(p);

	if (pg == NONE) {
		if (meta[((uintptr_t)p - region_lo) / SAMPLER_PAGE].state != PG_BOOT)
			STAT(bad);
		return;      /* bootstrap blocks are never reused */
	}
	fire_free(p);
	region_release(pg);
}

static size_t region_size_of(const void *p)
{
	uint32_t pg = region_obj(p);

	if (pg != NONE)
		return meta[pg].size;
	uintptr_t off = (uintptr_t)p - region_lo;
	if (off < SAMPLER_BOOT_BYTES)
		return ((const uint64_t *)p)[-1];
	return 0;
}

/* Takes n bytes off the thread's countdown; 1 when it reached zero (a sample is due, or
 * the thread or the sampler is new). On x86-64 this is one read-modify-write of the
 * thread-local and a branch on its flags (compilers load, subtract, store and test). */
static inline __attribute__((always_inline)) int countdown_crossed(size_t n)
{
#if defined(__x86_64__)
	/* ts.left is written through an input operand, so "memory": GCC 12 miscompiles asm
	 * goto with an in-out operand here (the taken branch lands past the function). */
	asm goto("subq %1, %0\n\tjle %l[crossed]" : : "m"(ts.left), "r"(n) : "cc", "memory" : crossed);
	return 0;
crossed:
	return 1;
#else
	return (ts.left -= (int64_t)n) <= 0;
#endif
}

static inline void *do_alloc(enum kind k, size_t n, size_t align, void *caller)
{
	if (likely(!countdown_crossed(n)))
		return forward(k, n, align);
	return alloc_slow(k, n, align, caller);
}

/* realloc of a region object, or a realloc whose countdown crossed zero. */
static NOINLINE void *realloc_slow(void *p, size_t n, void *caller)
{
	int from_region = in_region(p);
	size_t old = from_region ? region_size_of(p) : 0;
	void *q;

	if (unlikely(ts.in_init)) {
		q = boot_alloc(n, 0);
		if (q && p)
			memcpy(q, p, old < n ? old : n);
		return q;
	}
	if (n == 0) {                 /* glibc: frees and returns NULL */
		if (from_region)
			free_slow(p);
		else
			real.free(p);
		return NULL;
	}
	int sample = from_region ? (countdown_crossed(n) && decide(n)) : decide(n);
	if (!from_region && (!sample || !real.usable))
		return real.realloc(p, n);
	unsigned flags = SAMPLER_F_REALLOC;
	q = sample ? region_alloc(n, 0, 0) : NULL;
	if (q) {
		flags |= SAMPLER_F_REGION;
	} else {
		if (sample)
			STAT(rfull);
		if (!from_region) {
			q = real.realloc(p, n);     /* sampled, region full: a normal realloc */
			if (q)
				fire_alloc(q, n, flags, caller);
			return q;
		}
		q = real.malloc(n);
	}
	if (!q)
		return NULL;
	if (!from_region)
		old = real.usable(p);
	memcpy(q, p, old < n ? old : n);
	if (from_region)
		free_slow(p);
	else
		real.free(p);
	if (sample)
		fire_alloc(q, n, flags, caller);
	return q;
}

static int align_ok(size_t align)
{
	return align && !(align & (align - 1));
}

/* ---- the public entry points ---- */

ENTRY void *SAMPLER_SYM(malloc)(size_t n)
{
	return do_alloc(K_MALLOC, n, 0, RA);
}

/* free's body, inlined into operator delete too (a call to the exported free would go
 * through the PLT: it can be interposed). */
static inline void free_impl(void *p)
{
	if (unlikely(in_region(p))) {
		free_slow(p);
		return;
	}
	real.free(p);
}

ENTRY void SAMPLER_SYM(free)(void *p)
{
	free_impl(p);
}

ENTRY void *SAMPLER_SYM(calloc)(size_t n, size_t size)
{
	size_t total;

	if (unlikely(__builtin_mul_overflow(n, size, &total))) {
		errno = ENOMEM;
		return NULL;
	}
	return do_alloc(K_CALLOC, total, 0, RA);
}

ENTRY void *SAMPLER_SYM(realloc)(void *p, size_t n)
{
	if (!p)
		return do_alloc(K_MALLOC, n, 0, RA);
	if (unlikely(in_region(p)))
		return realloc_slow(p, n, RA);
	if (likely(!countdown_crossed(n)) || n == 0)
		return real.realloc(p, n);
	return realloc_slow(p, n, RA);
}

ENTRY void *SAMPLER_SYM(reallocarray)(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (!p)
		return do_alloc(K_MALLOC, total, 0, RA);
	if (unlikely(in_region(p)))
		return realloc_slow(p, total, RA);
	if (likely(!countdown_crossed(total)) || total == 0)
		return real.realloc(p, total);
	return realloc_slow(p, total, RA);
}

EXPORT int SAMPLER_SYM(posix_memalign)(void **out, size_t align, size_t n)
{
	if (!align_ok(align) || align % sizeof(void *))
		return EINVAL;
	int saved = errno;
	void *p = do_alloc(K_ALIGN, n, align, RA);
	if (!p)
		return ENOMEM;
	errno = saved;
	*out = p;
	return 0;
}

ENTRY void *SAMPLER_SYM(aligned_alloc)(size_t align, size_t n)
{
	if (!align_ok(align)) {
		errno = EINVAL;
		return NULL;
	}
	return do_alloc(K_ALIGN, n, align, RA);
}

ENTRY void *SAMPLER_SYM(memalign)(size_t align, size_t n)
{
	if (!align_ok(align)) {
		if (!real.memalign)
			init();
		return real.memalign(align, n);   /* glibc rounds it up; let it */
	}
	return do_alloc(K_ALIGN, n, align, RA);
}

ENTRY void *SAMPLER_SYM(valloc)(size_t n)
{
	return do_alloc(K_VALLOC, n, SAMPLER_PAGE, RA);
}

ENTRY void *SAMPLER_SYM(pvalloc)(size_t n)
{
	return do_alloc(K_PVALLOC, n, SAMPLER_PAGE, RA);
}

ENTRY size_t SAMPLER_SYM(malloc_usable_size)(void *p)
{
	if (unlikely(in_region(p)))
		return region_size_of(p);
	return p ? real.usable(p) : 0;
}

/* C++ operators (Itanium names). A failed operator new falls back to libstdc++'s own,
 * which runs the new_handler loop and throws std::bad_alloc (through our frames: built
 * with -fexceptions). */
static NOINLINE void *new_failed(size_t n, size_t align, int nothrow)
{
	if (nothrow)
		return NULL;
	if (align ? real.new_align_throw != NULL : real.new_throw != NULL)
		return align ? real.new_align_throw(n, align) : real.new_throw(n);
	abort();
}

/* operator new whose countdown crossed zero (a separate frame: see ENTRY). */
static NOINLINE void *new_slow(size_t n, size_t align, int nothrow, void *caller)
{
	void *p = align > 16 && align_ok(align) ? alloc_slow(K_ALIGN, n, align, caller)
						: alloc_slow(K_MALLOC, n, 0, caller);

	return p ? p : new_failed(n, align, nothrow);
}

static inline void *new_impl(size_t n, size_t align, int nothrow, void *caller)
{
	if (likely(!countdown_crossed(n))) {
		void *p = align > 16 && align_ok(align) ? real.memalign(align, n) : real.malloc(n);
		if (likely(p != NULL))
			return p;
		return new_failed(n, align, nothrow);
	}
	return new_slow(n, align, nothrow, caller);
}

#define NEW(name, ...) ENTRY void *SAMPLER_SYM(name)
NEW(_Znwm)(size_t n) { return new_impl(n, 0, 0, RA); }
NEW(_Znam)(size_t n) { return new_impl(n, 0, 0, RA); }
NEW(_ZnwmRKSt9nothrow_t)(size_t n, const void *nt) { return new_impl(n, 0, 1, RA); }
NEW(_ZnamRKSt9nothrow_t)(size_t n, const void *nt) { return new_impl(n, 0, 1, RA); }
NEW(_ZnwmSt11align_val_t)(size_t n, size_t al) { return new_impl(n, al, 0, RA); }
NEW(_ZnamSt11align_val_t)(size_t n, size_t al) { return new_impl(n, al, 0, RA); }
NEW(_ZnwmSt11align_val_tRKSt9nothrow_t)(size_t n, size_t al, const void *nt) { return new_impl(n, al, 1, RA); }
NEW(_ZnamSt11align_val_tRKSt9nothrow_t)(size_t n, size_t al, const void *nt) { return new_impl(n, al, 1, RA); }

#define DEL(name) ENTRY void SAMPLER_SYM(name)
DEL(_ZdlPv)(void *p) { free_impl(p); }
DEL(_ZdaPv)(void *p) { free_impl(p); }
DEL(_ZdlPvm)(void *p, size_t n) { free_impl(p); }
DEL(_ZdaPvm)(void *p, size_t n) { free_impl(p); }
DEL(_ZdlPvSt11align_val_t)(void *p, size_t al) { free_impl(p); }
DEL(_ZdaPvSt11align_val_t)(void *p, size_t al) { free_impl(p); }
DEL(_ZdlPvmSt11align_val_t)(void *p, size_t n, size_t al) { free_impl(p); }
DEL(_ZdaPvmSt11align_val_t)(void *p, size_t n, size_t al) { free_impl(p); }
DEL(_ZdlPvRKSt9nothrow_t)(void *p, const void *nt) { free_impl(p); }
DEL(_ZdaPvRKSt9nothrow_t)(void *p, const void *nt) { free_impl(p); }
DEL(_ZdlPvSt11align_val_tRKSt9nothrow_t)(void *p, size_t al, const void *nt) { free_impl(p); }
DEL(_ZdaPvSt11align_val_tRKSt9nothrow_t)(void *p, size_t al, const void *nt) { free_impl(p); }

EXPORT void SAMPLER_SYM(memprofd_sampler_get_stats)(struct memprofd_sampler_stats *o)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		init();
	*o = (struct memprofd_sampler_stats){
		.mean_bytes = mean_bytes, .samples = st.samples, .samples_untraced = st.untraced,
		.region_allocs = st.ralloc, .region_frees = st.rfree, .region_full = st.rfull,
		.region_live_bytes = st.rlive, .boot_allocs = st.boot, .bad_frees = st.bad,
		.region_lo = region_lo, .region_size = region_size,
	};
	struct sampler_watch_stats w;

	sampler_watch_get_stats(&w);
	o->watch_armed = w.armed, o->watch_busy = w.busy, o->watch_budget = w.budget;
	o->watch_errors = w.errors, o->watch_hits = w.hits;
}

EXPORT int SAMPLER_SYM(memprofd_sampler_in_region)(const void *p)
{
	return in_region(p);
}

#ifdef SAMPLER_PREFIX
/* Restarts sampling with a new mean (the region and its objects are kept). */
void mps_test_reset(uint64_t mean, int force, uint64_t seedv)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		init();
	mean_bytes = mean;
	force_region = force;
	seed_salt = seedv;
	memset(&mps_last, 0, sizeof(mps_last));
	seed_epoch++;
	ts.epoch = 0;
	ts.left = 0;
}
#endif
