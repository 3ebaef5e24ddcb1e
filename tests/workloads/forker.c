/* forker: allocations on both sides of fork(). The parent allocates (and frees) at one
 * site, forks --children children one after another, each allocating at its own sites
 * (some blocks still live when it exits), waits for each, then allocates at a third site.
 * The ledger is shared memory, so the parent's --expect JSON includes the children. */
#include "ledger.h"

#include <sys/wait.h>


static const char F_BEFORE[] = "parent_before_fork", F_CHILD[] = "child_site",
		  F_CHILD_LEAK[] = "child_leak_site", F_AFTER[] = "parent_after_fork";

/* Each site mallocs n blocks of `size`, keeping them in out/h. */
#define SITE_BODY(name)                                                            \
	unsigned s = ledger_site(l, name, "malloc");                               \
	for (unsigned i = 0; i < n; i++) {                                         \
		int64_t tb = ledger_now();                                         \
		void *p = malloc(size);                                            \
		int64_t ta = ledger_now();                                         \
		if (!p)                                                            \
			_exit(3);                                                  \
		out[i] = p;                                                        \
		h[i] = ledger_alloc(l, s, size, tb, ta);                           \
	}

SITE void parent_before_fork(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	SITE_BODY(F_BEFORE)
}

SITE void child_site(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	SITE_BODY(F_CHILD)
}

SITE void child_leak_site(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	SITE_BODY(F_CHILD_LEAK)
}

SITE void parent_after_fork(struct ledger *l, void **out, uint32_t *h, unsigned n, size_t size)
{
	SITE_BODY(F_AFTER)
}

static void free_n(struct ledger *l, void **p, uint32_t *h, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int64_t fb = ledger_now();
		free(p[i]);
		int64_t fa = ledger_now();
		ledger_free(l, h[i], fb, fa);
	}
}

NOT_SITE static int child_main(struct ledger *l, void **p, uint32_t *h,
						long n, long size, long leak_n, long leak_size,
						long child_ms)
{
	child_site(l, p, h, (unsigned)n, (size_t)size);
	free_n(l, p, h, (unsigned)n);
	child_leak_site(l, p, h, (unsigned)leak_n, (size_t)leak_size);
	ledger_sleep_ms(child_ms);
	ledger_exit(l, ledger_now());
	return 0;
}

int main(int argc, char **argv)
{
	long children = 2, before_n = 5, before_size = 100, child_n = 3, child_size = 200;
	long leak_n = 2, leak_size = 500, after_n = 4, after_size = 300, child_ms = 50;
	const struct ledger_opt opts[] = {
		{"children", &children}, {"before-count", &before_n}, {"before-size", &before_size},
		{"child-count", &child_n}, {"child-size", &child_size},
		{"child-leak-count", &leak_n}, {"child-leak-size", &leak_size},
		{"after-count", &after_n}, {"after-size", &after_size}, {"child-ms", &child_ms},
	};
	const char *expect = ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	struct ledger *l = ledger_new("forker");
	size_t cap = 16;
	for (unsigned i = 0; i < 4; i++) {
		long v = (long[]){before_n, child_n, leak_n, after_n}[i];
		if ((size_t)v > cap)
			cap = (size_t)v;
	}
	void **p = ledger_slots(cap);
	uint32_t *h = (uint32_t *)ledger_slots(cap);
	ledger_not_site(l, "main");
	ledger_not_site(l, "child_main");

	ledger_context(l, ledger_site(l, F_BEFORE, "malloc"), "main");
	parent_before_fork(l, p, h, (unsigned)before_n, (size_t)before_size);
	free_n(l, p, h, (unsigned)before_n); /* nothing of the parent is live in a child */

	if (children > 0) {
		ledger_context(l, ledger_site(l, F_CHILD, "malloc"), "child_main");
		ledger_context(l, ledger_site(l, F_CHILD_LEAK, "malloc"), "child_main");
	}
	for (long c = 0; c < children; c++) {
		pid_t pid = fork();
		if (pid < 0)
			ledger_die("fork");
		if (pid == 0)
			_exit(child_main(l, p, h, child_n, child_size, leak_n, leak_size, child_ms));
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				ledger_die("waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			dprintf(2, "forker: child %d failed (status 0x%x)\n", (int)pid, st);
			return 1;
		}
	}

	ledger_context(l, ledger_site(l, F_AFTER, "malloc"), "main");
	parent_after_fork(l, p, h, (unsigned)after_n, (size_t)after_size);
	free_n(l, p, h, (unsigned)after_n);
	ledger_exit(l, ledger_now());
	ledger_write(l, expect);
	return 0;
}
