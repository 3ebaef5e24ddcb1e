/* alloc_trim: which names are allocator entry points, and that only the leaf's innermost
 * inlined ones go (never the frame's own function, never a caller's wrapper). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "tests/unit/mpd_cmocka.h"

#include "store/alloc_trim.h"

static void names(void **state)
{
	static const char *const yes[] = { "calloc", "malloc", "realloc", "__libc_calloc",
		"__rtld_calloc", "__GI___libc_malloc", "_Znwm", "_ZnamRKSt9nothrow_t",
		"_ZnwmSt11align_val_t", "operator new(unsigned long)", "posix_memalign" };
	static const char *const no[] = { "xmalloc", "calloc_wrapper", "allocate_dtv",
		"_ZNSt15__new_allocatorIiE8allocateEmPKv", "", "mallocx" };

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
		assert_true(alloc_trim_is_entry(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		assert_false(alloc_trim_is_entry(no[i]));
	assert_false(alloc_trim_is_entry(NULL));
}

static void leaf(void **state)
{
	/* ld.so's allocate_dtv: calloc (rtld-malloc.h, inlined) then allocate_dtv itself. */
	struct store_line l[] = {
		{ .function = "calloc", .mangled = "calloc", .file = "rtld-malloc.h", .line = 44,
		  .inlined = true },
		{ .function = "allocate_dtv", .file = "dl-tls.c", .line = 401 },
	};
	struct store_frame f = { .lines = l, .nlines = 2 };
	struct store_line own[] = { { .function = "malloc", .line = 3 } };
	struct store_frame g = { .lines = own, .nlines = 1 };
	struct store_line mid[] = {
		{ .function = "helper", .line = 9, .inlined = true },
		{ .function = "calloc", .line = 44, .inlined = true },
		{ .function = "f", .line = 1 },
	};
	struct store_frame h = { .lines = mid, .nlines = 3 };

	(void)state;
	alloc_trim_leaf(&f);
	assert_int_equal(f.nlines, 1);
	assert_string_equal(f.lines[0].function, "allocate_dtv");
	alloc_trim_leaf(&g);   /* not inlined: a frame's own function is never dropped */
	assert_int_equal(g.nlines, 1);
	alloc_trim_leaf(&h);   /* the innermost line is the program's: nothing goes */
	assert_int_equal(h.nlines, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(leaf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
