/* store_query_contexts() in-process on a store made by gen_store, top 20 by bytes, for the
 * filters that choose between its plans: each filter with the automatic plan (median of
 * --runs after a warm-up) and with every plan forced (median of --plan-runs), side by
 * side, so that the README can say what each plan costs and why AUTO picks the one it
 * does. The rows each plan returns are compared with AUTO's: a difference is an error.
 * bench/query_bench.py runs it after the CLI timings.
 * usage: query_bench --db PATH [--runs N] [--plan-runs N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

#define QB_LIMIT 20
#define QB_MAX_RUNS 99
#define QB_T0_NS 1700000000000000000ll   /* gen_store's first bucket */
#define QB_DAY_NS (1440 * 60000000000ll) /* its default span */
#define QB_HOUR_NS 3600000000000ll

struct got {
	unsigned n;
	int64_t id[QB_LIMIT];
	struct mib m[QB_LIMIT];
};

static int collect(const struct store_ctx_row *row, void *arg)
{
	struct got *g = arg;

	if (g->n < QB_LIMIT) {
		g->id[g->n] = row->context_id;
		g->m[g->n] = row->mib;
	}
	g->n++;
	return 0;
}

static bool hot_only(const struct mib *m, void *arg)
{
	/* reporter/classify.c's hot: density above 1000 accesses per byte per second */
	return store_lifetime_access_density(m) > 1000.0;
}

static double now_ms(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median wall ms of runs calls, and their median CPU ms in *cpu (this machine is shared:
 * the wall time includes waiting for a core); the last call's rows in *g. */
static double timed(struct store *s, const struct store_ctx_filter *f, int runs, struct got *g,
		    double *cpu)
{
	double t[QB_MAX_RUNS], c[QB_MAX_RUNS];

	for (int i = 0; i < runs; i++) {
		double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);

		*g = (struct got){0};
		if (store_query_contexts(s, f, collect, g) < 0) {
			fprintf(stderr, "query_bench: %s\n", store_errmsg(s));
			exit(1);
		}
		t[i] = now_ms(CLOCK_MONOTONIC) - t0;
		c[i] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
	}
	qsort(t, (size_t)runs, sizeof(t[0]), cmp_d);
	qsort(c, (size_t)runs, sizeof(c[0]), cmp_d);
	*cpu = c[runs / 2];
	return t[runs / 2];
}

int main(int argc, char **argv)
{
	const char *db = NULL;
	int runs = 7, plan_runs = 1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--db"))
			db = argv[i + 1];
		else if (!strcmp(argv[i], "--runs"))
			runs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--plan-runs"))
			plan_runs = atoi(argv[i + 1]);
	}
	if (!db || runs < 1 || runs > QB_MAX_RUNS || plan_runs < 1 || plan_runs > QB_MAX_RUNS) {
		fprintf(stderr, "usage: query_bench --db PATH [--runs N] [--plan-runs N]\n");
		return 2;
	}

	struct store *s;
	char err[512];

	if (store_open(&s, db, STORE_RDONLY, err, sizeof(err)) < 0) {
		fprintf(stderr, "query_bench: %s\n", err);
		return 1;
	}

	const int64_t end = QB_T0_NS + QB_DAY_NS;
	const struct { const char *name; struct store_ctx_filter f; } cases[] = {
		{ "no filter", { 0 } },
		{ "--class hot", { .accept = hot_only } },
		{ "--pid (1 of 32)", { .pid = 1005 } },
		{ "--since last hour", { .since_ns = end - QB_HOUR_NS } },
		{ "--since last 5 min", { .since_ns = end - QB_HOUR_NS / 12 } },
		{ "--since last 12 h", { .since_ns = end - 12 * QB_HOUR_NS } },
		{ "--until first hour", { .until_ns = QB_T0_NS + QB_HOUR_NS } },
		{ "--since last hour --class hot", { .since_ns = end - QB_HOUR_NS, .accept = hot_only } },
	};
	static const char *const plans[] = { "auto", "totals", "walk", "group", "group_by_time" };
	int bad = 0;

	printf("%-30s", "top 20 by bytes: wall/cpu ms");
	for (int p = 0; p <= STORE_PLAN_GROUP_BY_TIME; p++)
		printf(" %15s", plans[p]);
	printf("\n");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct store_ctx_filter f = cases[c].f;
		struct got want, g;
		bool rows = f.pid || f.since_ns || f.until_ns;

		f.limit = QB_LIMIT;
		double w, cpu;

		timed(s, &f, 1, &want, &cpu);               /* warm-up */
		w = timed(s, &f, runs, &want, &cpu);
		printf("%-30s %7.0f/%-7.0f", cases[c].name, w, cpu);
		fflush(stdout);
		for (int p = STORE_PLAN_TOTALS; p <= STORE_PLAN_GROUP_BY_TIME; p++) {
			/* Plans that do not apply fall back to group: not worth a column. */
			if ((p == STORE_PLAN_TOTALS && rows) || (p == STORE_PLAN_WALK && !rows) ||
			    (p == STORE_PLAN_GROUP_BY_TIME && !f.since_ns && !f.until_ns)) {
				printf(" %15s", "-");
				continue;
			}
			f.plan = (enum store_plan)p;
			w = timed(s, &f, plan_runs, &g, &cpu);
			printf(" %7.0f/%-7.0f", w, cpu);
			fflush(stdout);
			if (g.n != want.n || memcmp(g.id, want.id, sizeof(g.id)) ||
			    memcmp(g.m, want.m, sizeof(g.m))) {
				printf(" <- differs from auto");
				bad = 1;
			}
		}
		printf("\n");
	}
	store_close(s);
	return bad;
}
