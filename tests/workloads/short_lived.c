/* short_lived: a few allocations, one of them in an ELF constructor before main, then an
 * immediate exit. A recorder must have its probes in place before the program's first
 * instruction and must not lose the events of a process that is gone at once. */
#include "ledger.h"


static const char F_CTOR[] = "sl_ctor_site", F_MAIN[] = "sl_site";
static struct ledger *the_ledger;
static void *ctor_blocks[8];
static uint32_t ctor_h[8];

SITE void sl_ctor_site(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	unsigned s = ledger_site(l, F_CTOR, "malloc");
	for (unsigned i = 0; i < n; i++) {
		int64_t tb = ledger_now();
		void *p = malloc(size);
		int64_t ta = ledger_now();
		if (!p)
			_exit(3);
		out[i] = p;
		h[i] = ledger_alloc(l, s, size, tb, ta);
	}
}

SITE void sl_site(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	unsigned s = ledger_site(l, F_MAIN, "malloc");
	for (unsigned i = 0; i < n; i++) {
		int64_t tb = ledger_now();
		void *p = malloc(size);
		int64_t ta = ledger_now();
		if (!p)
			_exit(3);
		out[i] = p;
		h[i] = ledger_alloc(l, s, size, tb, ta);
	}
}

/* Two 32-byte blocks, live until exit. */
__attribute__((constructor)) NOT_SITE static void sl_ctor(void)
{
	the_ledger = ledger_new("short_lived");
	ledger_context(the_ledger, ledger_site(the_ledger, F_CTOR, "malloc"), "sl_ctor");
	sl_ctor_site(the_ledger, ctor_blocks, ctor_h, 2, 32);
}

int main(int argc, char **argv)
{
	long n = 3, size = 64, delay_ms = 0;
	/* --delay-ms: sleep before main's allocations, so that a daemon that discovers the
	 * process at its exec has attached by then. */
	const struct ledger_opt opts[] = {{"count", &n}, {"size", &size}, {"delay-ms", &delay_ms}};
	const char *expect = ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	struct ledger *l = the_ledger;
	void *p[64];
	uint32_t h[64];
	if (n > 64)
		n = 64;
	ledger_not_site(l, "main");
	ledger_not_site(l, "sl_ctor");
	ledger_context(l, ledger_site(l, F_MAIN, "malloc"), "main");
	if (delay_ms > 0)
		nanosleep(&(struct timespec){ delay_ms / 1000, delay_ms % 1000 * 1000000 }, NULL);
	sl_site(l, p, h, (unsigned)n, (size_t)size);
	for (long i = 0; i < n; i++) {
		int64_t fb = ledger_now();
		free(p[i]);
		int64_t fa = ledger_now();
		ledger_free(l, h[i], fb, fa);
	}
	ledger_exit(l, ledger_now());
	ledger_write(l, expect);
	return 0;
}
