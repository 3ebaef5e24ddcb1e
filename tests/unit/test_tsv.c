/* fleet/tsv.c: TabSeparated rows as ClickHouse writes them (strings backslash-escaped,
 * arrays with quoted strings) read back exactly, hostile text included; malformed or
 * truncated fields are flagged and never read past the buffer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"

#include "fleet/tsv.h"

static const char *const hostile[] = {
	"plain", "", "tab\there", "new\nline", "back\\slash", "quote'd", "both\\'\t\n\r",
	"[bracket],comma", "std::vector<int, std::allocator<int> >::_M_realloc_insert",
};
#define N (sizeof(hostile) / sizeof(hostile[0]))

static void roundtrip(void **state)
{
	struct tsv_buf b = { 0 };
	struct tsv_cur c;

	for (size_t i = 0; i < N; i++) {
		tsv_str(&b, hostile[i]);
		tsv_tab(&b);
		tsv_u64(&b, UINT64_MAX - i);
		tsv_tab(&b);
		tsv_i64(&b, -(int64_t)i);
		tsv_tab(&b);
		tsv_arr_open(&b);
		for (size_t k = 0; k <= i; k++)
			tsv_arr_str(&b, hostile[k]);
		tsv_arr_close(&b);
		tsv_tab(&b);
		tsv_arr_open(&b);
		for (size_t k = 0; k < i; k++)
			tsv_arr_u64(&b, k * 1000);
		tsv_arr_close(&b);
		tsv_nl(&b);
	}
	assert_false(b.oom);
	tsv_cur_init(&c, &b);
	for (size_t i = 0; i < N; i++) {
		assert_true(tsv_next_row(&c));
		assert_string_equal(tsv_get_str(&c), hostile[i]);
		assert_true(tsv_get_u64(&c) == UINT64_MAX - i);
		assert_true(tsv_get_i64(&c) == -(int64_t)i);
		size_t k = 0;

		assert_true(tsv_arr_begin(&c));
		while (tsv_arr_more(&c))
			assert_string_equal(tsv_arr_get_str(&c), hostile[k++]);
		tsv_arr_end(&c);
		assert_int_equal(k, i + 1);
		k = 0;
		assert_true(tsv_arr_begin(&c));
		while (tsv_arr_more(&c))
			assert_true(tsv_arr_get_u64(&c) == 1000 * k++);
		tsv_arr_end(&c);
		assert_int_equal(k, i);
		assert_false(c.bad);
	}
	assert_false(tsv_next_row(&c));
	tsv_free(&b);
}

static void sql_literal(void **state)
{
	struct tsv_buf b = { 0 };

	tsv_sql_str(&b, "it's a \\ test");
	assert_string_equal(b.p, "'it\\'s a \\\\ test'");
	tsv_free(&b);
}

/* Truncated or malformed answers set bad and stop at the end of the buffer. */
static void malformed(void **state)
{
	static const char *const bad[] = { "['unterminated", "[1,2", "notanumber\n", "x\t[",
					   "'x'" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tsv_buf b = { 0 };
		struct tsv_cur c;

		tsv_raw(&b, bad[i], strlen(bad[i]));
		tsv_cur_init(&c, &b);
		if (i == 2) {
			tsv_get_u64(&c);
		} else if (i == 4) {
			tsv_arr_begin(&c);
		} else {
			if (i == 3)
				tsv_get_str(&c);
			if (tsv_arr_begin(&c))
				while (tsv_arr_more(&c))
					i == 0 ? (void)tsv_arr_get_str(&c) : (void)tsv_arr_get_u64(&c);
			tsv_arr_end(&c);
		}
		assert_true(c.bad);
		assert_true(c.p == NULL || c.p <= c.end);
		tsv_free(&b);
	}
	struct tsv_cur c;

	tsv_cur_init(&c, NULL);
	assert_false(tsv_next_row(&c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip),
		cmocka_unit_test(sql_literal),
		cmocka_unit_test(malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
