/* heap_live: a group's bytes x mean lifetime spread back from the middle of its end
 * bucket into the bars it spans, the total conserved, bars widened past the limit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "reporter/heap_live.h"

#define S 1000000000LL
#define B (60 * S)

static char *write_bars(struct heap_live *hl, char **top0, int64_t *w)
{
	char *buf = NULL, *tb[HEAP_LIVE_TOP] = { 0 };
	size_t len = 0, tl[HEAP_LIVE_TOP] = { 0 };
	FILE *m = open_memstream(&buf, &len), *top[HEAP_LIVE_TOP];

	for (int i = 0; i < HEAP_LIVE_TOP; i++)
		top[i] = open_memstream(&tb[i], &tl[i]);
	assert_int_equal(heap_live_write(hl, m, top, w), 0);
	fclose(m);
	for (int i = 0; i < HEAP_LIVE_TOP; i++)
		fclose(top[i]);
	*top0 = tb[0];
	for (int i = 1; i < HEAP_LIVE_TOP; i++)
		free(tb[i]);
	return buf;
}

static void spreads_back(void **state)
{
	struct heap_live hl = { .bucket_ns = B };
	char *top, *bars;
	int64_t w;

	(void)state;
	/* 10 objects, 1000 B, 150 s each, ended in the bucket at 600 s: live 480..630 s. A
	 * second group, cold, 1 object of 60 B for 1 ms: < 1 B on average, not drawn. */
	assert_int_equal(heap_live_add(&hl, 10 * B, 1000, 10, 10 * 150 * S, 1, 0), 0);
	assert_int_equal(heap_live_add(&hl, 10 * B, 60, 1, S / 1000, 2, -1), 0);
	bars = write_bars(&hl, &top, &w);
	assert_int_equal(w, B);
	assert_string_equal(bars, "[480000000000,0,1000,0],\n[540000000000,0,1000,0],\n"
			    "[600000000000,0,500,0]");
	assert_string_equal(top, "[480000000000,1000],[540000000000,1000],[600000000000,500]");
	free(bars);
	free(top);
	heap_live_free(&hl);
}

static void widens(void **state)
{
	struct heap_live hl = { .bucket_ns = B };
	char *top, *bars;
	int64_t w;
	double sum = 0;

	(void)state;
	/* Alive 2 * HEAP_LIVE_MAX_BUCKETS minutes: bars of two or more minutes, the bytes x
	 * seconds the same. */
	uint64_t life = 2ull * HEAP_LIVE_MAX_BUCKETS * (uint64_t)B;

	assert_int_equal(heap_live_add(&hl, 5000 * B, 6000, 1, life, 0, -1), 0);
	bars = write_bars(&hl, &top, &w);
	assert_true(w >= 2 * B && w % B == 0);
	for (char *p = bars; (p = strchr(p, '[')); p++) {
		long long t;
		double a, b, c;

		assert_int_equal(sscanf(p, "[%lld,%lf,%lf,%lf]", &t, &a, &b, &c), 4);
		sum += a + b + c;
	}
	assert_true(sum * (double)w / 1e9 > 0.999 * 6000.0 * (double)life / 1e9);
	assert_true(sum * (double)w / 1e9 < 1.001 * 6000.0 * (double)life / 1e9);
	assert_string_equal(top, "");
	free(bars);
	free(top);
	heap_live_free(&hl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spreads_back),
		cmocka_unit_test(widens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
