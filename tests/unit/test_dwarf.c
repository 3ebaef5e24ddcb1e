/* Unit tests for symbolizer/dwarf.c. Addresses come from nm (asm labels planted in the
 * fixtures' inlined bodies); expected lines, columns and declaration lines come from the
 * fixture sources (tests/unit/fixtures_dwarf), checked once against eu-addr2line and
 * llvm-symbolizer-19. gcc -g and clang-19 -gmlt -fdebug-info-for-profiling builds, C and
 * C++, a stripped binary with its .debug file, and files changed under an open dwsym. */
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

#include "fixtures_dwarf/dwarf_paths.h"
#include "symbolizer/dwarf.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define UNUSED __attribute__((unused))
#define C_SRC DWARF_FIXTURE_DIR "/dwarf_fixture.c"
#define CC_SRC DWARF_FIXTURE_DIR "/dwarf_fixture.cc"

static const char *fx(const char *name)
{
	static char buf[8][PATH_MAX];
	static unsigned k;
	char *b = buf[k++ % 8];

	snprintf(b, PATH_MAX, "fixtures_dwarf/%s", name);
	if (access(b, R_OK) != 0)
		fail_msg("fixture %s missing (build tests/unit/fixtures_dwarf)", b);
	return b;
}

/* Value of symbol `sym` as nm prints it (an independent reading of .symtab). */
static uint64_t nm_addr(const char *bin, const char *sym)
{
	char cmd[PATH_MAX + 64], line[512], name[256], type;
	unsigned long long v;
	uint64_t found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s' 2>/dev/null", bin);
	assert_non_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &v, &type, name) == 3 && !strcmp(name, sym))
			found = v;
	pclose(f);
	if (!found)
		fail_msg("nm: no %s in %s", sym, bin);
	return found;
}

struct want {
	const char *function, *mangled, *file;
	uint32_t line, column, decl_line;
	bool inlined;
};

static void same_file(const char *got, const char *want)
{
	char a[PATH_MAX], b[PATH_MAX];

	assert_non_null(got);
	assert_non_null(realpath(want, b));
	if (!realpath(got, a))
		fail_msg("frame file %s does not exist", got);
	assert_string_equal(a, b);
}

static void check_frames(const struct dwsym_frames *f, const struct want *w, unsigned n)
{
	if (f->n != n) {
		for (unsigned i = 0; i < f->n; i++)
			print_message("  frame %u: %s %s:%u:%u\n", i, f->v[i].mangled,
				      f->v[i].file ? f->v[i].file : "?", f->v[i].line, f->v[i].column);
		fail_msg("%u frames, want %u", f->n, n);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct dwsym_frame *g = &f->v[i];

		assert_string_equal(g->mangled, w[i].mangled);
		assert_string_equal(g->function, w[i].function);
		same_file(g->file, w[i].file);
		assert_int_equal(g->line, w[i].line);
		assert_int_equal(g->column, w[i].column);
		assert_int_equal(g->decl_line, w[i].decl_line);
		assert_int_equal(g->inlined, w[i].inlined);
	}
}

static const struct want c_leaf_chain[] = {
	{ "leaf", "leaf", C_SRC, 17, 2, 15, true },
	{ "mid", "mid", C_SRC, 24, 9, 21, true },
	{ "outer_static", "outer_static", C_SRC, 30, 9, 27, false },
};

/* Looks the label up by vaddr and by file offset; both must give w. symsrc: an unstripped
 * copy of bin, for the label's file offset. */
static void check_label_syms(const char *bin, const char *dbg, const char *symsrc,
			     const char *label, const char *func, const struct want *w, unsigned n)
{
	struct dwsym *d = NULL;
	struct dwsym_frames f;
	uint64_t va = nm_addr(symsrc, label), fva, foff;

	assert_int_equal(dwsym_open(&d, bin, dbg), 0);
	assert_true(dwsym_has_dwarf(d));
	assert_int_equal(dwsym_lookup_vaddr(d, va, &f), 0);
	check_frames(&f, w, n);
	dwsym_frames_free(&f);

	/* File offset of the label: the function's uprobe offset plus the label's delta. */
	{
		struct elfsym *e = NULL;

		assert_int_equal(elfsym_open(&e, symsrc), 0);
		assert_int_equal(elfsym_func_offset(e, func, &foff), 0);
		elfsym_close(e);
		fva = nm_addr(symsrc, func);
	}
	assert_int_equal(dwsym_lookup_offset(d, foff + (va - fva), &f), 0);
	check_frames(&f, w, n);
	dwsym_frames_free(&f);
	dwsym_close(d);
}

static void check_label(const char *bin, const char *dbg, const char *label, const char *func,
			const struct want *w, unsigned n)
{
	check_label_syms(bin, dbg, bin, label, func, w, n);
}

static void test_c_gcc_inline_chain(void **s UNUSED)
{
	check_label(fx("dwarf_c_gcc"), NULL, "mark_c_leaf", "outer_static", c_leaf_chain, 3);
}

static void test_c_clang_inline_chain(void **s UNUSED)
{
	check_label(fx("dwarf_c_clang"), NULL, "mark_c_leaf", "outer_static", c_leaf_chain, 3);
}

static void test_c_not_inlined(void **s UNUSED)
{
	static const struct want w[] = { { "plain", "plain", C_SRC, 35, 2, 33, false } };

	check_label(fx("dwarf_c_gcc"), NULL, "mark_c_plain", "plain", w, 1);
	check_label(fx("dwarf_c_clang"), NULL, "mark_c_plain", "plain", w, 1);
}

static void test_cxx_template_gcc(void **s UNUSED)
{
	/* gcc puts a call's column at its '(' */
	static const struct want w[] = {
		{ "int fx::twice<int>(int)", "_ZN2fx5twiceIiEET_S1_", CC_SRC, 9, 2, 7, true },
		{ "int fx::run<3>(int)", "_ZN2fx3runILi3EEEii", CC_SRC, 17, 19, 14, false },
	};

	check_label(fx("dwarf_cc_gcc"), NULL, "mark_cxx_leaf", "_ZN2fx3runILi3EEEii", w, 2);
}

static void test_cxx_template_clang(void **s UNUSED)
{
	/* clang puts it at the callee's name */
	static const struct want w[] = {
		{ "int fx::twice<int>(int)", "_ZN2fx5twiceIiEET_S1_", CC_SRC, 9, 2, 7, true },
		{ "int fx::run<3>(int)", "_ZN2fx3runILi3EEEii", CC_SRC, 17, 9, 14, false },
	};

	check_label(fx("dwarf_cc_clang"), NULL, "mark_cxx_leaf", "_ZN2fx3runILi3EEEii", w, 2);
}

static void test_stripped_needs_debug_file(void **s UNUSED)
{
	static const struct want w[] = {
		{ "int fx::twice<int>(int)", "_ZN2fx5twiceIiEET_S1_", CC_SRC, 9, 2, 7, true },
		{ "int fx::run<3>(int)", "_ZN2fx3runILi3EEEii", CC_SRC, 17, 9, 14, false },
	};
	struct dwsym *d = NULL;
	struct dwsym_frames f;
	uint64_t va = nm_addr(fx("dwarf_c_gcc.debug"), "mark_c_leaf");

	/* Without its debug file a stripped binary has nothing to say about this address. */
	assert_int_equal(dwsym_open(&d, fx("dwarf_c_gcc_stripped"), NULL), 0);
	assert_false(dwsym_has_dwarf(d));
	assert_int_equal(dwsym_lookup_vaddr(d, va, &f), -ENOENT);
	dwsym_frames_free(&f);
	dwsym_close(d);

	check_label_syms(fx("dwarf_c_gcc_stripped"), fx("dwarf_c_gcc.debug"), fx("dwarf_c_gcc"),
			 "mark_c_leaf", "outer_static", c_leaf_chain, 3);
	check_label_syms(fx("dwarf_cc_clang_stripped"), fx("dwarf_cc_clang.debug"),
			 fx("dwarf_cc_clang"), "mark_cxx_leaf", "_ZN2fx3runILi3EEEii", w, 2);
}

static void test_wrong_debug_file_refused(void **s UNUSED)
{
	struct dwsym *d = NULL;

	assert_int_equal(dwsym_open(&d, fx("dwarf_c_gcc_stripped"), fx("dwarf_cc_clang.debug")),
			 -ESTALE);
	assert_null(d);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[3 * PATH_MAX];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

/* A binary rewritten in place (same inode: cp over it) or deleted after open keeps
 * resolving as the build that was opened, never as the new contents. */
static void test_rewritten_after_open(void **s UNUSED)
{
	char dir[] = "/tmp/test_dwarf.XXXXXX", path[PATH_MAX];
	struct dwsym *d = NULL;
	struct dwsym_frames f;
	uint64_t va = nm_addr(fx("dwarf_c_gcc"), "mark_c_leaf");

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/bin", dir);
	copy_file(fx("dwarf_c_gcc"), path);
	assert_int_equal(dwsym_open(&d, path, NULL), 0);
	copy_file(fx("dwarf_cc_gcc"), path);   /* truncates and rewrites the same inode */
	assert_int_equal(dwsym_lookup_vaddr(d, va, &f), 0);
	check_frames(&f, c_leaf_chain, 3);
	dwsym_frames_free(&f);
	unlink(path);
	assert_int_equal(dwsym_lookup_vaddr(d, va, &f), 0);
	check_frames(&f, c_leaf_chain, 3);
	dwsym_frames_free(&f);
	dwsym_close(d);
	rmdir(dir);
}

/* Through the cache: a path whose file now has another build-id is refused (-ESTALE)
 * for the old build-id; what was opened before keeps answering after deletion. */
static void test_symcache_replaced_binary(void **s UNUSED)
{
	char dir[] = "/tmp/test_dwarf.XXXXXX", path[PATH_MAX], c_id[130], cc_id[130];
	struct symcache *c = NULL;
	struct symcache_stats st;
	struct dwsym_frames f;
	struct elfsym *e = NULL;
	uint64_t off, va;

	assert_int_equal(elf_build_id_of(fx("dwarf_c_gcc"), c_id, sizeof(c_id)), 0);
	assert_int_equal(elf_build_id_of(fx("dwarf_cc_gcc"), cc_id, sizeof(cc_id)), 0);
	assert_string_not_equal(c_id, cc_id);
	assert_int_equal(elfsym_open(&e, fx("dwarf_c_gcc")), 0);
	assert_int_equal(elfsym_func_offset(e, "outer_static", &off), 0);
	elfsym_close(e);
	va = nm_addr(fx("dwarf_c_gcc"), "mark_c_leaf") - nm_addr(fx("dwarf_c_gcc"), "outer_static");
	off += va;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/bin", dir);
	copy_file(fx("dwarf_cc_gcc"), path);
	assert_int_equal(symcache_new(&c, NULL), 0);
	/* The file at path is another build: never symbolized as c_id. */
	assert_int_equal(symcache_code(c, c_id, path, NULL, off, &f), -ESTALE);
	assert_int_equal(f.n, 0);
	dwsym_frames_free(&f);

	/* A path that failed for a build-id is not retried (frames come by the thousand). */
	copy_file(fx("dwarf_c_gcc"), path);
	assert_int_equal(symcache_code(c, c_id, path, NULL, off, &f), -ESTALE);
	dwsym_frames_free(&f);
	snprintf(path, sizeof(path), "%s/bin2", dir);
	copy_file(fx("dwarf_c_gcc"), path);
	assert_int_equal(symcache_code(c, c_id, path, NULL, off, &f), 0);
	check_frames(&f, c_leaf_chain, 3);
	dwsym_frames_free(&f);
	unlink(path);
	/* Deleted: the cached entry still answers for its build-id (a hit). */
	assert_int_equal(symcache_code(c, c_id, path, NULL, off, &f), 0);
	check_frames(&f, c_leaf_chain, 3);
	dwsym_frames_free(&f);
	symcache_get_stats(c, &st);
	assert_true(st.hits >= 1);
	/* A build-id never seen, at a path that is gone: unresolvable. */
	assert_true(symcache_code(c, cc_id, path, NULL, off, &f) < 0);
	dwsym_frames_free(&f);
	symcache_free(c);
	snprintf(path, sizeof(path), "%s/bin", dir);
	unlink(path);
	rmdir(dir);
}

/* The byte budget: opening more than fits evicts the least recently used entry. */
static void test_symcache_budget(void **s UNUSED)
{
	const char *bins[] = { fx("dwarf_c_gcc"), fx("dwarf_c_clang"), fx("dwarf_cc_gcc") };
	struct symcache_opts o = { .max_bytes = 1 };
	struct symcache_stats st;
	struct symcache *c = NULL;
	struct dwsym_frames f;
	char id[130];

	assert_int_equal(symcache_new(&c, &o), 0);
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < 3; i++) {
			assert_int_equal(elf_build_id_of(bins[i], id, sizeof(id)), 0);
			assert_int_equal(symcache_code(c, id, bins[i], NULL, 0x1000, &f) <= 0, 1);
			dwsym_frames_free(&f);
			symcache_get_stats(c, &st);
			assert_int_equal(st.entries, 1);   /* only the entry in hand fits */
		}
	symcache_get_stats(c, &st);
	assert_int_equal(st.misses, 6);
	assert_int_equal(st.evictions, 5);
	symcache_free(c);

	o.max_bytes = 64 << 20;
	assert_int_equal(symcache_new(&c, &o), 0);
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < 3; i++) {
			assert_int_equal(elf_build_id_of(bins[i], id, sizeof(id)), 0);
			symcache_code(c, id, bins[i], NULL, 0x1000, &f);
			dwsym_frames_free(&f);
		}
	symcache_get_stats(c, &st);
	assert_int_equal(st.misses, 3);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.evictions, 0);
	assert_true(st.bytes > 0 && st.bytes <= o.max_bytes);
	symcache_free(c);
}

static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	assert_non_null(buf = malloc((size_t)n));
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Truncated and byte-flipped images: errors or answers, never a crash (ASan builds). */
static void test_hostile_images(void **s UNUSED)
{
	size_t len;
	unsigned char *orig = slurp(fx("dwarf_c_clang"), &len), *buf = malloc(len);
	uint64_t va = nm_addr(fx("dwarf_c_clang"), "mark_c_leaf");
	unsigned seed = 12345;

	assert_non_null(buf);
	for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
		struct dwsym *d = NULL;
		struct dwsym_frames f;

		memcpy(buf, orig, cut);
		if (dwsym_open_mem(&d, buf, cut) == 0) {
			dwsym_lookup_vaddr(d, va, &f);
			dwsym_frames_free(&f);
			dwsym_close(d);
		}
	}
	for (int round = 0; round < 300; round++) {
		struct dwsym *d = NULL;
		struct dwsym_frames f;

		memcpy(buf, orig, len);
		for (int k = 0; k < 8; k++) {
			seed = seed * 1103515245u + 12345u;
			buf[(seed >> 4) % len] ^= (unsigned char)(1u << (seed % 8));
		}
		if (dwsym_open_mem(&d, buf, len) == 0) {
			dwsym_lookup_vaddr(d, va, &f);
			dwsym_frames_free(&f);
			dwsym_lookup_offset(d, va, &f);
			dwsym_frames_free(&f);
			dwsym_close(d);
		}
	}
	free(buf);
	free(orig);
}

static void test_bad_args(void **s UNUSED)
{
	struct dwsym *d = NULL;
	struct dwsym_frames f;

	assert_int_equal(dwsym_open(NULL, "x", NULL), -EINVAL);
	assert_int_equal(dwsym_open(&d, "/nonexistent/x", NULL), -ENOENT);
	assert_int_equal(dwsym_open(&d, "/dev/null", NULL), -EINVAL);
	assert_int_equal(dwsym_open(&d, "/etc/passwd", NULL), -EINVAL);
	assert_int_equal(dwsym_open_mem(&d, "x", 1), -EINVAL);
	assert_int_equal(dwsym_lookup_vaddr(NULL, 0, &f), -EINVAL);
	dwsym_frames_free(&f);
	dwsym_frames_free(NULL);
	dwsym_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_c_gcc_inline_chain),
		cmocka_unit_test(test_c_clang_inline_chain),
		cmocka_unit_test(test_c_not_inlined),
		cmocka_unit_test(test_cxx_template_gcc),
		cmocka_unit_test(test_cxx_template_clang),
		cmocka_unit_test(test_stripped_needs_debug_file),
		cmocka_unit_test(test_wrong_debug_file_refused),
		cmocka_unit_test(test_rewritten_after_open),
		cmocka_unit_test(test_symcache_replaced_binary),
		cmocka_unit_test(test_symcache_budget),
		cmocka_unit_test(test_hostile_images),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
