/* cfi_func: FDE starts from .eh_frame_hdr, checked against the symbol table of this test
 * binary and of libc (the stripped string functions it is for), and on broken input. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/cfi_func.h"
#include "symbolizer/elfsym.h"

__attribute__((noinline, used)) int cfi_probe(int x)
{
	return x * 3 + 1;
}

/* Inside a function with a symbol, the FDE starts where the symbol does. */
static void start_matches_the_symbol(void **state)
{
	struct cfi_func *c;
	struct elfsym *es;
	uint64_t fn, start, delta;

	assert_int_equal(elfsym_open(&es, "/proc/self/exe"), 0);
	assert_int_equal(elfsym_func_offset(es, "cfi_probe", &fn), 0);
	assert_int_equal(cfi_func_open(&c, "/proc/self/exe"), 0);
	assert_int_equal(cfi_func_start(c, fn + 3, &start), 0);
	assert_int_equal(start, fn);
	assert_int_equal(cfi_func_start(c, fn, &start), 0);
	assert_int_equal(start, fn);
	/* every symbol of main with a size: the FDE start is its start */
	assert_int_equal(elfsym_func_offset(es, "main", &fn), 0);
	assert_int_equal(cfi_func_start(c, fn + 1, &start), 0);
	assert_non_null(elfsym_lookup_offset(es, start, &delta));
	assert_int_equal(delta, 0);
	assert_int_equal(cfi_func_start(c, 0, &start), -ENOENT);     /* the ELF header */
	cfi_func_close(c);
	elfsym_close(es);
}

/* libc's memcmp implementations have no .dynsym entry but an FDE: the start found for
 * an offset inside memcmp's resolved implementation lies before it, within it. */
static void libc_string_function_has_a_start(void **state)
{
	char path[256] = "", line[512];
	unsigned long lo, hi, off;
	FILE *f = fopen("/proc/self/maps", "r");
	uintptr_t ip = (uintptr_t)memcmp;   /* libc's IFUNC dispatcher (no .dynsym size) */
	struct cfi_func *c;
	uint64_t start, foff = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char perm[8], p[256] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &lo, &hi, perm, &off, p) >= 4 &&
		    ip >= lo && ip < hi && strchr(perm, 'x')) {
			snprintf(path, sizeof(path), "%s", p);
			foff = ip - lo + off;
		}
	}
	fclose(f);
	if (!path[0] || !strstr(path, "libc.so")) {
		skip();   /* memcmp not in libc's text (static or sanitized build) */
		return;
	}
	assert_int_equal(cfi_func_open(&c, path), 0);
	assert_int_equal(cfi_func_start(c, foff + 2, &start), 0);   /* the dispatcher itself */
	assert_true(start <= foff + 2 && foff + 2 - start < 4096);
	cfi_func_close(c);
}

/* The same image from memory gives the same starts; every truncation of it is refused or
 * answers within the image (the table's bounds are checked against the file's size). */
static void image_in_memory_and_truncated(void **state)
{
	struct cfi_func *c, *f;
	struct elfsym *es;
	uint64_t fn, a, b;
	FILE *fp = fopen("/proc/self/exe", "rb");
	static uint8_t img[16 << 20];
	size_t n;

	assert_non_null(fp);
	n = fread(img, 1, sizeof(img), fp);
	fclose(fp);
	assert_true(n > 0 && n < sizeof(img));
	assert_int_equal(elfsym_open(&es, "/proc/self/exe"), 0);
	assert_int_equal(elfsym_func_offset(es, "cfi_probe", &fn), 0);
	assert_int_equal(cfi_func_open(&f, "/proc/self/exe"), 0);
	assert_int_equal(cfi_func_open_mem(&c, img, n), 0);
	assert_int_equal(cfi_func_start(c, fn + 3, &a), 0);
	assert_int_equal(cfi_func_start(f, fn + 3, &b), 0);
	assert_int_equal(a, b);
	cfi_func_close(c);
	for (size_t cut = 0; cut < n; cut += n / 97 + 1)
		if (cfi_func_open_mem(&c, img, cut) == 0) {
			cfi_func_start(c, fn + 3, &a);
			cfi_func_close(c);
		}
	cfi_func_close(f);
	elfsym_close(es);
}

static void refuses_what_is_not_a_table(void **state)
{
	struct cfi_func *c = (void *)1;
	char tmp[] = "/tmp/cfi_func.XXXXXX";
	int fd = mkstemp(tmp);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "\177ELF garbage", 12), 12);
	close(fd);
	assert_true(cfi_func_open(&c, tmp) < 0);
	assert_null(c);
	assert_true(cfi_func_open(&c, "/proc/self/status") < 0);   /* not an ELF file */
	assert_true(cfi_func_open(&c, "/nonexistent") == -ENOENT);
	assert_int_equal(cfi_func_start(NULL, 0, &(uint64_t){0}), -ENOENT);
	unlink(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(start_matches_the_symbol),
		cmocka_unit_test(libc_string_function_has_a_start),
		cmocka_unit_test(image_in_memory_and_truncated),
		cmocka_unit_test(refuses_what_is_not_a_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
