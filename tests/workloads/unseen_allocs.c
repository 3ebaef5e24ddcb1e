/* unseen_allocs: a plain-C workload whose sites, counts, sizes, alignments, free order and
 * lifetimes all come from --seed, so the exact-mode checker meets numbers it was never
 * tuned on. It keeps the same account as known_allocs (tests/workloads/ledger.h) and
 * follows the same counting rules (see the comment at the top of known_allocs.cc). */
#include "ledger.h"

#include <malloc.h>


static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic per seed, no libc state involved */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t pick(uint64_t lo, uint64_t hi) /* uniform in [lo, hi] */
{
	return lo + rng() % (hi - lo + 1);
}

/* The objects a site made, freed later in a seeded random order. */
struct pool {
	struct ledger *l;
	void **slot;
	uint32_t *h;
	size_t n;
};

#define POOL_CAP 8192

static void keep(struct pool *p, unsigned site, void *ptr, uint64_t size, int64_t tb, int64_t ta)
{
	if (!ptr) {
		dprintf(2, "unseen_allocs: allocation of %llu failed\n", (unsigned long long)size);
		_exit(3);
	}
	p->slot[p->n] = ptr;
	p->h[p->n] = ledger_alloc(p->l, site, size, tb, ta);
	p->n++;
}

/* Shuffles the pool, then frees all but `keep_live` of its objects; those stay live
 * until the process exits. */
static void release_shuffled(struct pool *p, size_t keep_live)
{
	for (size_t i = p->n; i > 1; i--) {
		size_t j = (size_t)pick(0, i - 1);
		void *t = p->slot[i - 1];
		uint32_t th = p->h[i - 1];
		p->slot[i - 1] = p->slot[j];
		p->h[i - 1] = p->h[j];
		p->slot[j] = t;
		p->h[j] = th;
	}
	for (size_t i = keep_live; i < p->n; i++) {
		int64_t fb = ledger_now();
		free(p->slot[i]);
		int64_t fa = ledger_now();
		ledger_free(p->l, p->h[i], fb, fa);
	}
	p->n = 0;
}

static const char F_BURST[] = "u_burst", F_GRID[] = "u_grid", F_WALK[] = "u_walk",
		  F_REARRAY[] = "u_rearray", F_POSIX[] = "u_posix", F_C11[] = "u_c11",
		  F_MEMALIGN[] = "u_memalign", F_PAGES[] = "u_pages", F_LEAKY[] = "u_leaky",
		  F_DEEP[] = "u_deep", F_SHARED[] = "u_shared", F_SLEEPY[] = "u_sleepy";

SITE void u_burst(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_BURST, "malloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = (size_t)pick(1, 512);
		int64_t tb = ledger_now();
		void *q = malloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

SITE void u_grid(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_GRID, "calloc");
	for (unsigned i = 0; i < n; i++) {
		size_t nmemb = (size_t)pick(1, 64), size = (size_t)pick(1, 256);
		int64_t tb = ledger_now();
		void *q = calloc(nmemb, size);
		int64_t ta = ledger_now();
		keep(p, s, q, nmemb * size, tb, ta);
	}
}

/* A realloc walk that starts from NULL and goes up and down in size. */
SITE void u_walk(struct pool *p, unsigned steps)
{
	unsigned s = ledger_site(p->l, F_WALK, "realloc");
	void *volatile null = NULL; /* a literal NULL lets GCC turn realloc into malloc */
	void *q = null;
	uint32_t h = 0;
	for (unsigned i = 0; i < steps; i++) {
		size_t size = (size_t)pick(1, 20000);
		int64_t tb = ledger_now();
		void *r = realloc(q, size);
		int64_t ta = ledger_now();
		if (!r)
			_exit(3);
		if (q)
			ledger_free(p->l, h, tb, ta);
		q = r;
		h = ledger_alloc(p->l, s, size, tb, ta);
	}
	p->slot[p->n] = q;
	p->h[p->n++] = h;
}

SITE void u_rearray(struct pool *p, unsigned steps)
{
	unsigned s = ledger_site(p->l, F_REARRAY, "reallocarray");
	void *q = NULL;
	uint32_t h = 0;
	for (unsigned i = 0; i < steps; i++) {
		size_t nmemb = (size_t)pick(1, 300), size = (size_t)pick(1, 24);
		int64_t tb = ledger_now();
		void *r = reallocarray(q, nmemb, size);
		int64_t ta = ledger_now();
		if (!r)
			_exit(3);
		if (q)
			ledger_free(p->l, h, tb, ta);
		q = r;
		h = ledger_alloc(p->l, s, nmemb * size, tb, ta);
	}
	p->slot[p->n] = q;
	p->h[p->n++] = h;
}

SITE void u_posix(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_POSIX, "posix_memalign");
	for (unsigned i = 0; i < n; i++) {
		size_t align = (size_t)1 << pick(3, 12), size = (size_t)pick(1, 5000);
		void *q = NULL;
		int64_t tb = ledger_now();
		int err = posix_memalign(&q, align, size);
		int64_t ta = ledger_now();
		keep(p, s, err ? NULL : q, size, tb, ta);
	}
}

SITE void u_c11(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_C11, "aligned_alloc");
	for (unsigned i = 0; i < n; i++) {
		size_t align = (size_t)1 << pick(4, 10), size = align * (size_t)pick(1, 8);
		int64_t tb = ledger_now();
		void *q = aligned_alloc(align, size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

SITE void u_memalign(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_MEMALIGN, "memalign");
	for (unsigned i = 0; i < n; i++) {
		size_t align = (size_t)1 << pick(4, 13), size = (size_t)pick(1, 9000);
		int64_t tb = ledger_now();
		void *q = memalign(align, size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

SITE void u_pages(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_PAGES, "valloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = 4096 * (size_t)pick(1, 4);
		int64_t tb = ledger_now();
		void *q = valloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

SITE void u_leaky(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_LEAKY, "malloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = (size_t)pick(1000, 300000);
		int64_t tb = ledger_now();
		void *q = malloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

SITE void u_deep(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_DEEP, "malloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = (size_t)pick(8, 64);
		int64_t tb = ledger_now();
		void *q = malloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

static volatile unsigned depth_sink;

/* Each recursion depth is its own call stack into u_deep, so its own context. */
NOT_SITE void u_descend(struct pool *p, unsigned depth, unsigned n)
{
	if (depth <= 1)
		u_deep(p, n);
	else
		u_descend(p, depth - 1, n);
	depth_sink += depth; /* keeps the recursive call out of tail position */
}

SITE void u_shared(struct pool *p, unsigned n)
{
	unsigned s = ledger_site(p->l, F_SHARED, "malloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = (size_t)pick(16, 4096);
		int64_t tb = ledger_now();
		void *q = malloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
	}
}

NOT_SITE void u_caller_a(struct pool *p, unsigned n)
{
	u_shared(p, n);
	depth_sink++;
}

NOT_SITE void u_caller_b(struct pool *p, unsigned n)
{
	u_shared(p, n);
	depth_sink++;
}

/* One object at a time, each alive for a seeded number of milliseconds. */
SITE void u_sleepy(struct pool *p, unsigned n, unsigned min_ms, unsigned max_ms)
{
	unsigned s = ledger_site(p->l, F_SLEEPY, "malloc");
	for (unsigned i = 0; i < n; i++) {
		size_t size = (size_t)pick(1, 100);
		int64_t tb = ledger_now();
		void *q = malloc(size);
		int64_t ta = ledger_now();
		keep(p, s, q, size, tb, ta);
		ledger_sleep_ms((long)pick(min_ms, max_ms));
		release_shuffled(p, 0);
	}
}

static void from(struct pool *p, const char *function, const char *allocator, const char *caller)
{
	ledger_context(p->l, ledger_site(p->l, function, allocator), caller);
}

int main(int argc, char **argv)
{
	long seed = 1, exit_delay_ms = 100, scale = 1;
	const struct ledger_opt opts[] = {
		{"seed", &seed}, {"exit-delay-ms", &exit_delay_ms}, {"scale", &scale},
	};
	const char *expect = ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	if (scale < 1 || scale > 4) {
		dprintf(2, "unseen_allocs: --scale 1..4\n");
		return 2;
	}
	rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed;
	for (int i = 0; i < 8; i++)
		rng();

	struct pool p = {0};
	p.l = ledger_new("unseen_allocs");
	p.slot = ledger_slots(POOL_CAP);
	p.h = (uint32_t *)ledger_slots(POOL_CAP);
	ledger_not_site(p.l, "main");
	ledger_not_site(p.l, "u_descend");
	ledger_not_site(p.l, "u_caller_a");
	ledger_not_site(p.l, "u_caller_b");

	/* The order of phases is seeded too; each phase runs once. */
	unsigned order[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	for (unsigned i = 10; i > 1; i--) {
		unsigned j = (unsigned)pick(0, i - 1), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	unsigned s = (unsigned)scale;
	for (unsigned k = 0; k < 10; k++) {
		switch (order[k]) {
		case 0:
			from(&p, F_BURST, "malloc", "main");
			u_burst(&p, (unsigned)pick(200, 3000) * s);
			release_shuffled(&p, 0);
			break;
		case 1:
			from(&p, F_GRID, "calloc", "main");
			u_grid(&p, (unsigned)pick(5, 60) * s);
			release_shuffled(&p, 0);
			break;
		case 2:
			from(&p, F_WALK, "realloc", "main");
			u_walk(&p, (unsigned)pick(5, 40) * s);
			from(&p, F_REARRAY, "reallocarray", "main");
			u_rearray(&p, (unsigned)pick(3, 20) * s);
			release_shuffled(&p, 0);
			break;
		case 3:
			from(&p, F_POSIX, "posix_memalign", "main");
			u_posix(&p, (unsigned)pick(3, 80) * s);
			from(&p, F_C11, "aligned_alloc", "main");
			u_c11(&p, (unsigned)pick(3, 40) * s);
			release_shuffled(&p, 0);
			break;
		case 4:
			from(&p, F_MEMALIGN, "memalign", "main");
			u_memalign(&p, (unsigned)pick(2, 30) * s);
			release_shuffled(&p, 0);
			break;
		case 5:
			from(&p, F_PAGES, "valloc", "main");
			u_pages(&p, (unsigned)pick(1, 6) * s);
			release_shuffled(&p, 0);
			break;
		case 6: {
			from(&p, F_LEAKY, "malloc", "main");
			unsigned n = (unsigned)pick(3, 15);
			u_leaky(&p, n);
			release_shuffled(&p, (size_t)pick(1, n - 1)); /* some survive to exit */
			break;
		}
		case 7: {
			/* distinct depths = distinct contexts */
			unsigned used = 0, calls = (unsigned)pick(3, 12);
			for (unsigned c = 0; c < calls; c++) {
				unsigned d = (unsigned)pick(1, 5);
				if (!(used & (1u << d))) {
					used |= 1u << d;
					from(&p, F_DEEP, "malloc", "u_descend");
				}
				u_descend(&p, d, (unsigned)pick(1, 20));
				release_shuffled(&p, 0);
			}
			break;
		}
		case 8:
			from(&p, F_SHARED, "malloc", "u_caller_a");
			from(&p, F_SHARED, "malloc", "u_caller_b");
			u_caller_a(&p, (unsigned)pick(1, 50) * s);
			release_shuffled(&p, 0);
			u_caller_b(&p, (unsigned)pick(1, 50) * s);
			release_shuffled(&p, 0);
			break;
		case 9:
			from(&p, F_SLEEPY, "malloc", "main");
			u_sleepy(&p, (unsigned)pick(2, 4), 20, 120);
			break;
		}
	}

	ledger_sleep_ms(exit_delay_ms);
	ledger_exit(p.l, ledger_now());
	ledger_write(p.l, expect);
	return 0;
}
