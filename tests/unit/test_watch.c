/* daemon/access/watch.c on real breakpoints: a thread of this process hammers a "hot"
 * buffer while a "cold" one is never touched; the windows must tell them apart, with
 * intervals that hold each one's rate, within the trap budget. Skips (cmocka skip)
 * when the breakpoint PMU is missing. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/access/watch.h"

#define HOT_WORDS 64                /* 512 B: 64 granules */
#define COLD_WORDS 4096             /* 32 KiB */
#define RUN_NS 1500000000ull        /* how long the windows run */
#define TICK_US 5000

#define WARM_WORDS 64               /* touched once per WARM_PERIOD_US: ~1000/s per granule */
#define WARM_PERIOD_US 1000

static volatile uint64_t *hot, *warm;
static volatile int stop;
static volatile uint64_t warm_rounds;

static void *pace(void *arg)
{
	(void)arg;
	while (!stop) {
		for (int i = 0; i < WARM_WORDS; i++)
			warm[i] = warm[i] + 1;   /* a load and a store: 2 accesses per granule */
		warm_rounds++;
		usleep(WARM_PERIOD_US);
	}
	return NULL;
}

static void *hammer(void *arg)
{
	(void)arg;
	for (uint64_t i = 0; !stop; i++)
		hot[i % HOT_WORDS] += 1;   /* every granule, at a rate far above the hot threshold */
	return NULL;
}

static uint64_t mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void test_hot_and_cold(void **state)
{
	(void)state;
	struct watch *w;
	struct watch_opts o = { .window_ns = 20000000, .traps_per_s = 4000 };
	mpd_require_breakpoints();
	int r = watch_open(&w, &o);

	assert_int_equal(r, 0);
	hot = calloc(HOT_WORDS, sizeof(uint64_t));
	uint64_t *cold = calloc(COLD_WORDS, sizeof(uint64_t));
	pthread_t th, tw;
	uint32_t me = (uint32_t)getpid();

	warm = calloc(WARM_WORDS, sizeof(uint64_t));
	assert_non_null(warm);
	assert_int_equal(pthread_create(&tw, NULL, pace, NULL), 0);
	assert_int_equal(watch_add(w, me, 1, (uint64_t)(uintptr_t)warm, WARM_WORDS * 8), 0);

	assert_non_null(hot);
	assert_non_null(cold);
	assert_int_equal(pthread_create(&th, NULL, hammer, NULL), 0);
	assert_int_equal(watch_add(w, me, 1, (uint64_t)(uintptr_t)hot, HOT_WORDS * 8), 0);
	assert_int_equal(watch_add(w, me, 1, (uint64_t)(uintptr_t)cold, COLD_WORDS * 8), 0);
	uint64_t t0 = mono(), r0 = warm_rounds;

	while (mono() - t0 < RUN_NS) {
		assert_true(watch_tick(w, mono()) >= 0);
		usleep(TICK_US);
	}
	double warm_true = 2.0 * (double)(warm_rounds - r0) / ((double)(mono() - t0) / 1e9);

	stop = 1;
	pthread_join(th, NULL);
	pthread_join(tw, NULL);

	struct watch_est eh, ec, ew;
	struct watch_counts c;

	assert_true(watch_take(w, me, 1, (uint64_t)(uintptr_t)hot, &eh));
	assert_true(watch_take(w, me, 1, (uint64_t)(uintptr_t)cold, &ec));
	assert_true(watch_take(w, me, 1, (uint64_t)(uintptr_t)warm, &ew));
	watch_get_counts(w, &c);
	print_message("warm: %lu windows %lu hits rate %.0f [%.0f, %.0f], true %.0f per granule\n",
		      ew.windows, ew.hits, ew.rate, ew.lo, ew.hi, warm_true);
	print_message("trap %.1f us; hot: %lu windows %lu hits rate %.0f/s/granule [%.0f, %.0f] "
		      "(%lu saturated); cold: %lu windows %lu hits, rate < %.2f; %lu traps in "
		      "%.2f s\n", c.trap_ns / 1e3, eh.windows, eh.hits, eh.rate, eh.lo, eh.hi,
		      eh.saturated, ec.windows, ec.hits, ec.hi, c.traps, RUN_NS / 1e9);
	assert_true(eh.windows >= 3 && ec.windows >= 3);
	/* The hot granules: the traps saturate (the thread does nothing but trap), so the
	 * rate shown is the trap rate, a lower bound near 1 / trap cost. */
	assert_true(eh.hits > 0 && eh.saturated > 0);
	assert_true(eh.rate > 0.5e9 / c.trap_ns);
	assert_true(eh.lo <= eh.rate && eh.rate <= eh.hi);
	/* The paced buffer: its true rate within a factor 1.5 of the estimate (the window
	 * edges and the pacing thread's wake-ups under load make more than Poisson noise). */
	assert_true(ew.hits > 0 && ew.rate > warm_true / 1.5 && ew.rate < warm_true * 1.5);
	/* The cold buffer: no hit, and an upper bound from the time watched. */
	assert_int_equal(ec.hits, 0);
	assert_true(ec.rate == 0 && ec.hi > 0 && isfinite(ec.hi));
	/* The budget: traps stay within traps_per_s over the run plus one window's worth. */
	assert_true((double)c.traps <= o.traps_per_s * RUN_NS / 1e9 + WATCH_SLOTS * 2 * WATCH_MAX_HITS);
	/* Taken objects are gone. */
	assert_false(watch_take(w, me, 1, (uint64_t)(uintptr_t)hot, &eh));
	assert_true(watch_est_accesses(&eh, 0, 0) == 0);
	watch_close(w);
	free((void *)hot);
	free(cold);
	free((void *)warm);
}

/* An object busy while it is built (the sampler's watch from its allocation: 16 traps in
 * 20 ms) and left alone for the rest of a 10 s life (the recorder's later windows: no
 * trap): its accesses are the early traps plus the later windows' rate (0) over the
 * rest, not the early rate over the whole life (a built-then-cold table, lua's largest
 * context, was called hot by that); an object younger than min_age_ns gets no window
 * (the sampler's own watch covers it). */
static void test_early_and_late(void **state)
{
	(void)state;
	struct watch *w;
	struct watch_opts o = { .window_ns = 5000000, .traps_per_s = 4000, .min_age_ns = 50000000 };
	mpd_require_breakpoints();
	int r = watch_open(&w, &o);

	assert_int_equal(r, 0);
	uint64_t *built = calloc(512, sizeof(uint64_t)), *young = calloc(512, sizeof(uint64_t));
	uint32_t me = (uint32_t)getpid();
	uint64_t granules = 512, t0 = mono();

	assert_non_null(built);
	assert_non_null(young);
	assert_int_equal(watch_add(w, me, 1, (uint64_t)(uintptr_t)built, 512 * 8), 0);
	assert_int_equal(watch_report(w, me, 1, (uint64_t)(uintptr_t)built, 16, 20000000, 16,
				      false, false), 0);
	while (mono() - t0 < 300000000ull) {
		if (mono() - t0 > 280000000ull && !young[0]) {
			young[0] = 1;
			assert_int_equal(watch_add(w, me, 1, (uint64_t)(uintptr_t)young, 512 * 8), 0);
		}
		assert_true(watch_tick(w, mono()) >= 0);
		usleep(TICK_US);
	}
	struct watch_est e;

	assert_false(watch_take(w, me, 1, (uint64_t)(uintptr_t)young, &e));
	assert_true(watch_take(w, me, 1, (uint64_t)(uintptr_t)built, &e));
	double a = watch_est_accesses(&e, 512 * 8, 10000000000ull);

	print_message("built then idle: %lu windows, %lu hits; %.1f accesses per granule over "
		      "10 s (16 seen while built)\n", e.windows, e.hits, a / (double)granules);
	assert_true(e.windows >= 3 && e.hits == 16);
	assert_true(a / (double)granules >= 16 && a / (double)granules < 20);
	watch_close(w);
	free(built);
	free(young);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_hot_and_cold),
					    cmocka_unit_test(test_early_and_late) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
