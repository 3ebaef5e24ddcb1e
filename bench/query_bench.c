/* Times `memprofd query contexts --limit 20` (store_query_contexts, sorted by bytes) on a
 * store made by gen_store: the median of QB_RUNS runs after one warm-up, against the
 * QB_TARGET_MS budget. Prints one line per case; exit 1 if a case misses the budget.
 * usage: query_bench --db PATH [--binary ID] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

#define QB_RUNS 7
#define QB_LIMIT 20
#define QB_TARGET_MS 200.0

static int count_cb(const struct store_ctx_row *row, void *arg)
{
	(*(unsigned *)arg)++;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int bench(struct store *s, const char *name, const struct store_ctx_filter *f)
{
	double t[QB_RUNS];
	unsigned n = 0;

	if (store_query_contexts(s, f, count_cb, &n) < 0) {
		fprintf(stderr, "query_bench: %s\n", store_errmsg(s));
		return 1;
	}
	for (int i = 0; i < QB_RUNS; i++) {
		double t0 = now_ms();

		n = 0;
		store_query_contexts(s, f, count_cb, &n);
		t[i] = now_ms() - t0;
	}
	qsort(t, QB_RUNS, sizeof(t[0]), cmp_d);
	printf("query_bench: %-28s %u rows  median %.1f ms  (min %.1f, max %.1f)  "
	       "target <= %.0f ms: %s\n", name, n, t[QB_RUNS / 2], t[0], t[QB_RUNS - 1],
	       QB_TARGET_MS, t[QB_RUNS / 2] <= QB_TARGET_MS ? "ok" : "MISSED");
	return t[QB_RUNS / 2] <= QB_TARGET_MS ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *db = NULL, *binary = NULL;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--db"))
			db = argv[i + 1];
		else if (!strcmp(argv[i], "--binary"))
			binary = argv[i + 1];
	}
	if (!db) {
		fprintf(stderr, "usage: query_bench --db PATH [--binary ID]\n");
		return 2;
	}

	struct store *s;
	char err[512];

	if (store_open(&s, db, STORE_RDONLY, err, sizeof(err)) < 0) {
		fprintf(stderr, "query_bench: %s: %s\n", db, err);
		return 1;
	}

	int bad = 0;
	static const char *const sorts[] = { "bytes", "count", "lifetime", "density", "accesses" };

	for (int k = 0; k <= STORE_SORT_ACCESSES; k++) {
		struct store_ctx_filter f = { .sort = (enum store_sort)k, .limit = QB_LIMIT };
		char name[64];

		snprintf(name, sizeof(name), "top-%d --sort %s", QB_LIMIT, sorts[k]);
		bad |= bench(s, name, &f);
	}
	if (binary) {
		struct store_ctx_filter f = { .binary = binary, .limit = QB_LIMIT };

		bad |= bench(s, "top-20 --binary", &f);
	}
	store_close(s);
	return bad;
}
