/* killed: allocates at one site (some blocks freed, some still live), writes its --expect
 * JSON, then dies by --signal (default SIGKILL; 11 = SIGSEGV, without a core file).
 * A recorder must keep what it saw, with the live blocks counted up to the death. */
#include "ledger.h"

#include <signal.h>
#include <sys/resource.h>


static const char F_SITE[] = "killed_site";

SITE void killed_site(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	unsigned s = ledger_site(l, F_SITE, "malloc");
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

int main(int argc, char **argv)
{
	long n = 6, size = 4096, freed = 3, sig = SIGKILL, delay_ms = 0;
	const struct ledger_opt opts[] = {
		{"count", &n}, {"size", &size}, {"freed", &freed}, {"signal", &sig},
		{"delay-ms", &delay_ms},
	};
	const char *expect = ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	if (freed > n || sig < 1 || sig >= 32 || n < 1) {
		dprintf(2, "killed: --freed <= --count, --count >= 1, --signal 1..31\n");
		return 2;
	}
	struct ledger *l = ledger_new("killed");
	void **p = ledger_slots((size_t)n);
	uint32_t *h = (uint32_t *)ledger_slots((size_t)n);
	ledger_not_site(l, "main");
	ledger_context(l, ledger_site(l, F_SITE, "malloc"), "main");
	killed_site(l, p, h, (unsigned)n, (size_t)size);
	for (long i = 0; i < freed; i++) {
		int64_t fb = ledger_now();
		free(p[i]);
		int64_t fa = ledger_now();
		ledger_free(l, h[i], fb, fa);
	}
	ledger_sleep_ms(delay_ms);
	ledger_exit(l, ledger_now());
	ledger_write(l, expect);

	struct rlimit no_core = {0, 0};
	setrlimit(RLIMIT_CORE, &no_core);
	signal((int)sig, SIG_DFL);
	sigset_t all;
	sigemptyset(&all);
	sigaddset(&all, (int)sig);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	raise((int)sig);
	dprintf(2, "killed: still alive after signal %ld\n", sig);
	return 4;
}
