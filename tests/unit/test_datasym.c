/* Unit tests for symbolizer/datasym.c. Expected values come from readelf -sW / -SW (an
 * independent reading of the same tables): every global, static and TLS variable of the
 * fixture resolves to itself at its first and last byte, with its section; one byte past
 * it does not. Plus this process's own statics through /proc/self/maps, and hostile images. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#include "symbolizer/datasym.h"
#include "symbolizer/maps.h"

#define UNUSED __attribute__((unused))

struct rsym { uint64_t value, size; char section[64]; };

/* Symbol `name` from readelf: value, size, and its section's name. */
static void readelf_sym(const char *bin, const char *name, struct rsym *out)
{
	char cmd[PATH_MAX + 64], line[1024], secs[256][64] = { { 0 } };
	unsigned idx;
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf -SW '%s'", bin);
	assert_non_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f)) {
		char sname[64];
		char *p = strchr(line, '[');
		if (p && sscanf(p, "[%u] %63s", &idx, sname) == 2 && idx < 256)
			strcpy(secs[idx], sname);
	}
	pclose(f);
	snprintf(cmd, sizeof(cmd), "readelf -sW '%s'", bin);
	assert_non_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		char sz[32], type[16], bind[16], vis[16], ndx[16], n[256];

		if (sscanf(line, "%*s %llx %31s %15s %15s %15s %15s %255s", &v, sz, type, bind, vis,
			   ndx, n) != 7 || strcmp(n, name))
			continue;
		out->value = v;
		out->size = strtoull(sz, NULL, 0);
		idx = (unsigned)atoi(ndx);
		assert_true(idx < 256);
		strcpy(out->section, secs[idx]);
		found = true;
	}
	pclose(f);
	if (!found)
		fail_msg("readelf: no %s in %s", name, bin);
}

static void check_var(const struct datasym *ds, const char *bin, const char *name,
		      const char *section, bool tls, bool local)
{
	struct datasym_hit h;
	struct rsym r;
	int (*look)(const struct datasym *, uint64_t, struct datasym_hit *) =
		tls ? datasym_lookup_tls : datasym_lookup;

	readelf_sym(bin, name, &r);
	assert_string_equal(r.section, section);   /* the fixture put it where we think */
	assert_true(r.size > 0);
	assert_int_equal(look(ds, r.value, &h), 0);
	assert_string_equal(h.name, name);
	assert_string_equal(h.section, section);
	assert_int_equal(h.start, r.value);
	assert_int_equal(h.size, r.size);
	assert_int_equal(h.offset, 0);
	assert_int_equal(h.tls, tls);
	assert_int_equal(h.local, local);
	assert_int_equal(look(ds, r.value + r.size - 1, &h), 0);
	assert_string_equal(h.name, name);
	assert_int_equal(h.offset, r.size - 1);
	if (look(ds, r.value + r.size, &h) == 0)
		assert_string_not_equal(h.name, name);
}

static void check_fixture(const char *bin)
{
	struct datasym *ds = NULL;

	assert_int_equal(datasym_open(&ds, bin), 0);
	assert_true(datasym_count(ds) >= 7);
	check_var(ds, bin, "g_table", ".bss", false, false);
	check_var(ds, bin, "s_hidden", ".data", false, true);
	check_var(ds, bin, "g_ro", ".rodata", false, false);
	check_var(ds, bin, "g_ptrs", ".data.rel.ro", false, false);
	check_var(ds, bin, "s_bss", ".bss", false, true);
	check_var(ds, bin, "tls_counter", ".tbss", true, false);
	check_var(ds, bin, "tls_init", ".tdata", true, false);
	datasym_close(ds);
}

static void test_fixture_gcc(void **s UNUSED) { check_fixture("fixtures_dwarf/dwarf_c_gcc"); }
static void test_fixture_clang(void **s UNUSED) { check_fixture("fixtures_dwarf/dwarf_c_clang"); }

static void test_functions_are_not_data(void **s UNUSED)
{
	struct datasym *ds = NULL;
	struct datasym_hit h;
	struct rsym r;

	readelf_sym("fixtures_dwarf/dwarf_c_gcc", "plain", &r);
	assert_int_equal(datasym_open(&ds, "fixtures_dwarf/dwarf_c_gcc"), 0);
	assert_int_equal(datasym_lookup(ds, r.value, &h), -ENOENT);
	datasym_close(ds);
}

static int this_static[37] = { 1 };       /* .data of this test binary */
static char this_bss[100];                /* .bss */
extern char _end[];                       /* the linker's end of .bss */

/* Runtime addresses of this process -> link vaddr through its maps -> our own symbol. */
static void test_runtime_addresses(void **s UNUSED)
{
	char exe[PATH_MAX];
	struct maps m = { 0 };
	struct datasym *ds = NULL;
	struct datasym_hit h;
	const struct map_entry *file_map = NULL;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	assert_int_equal(maps_read_pid(&m, getpid()), 0);
	for (size_t i = 0; i < m.n; i++)
		if (!strcmp(m.v[i].path, exe)) {
			file_map = &m.v[i];
			break;
		}
	assert_non_null(file_map);
	assert_int_equal(datasym_open(&ds, exe), 0);
	uint64_t va;
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  (uint64_t)(uintptr_t)&this_static[5], &va), 0);
	assert_int_equal(datasym_lookup(ds, va, &h), 0);
	assert_string_equal(h.name, "this_static");
	assert_int_equal(h.offset, 5 * sizeof(int));
	assert_int_equal(h.size, sizeof(this_static));
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  (uint64_t)(uintptr_t)&this_bss[99], &va), 0);
	assert_int_equal(datasym_lookup(ds, va, &h), 0);
	assert_string_equal(h.name, "this_bss");
	assert_string_equal(h.section, ".bss");
	assert_int_equal(h.offset, 99);
	/* The image ends at the page holding _end (the linker's end of .bss): the byte before
	 * is ours, the next page is past it (anonymous memory merged onto the .bss). */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t past = ((uint64_t)(uintptr_t)_end + page - 1) & ~(page - 1);
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  (uint64_t)(uintptr_t)_end - 1, &va), 0);
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  past - 1, &va), 0);
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  past, &va), -ERANGE);
	assert_int_equal(datasym_runtime_to_vaddr(ds, file_map->start, file_map->offset,
						  past + 5 * page, &va), -ERANGE);
	datasym_close(ds);
	maps_free(&m);
}

static void test_hostile(void **s UNUSED)
{
	FILE *f = fopen("fixtures_dwarf/dwarf_c_gcc", "rb");
	unsigned char *orig, *buf;
	unsigned seed = 7;
	long len;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	orig = malloc((size_t)len);
	buf = malloc((size_t)len);
	assert_int_equal(fread(orig, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	for (long cut = 0; cut < len; cut += len / 101 + 1) {
		struct datasym *ds = NULL;
		struct datasym_hit h;
		memcpy(buf, orig, (size_t)cut);
		if (datasym_open_mem(&ds, buf, (size_t)cut) == 0) {
			datasym_lookup(ds, 0x4000, &h);
			datasym_close(ds);
		}
	}
	for (int round = 0; round < 500; round++) {
		struct datasym *ds = NULL;
		struct datasym_hit h;
		memcpy(buf, orig, (size_t)len);
		for (int k = 0; k < 6; k++) {
			seed = seed * 1103515245u + 12345u;
			buf[(seed >> 4) % (unsigned long)len] ^= (unsigned char)(1u << (seed % 8));
		}
		if (datasym_open_mem(&ds, buf, (size_t)len) == 0) {
			for (uint64_t a = 0; a < 0x6000; a += 0x101)
				datasym_lookup(ds, a, &h);
			datasym_close(ds);
		}
	}
	free(buf);
	free(orig);
	assert_int_equal(datasym_open_mem(NULL, "x", 1), -EINVAL);
	assert_int_equal(datasym_lookup(NULL, 0, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_gcc),
		cmocka_unit_test(test_fixture_clang),
		cmocka_unit_test(test_functions_are_not_data),
		cmocka_unit_test(test_runtime_addresses),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
