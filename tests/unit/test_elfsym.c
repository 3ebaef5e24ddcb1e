/* Unit tests for symbolizer/elfsym.c and demangle.cc. Expected values come from an
 * independent source: readelf's output (build-ids, st_value, PT_LOAD) recomputed here,
 * or this process's own mappings. Hostile inputs (truncated, random, corrupted headers,
 * byte-flipped copies of libc) must fail cleanly; run under ASan/UBSan to mean it. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#define UNUSED __attribute__((unused))

#include "symbolizer/elfsym.h"
#include "symbolizer/maps.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static const char *libstdcxx_path(void)
{
	static const char *const cands[] = {
		"/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	};
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (access(cands[i], R_OK) == 0)
			return cands[i];
	return NULL;
}

/* Fixture binaries from tests/unit/fixtures (built next to this test's workdir). */
static void fixture_path(char *buf, size_t sz, const char *name)
{
	const char *dir = getenv("MEMPROFD_FIXTURES");

	snprintf(buf, sz, "%s/%s", dir ? dir : "fixtures", name);
	if (access(buf, R_OK) != 0)
		fail_msg("fixture %s missing (set MEMPROFD_FIXTURES or build tests/unit/fixtures)", buf);
}

/* ---- independent expectations from readelf ---- */

static void readelf_build_id(const char *path, char *out, size_t outsz)
{
	char cmd[PATH_MAX + 64], line[1024];
	FILE *f;

	out[0] = '\0';
	snprintf(cmd, sizeof(cmd), "readelf -nW '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "Build ID: ");
		if (p && sscanf(p + 10, "%127s", out) == 1)
			break;
	}
	pclose(f);
	assert_true(out[0] != '\0');
	(void)outsz;
}

/* st_value and st_size of the symbol printed as `name` (versions included, as readelf
 * prints them) in symbol table `table` (".symtab" or ".dynsym"). */
static int readelf_sym(const char *path, const char *table, const char *name,
		       uint64_t *value, uint64_t *size)
{
	char cmd[PATH_MAX + 64], line[4096], want[64];
	bool in_table = false;
	int found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf -Ws '%s' 2>/dev/null", path);
	snprintf(want, sizeof(want), "'%s'", table);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char type[32], bind[32], vis[32], ndx[32], nm[2048];
		unsigned long long v, sz;
		unsigned idx;

		if (!strncmp(line, "Symbol table ", 13)) {
			in_table = strstr(line, want) != NULL;
			continue;
		}
		if (!in_table ||
		    sscanf(line, " %u: %llx %llu %31s %31s %31s %31s %2047s", &idx, &v, &sz, type,
			   bind, vis, ndx, nm) != 8)
			continue;
		if (!strcmp(nm, name) && strcmp(ndx, "UND")) {
			*value = v;
			*size = sz;
			found = 1;
			break;
		}
	}
	pclose(f);
	return found;
}

/* Translates vaddr to a file offset through `readelf -lW`'s LOAD lines. */
static uint64_t readelf_vaddr_to_off(const char *path, uint64_t vaddr)
{
	char cmd[PATH_MAX + 64], line[1024];
	uint64_t off = UINT64_MAX;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long o, va, pa, fsz, msz;

		if (sscanf(line, " LOAD %llx %llx %llx %llx %llx", &o, &va, &pa, &fsz, &msz) != 5)
			continue;
		if (vaddr >= va && vaddr < va + fsz) {
			off = vaddr - va + o;
			break;
		}
	}
	pclose(f);
	assert_true(off != UINT64_MAX);
	return off;
}

static uint64_t expected_off(const char *path, const char *table, const char *name)
{
	uint64_t v, sz;

	if (!readelf_sym(path, table, name, &v, &sz))
		fail_msg("readelf does not show %s in %s of %s", name, table, path);
	return readelf_vaddr_to_off(path, v);
}

static void *read_whole(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *buf;
	size_t got = 0;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
		assert_true(k > 0);
		got += (size_t)k;
	}
	close(fd);
	*len = got;
	return buf;
}

static void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* ---- real system libraries ---- */

static void test_libc_build_id(void **state UNUSED)
{
	char want[128], got[2 * ELFSYM_BUILD_ID_MAX + 1], small[8];
	struct elfsym *e;

	readelf_build_id(LIBC, want, sizeof(want));
	assert_int_equal(elfsym_open(&e, LIBC), 0);
	assert_int_equal(elfsym_build_id(e, got, sizeof(got)), 0);
	assert_string_equal(got, want);
	assert_int_equal(elfsym_build_id(e, small, sizeof(small)), -ERANGE);
	elfsym_close(e);

	memset(got, 0, sizeof(got));
	assert_int_equal(elf_build_id_of(LIBC, got, sizeof(got)), 0);
	assert_string_equal(got, want);
	assert_int_equal(elf_build_id_of("/nonexistent/libc.so", got, sizeof(got)), -ENOENT);
}

static void test_libc_malloc(void **state UNUSED)
{
	static const char *const names[] = { "malloc", "free", "calloc", "realloc",
					     "posix_memalign", "no_such_function_xyz", NULL };
	uint64_t want = expected_off(LIBC, ".dynsym", "malloc@@GLIBC_2.2.5");
	uint64_t off = 0, off2 = 0, delta = 99, offs[7], vaddr, v, sz;
	struct elfsym *e;
	const char *name;

	assert_int_equal(elfsym_open(&e, LIBC), 0);
	assert_true(elfsym_count(e) > 1000);
	assert_int_equal(elfsym_func_offset(e, "malloc", &off), 0);
	assert_int_equal(off, want);
	assert_int_equal(elfsym_func_offset(e, "malloc@@GLIBC_2.2.5", &off2), 0);
	assert_int_equal(off2, want);
	assert_int_equal(elfsym_func_offset(e, "__libc_malloc", &off2), 0);
	assert_int_equal(off2, want);
	assert_int_equal(elfsym_func_offset(e, "no_such_function_xyz", &off2), -ENOENT);
	assert_int_equal(elfsym_func_offset(e, "mallo", &off2), -ENOENT);
	assert_int_equal(elfsym_func_offset(e, "malloc_", &off2), -ENOENT);
	assert_int_equal(elfsym_func_offset(e, "", &off2), -EINVAL);
	/* Not a function: stdout is an OBJECT, and undefined references are skipped. */
	assert_int_equal(elfsym_func_offset(e, "stdout", &off2), -ENOENT);
	assert_int_equal(elfsym_func_offset(e, "_dl_argv", &off2), -ENOENT);

	name = elfsym_lookup_offset(e, off + 1, &delta);
	assert_non_null(name);
	assert_string_equal(name, "malloc");   /* over __libc_malloc at the same address */
	assert_int_equal(delta, 1);
	name = elfsym_lookup_offset(e, off, &delta);
	assert_string_equal(name, "malloc");
	assert_int_equal(delta, 0);
	assert_true(readelf_sym(LIBC, ".dynsym", "malloc@@GLIBC_2.2.5", &v, &sz));
	name = elfsym_lookup_offset(e, off + sz - 1, &delta);
	assert_string_equal(name, "malloc");
	assert_int_equal(delta, sz - 1);
	name = elfsym_lookup_offset(e, off + sz, &delta);
	assert_true(name == NULL || strcmp(name, "malloc") != 0);
	assert_null(elfsym_lookup_offset(e, 0, &delta));   /* ELF header: no function */
	assert_null(elfsym_lookup_offset(e, UINT64_MAX, &delta));

	assert_int_equal(elfsym_offset_to_vaddr(e, off, &vaddr), 0);
	assert_int_equal(vaddr, v);

	assert_int_equal(elfsym_find_funcs(e, names, 7, offs), 5);
	assert_int_equal(offs[0], want);
	assert_int_equal(offs[1], expected_off(LIBC, ".dynsym", "free@@GLIBC_2.2.5"));
	assert_int_equal(offs[2], expected_off(LIBC, ".dynsym", "calloc@@GLIBC_2.2.5"));
	assert_int_equal(offs[3], expected_off(LIBC, ".dynsym", "realloc@@GLIBC_2.2.5"));
	assert_true(offs[4] != UINT64_MAX);
	assert_int_equal(offs[5], UINT64_MAX);
	assert_int_equal(offs[6], UINT64_MAX);
	assert_int_equal(elfsym_find_funcs(e, names, 0, NULL), 0);
	assert_int_equal(elfsym_find_funcs(e, NULL, 3, offs), -EINVAL);
	elfsym_close(e);
}

static void test_libstdcxx_new(void **state UNUSED)
{
	const char *path = libstdcxx_path();
	static const char *const names[] = { "_Znwm", "_ZdlPv", "_Znam", "_ZdaPv",
					     "_ZnwmRKSt9nothrow_t" };
	uint64_t off, delta, offs[5];
	struct elfsym *e;
	const char *name;
	char *dm;

	assert_non_null(path);
	assert_int_equal(elfsym_open(&e, path), 0);
	assert_int_equal(elfsym_func_offset(e, "_Znwm", &off), 0);
	assert_int_equal(off, expected_off(path, ".dynsym", "_Znwm@@GLIBCXX_3.4"));
	name = elfsym_lookup_offset(e, off + 1, &delta);
	assert_non_null(name);
	assert_int_equal(delta, 1);
	dm = sym_demangle(name);
	assert_string_equal(dm, "operator new(unsigned long)");
	free(dm);
	assert_int_equal(elfsym_find_funcs(e, names, 5, offs), 5);
	assert_int_equal(offs[0], off);
	elfsym_close(e);
}

/* ---- this test executable: .symtab, PIE, checked against its live mapping ---- */

#if defined(__clang__)
#define KEEP __attribute__((noinline, used))
#else
#define KEEP __attribute__((noinline, noipa, used))
#endif
static KEEP int elfsym_test_marker_fn(int x) { return x * 5 + 2; }

static void test_self(void **state UNUSED)
{
	char exe[PATH_MAX], want[128], got[2 * ELFSYM_BUILD_ID_MAX + 1];
	uint64_t off, delta, addr = (uint64_t)(uintptr_t)&elfsym_test_marker_fn;
	const struct map_entry *m;
	struct maps maps;
	struct elfsym *e;
	ssize_t k;

	k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(k > 0);
	exe[k] = '\0';
	assert_int_equal(elfsym_test_marker_fn(1), 7);

	assert_int_equal(elfsym_open(&e, "/proc/self/exe"), 0);
	assert_int_equal(elfsym_func_offset(e, "elfsym_test_marker_fn", &off), 0);
	/* Independent: where the running code is, through /proc/self/maps. */
	assert_int_equal(maps_read_pid(&maps, getpid()), 0);
	m = maps_find(&maps, addr);
	assert_non_null(m);
	assert_string_equal(m->path, exe);
	assert_int_equal(off, map_entry_file_offset(m, addr));
	maps_free(&maps);
	assert_string_equal(elfsym_lookup_offset(e, off + 1, &delta), "elfsym_test_marker_fn");
	assert_int_equal(delta, 1);
	assert_string_equal(elfsym_lookup_offset(e, off, &delta), "elfsym_test_marker_fn");
	assert_int_equal(delta, 0);
	assert_int_equal(off, expected_off(exe, ".symtab", "elfsym_test_marker_fn"));

	readelf_build_id(exe, want, sizeof(want));
	assert_int_equal(elfsym_build_id(e, got, sizeof(got)), 0);
	assert_string_equal(got, want);
	elfsym_close(e);
}

/* ---- fixtures with known contents ---- */

static void test_fixture_nopie(void **state UNUSED)
{
	char path[PATH_MAX], id[2 * ELFSYM_BUILD_ID_MAX + 1];
	uint64_t off, v, sz, delta, nosize, next;
	struct elfsym *e;

	fixture_path(path, sizeof(path), "elfsym_fixture_nopie");
	assert_int_equal(elfsym_open(&e, path), 0);
	assert_int_equal(elfsym_build_id(e, id, sizeof(id)), 0);
	assert_string_equal(id, "0123456789abcdef0123456789abcdef01234567");

	/* Non-PIE: st_value is 0x40xxxx, the file offset is not. */
	assert_int_equal(elfsym_func_offset(e, "fixture_sized", &off), 0);
	assert_true(readelf_sym(path, ".symtab", "fixture_sized", &v, &sz));
	assert_true(v != off);
	assert_int_equal(off, readelf_vaddr_to_off(path, v));
	assert_string_equal(elfsym_lookup_offset(e, off + sz - 1, &delta), "fixture_sized");
	assert_int_equal(elfsym_offset_to_vaddr(e, off, &v), 0);
	assert_true(readelf_sym(path, ".symtab", "fixture_sized", &sz, &delta));
	assert_int_equal(v, sz);

	/* Same address, both GLOBAL: fewer underscores wins; both names resolve by name. */
	assert_int_equal(elfsym_func_offset(e, "__fixture_impl", &off), 0);
	assert_int_equal(elfsym_func_offset(e, "fixture_pick", &v), 0);
	assert_int_equal(off, v);
	assert_string_equal(elfsym_lookup_offset(e, off + 2, &delta), "fixture_pick");
	/* WEAK beats LOCAL; GLOBAL beats WEAK even with underscores. */
	assert_int_equal(elfsym_func_offset(e, "fixture_local_impl", &off), 0);
	assert_string_equal(elfsym_lookup_offset(e, off, &delta), "__fixture_weakpick");
	assert_int_equal(elfsym_func_offset(e, "fixture_weak", &off), 0);
	assert_string_equal(elfsym_lookup_offset(e, off, &delta), "__fixture_strong");

	/* Size-0 symbols run up to the next symbol. */
	assert_int_equal(elfsym_func_offset(e, "fixture_nosize", &nosize), 0);
	assert_int_equal(elfsym_func_offset(e, "fixture_nosize_next", &next), 0);
	assert_int_equal(next - nosize, 8);
	assert_string_equal(elfsym_lookup_offset(e, nosize + 7, &delta), "fixture_nosize");
	assert_int_equal(delta, 7);
	assert_string_equal(elfsym_lookup_offset(e, next, &delta), "fixture_nosize_next");
	assert_int_equal(delta, 0);
	assert_int_equal(nosize, expected_off(path, ".symtab", "fixture_nosize"));

	/* Nested symbols: outer [0,16) holds inner [4,8) and the unsized label at 10. */
	uint64_t outer, after;
	assert_int_equal(elfsym_func_offset(e, "fixture_outer", &outer), 0);
	assert_int_equal(elfsym_func_offset(e, "fixture_after_outer", &after), 0);
	assert_true(after > outer + 16);   /* a gap of padding after outer */
	assert_string_equal(elfsym_lookup_offset(e, outer + 2, &delta), "fixture_outer");
	assert_string_equal(elfsym_lookup_offset(e, outer + 5, &delta), "fixture_inner");
	assert_int_equal(delta, 1);
	assert_string_equal(elfsym_lookup_offset(e, outer + 9, &delta), "fixture_outer");
	assert_int_equal(delta, 9);
	assert_string_equal(elfsym_lookup_offset(e, outer + 15, &delta), "fixture_label");
	assert_int_equal(delta, 5);
	assert_null(elfsym_lookup_offset(e, outer + 16, &delta));   /* padding: nobody's */
	assert_string_equal(elfsym_lookup_offset(e, after, &delta), "fixture_after_outer");

	/* Dynamic executable: malloc is an undefined import, not a definition. */
	assert_int_equal(elfsym_func_offset(e, "malloc", &off), -ENOENT);
	elfsym_close(e);
}

static void test_fixture_static(void **state UNUSED)
{
	static const char *const names[] = { "malloc", "free", "calloc", "realloc", "main",
					     "_Znwm" };
	char path[PATH_MAX], id[2 * ELFSYM_BUILD_ID_MAX + 1];
	uint64_t offs[6], delta;
	struct elfsym *e;

	fixture_path(path, sizeof(path), "elfsym_fixture_static");
	assert_int_equal(elf_build_id_of(path, id, sizeof(id)), 0);
	assert_string_equal(id, "feedfacecafebeef00112233445566778899aabb");
	assert_int_equal(elfsym_open(&e, path), 0);
	assert_int_equal(elfsym_find_funcs(e, names, 6, offs), 5);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(offs[i], expected_off(path, ".symtab", names[i]));
		assert_non_null(elfsym_lookup_offset(e, offs[i] + 1, &delta));
		assert_int_equal(delta, 1);
	}
	assert_string_equal(elfsym_lookup_offset(e, offs[0] + 1, &delta), "malloc");
	assert_string_equal(elfsym_lookup_offset(e, offs[1] + 1, &delta), "free");
	assert_int_equal(offs[5], UINT64_MAX);
	elfsym_close(e);
}

static void test_fixture_versions(void **state UNUSED)
{
	char path[PATH_MAX], spath[PATH_MAX];
	uint64_t want_new, want_old, off, delta;
	struct elfsym *e, *s;

	fixture_path(path, sizeof(path), "libelfsym_fixture.so");
	fixture_path(spath, sizeof(spath), "libelfsym_fixture_stripped.so");
	want_new = expected_off(path, ".symtab", "fixture_v@@VER_2");
	want_old = expected_off(path, ".symtab", "fixture_v@VER_1");
	assert_true(want_new != want_old);

	assert_int_equal(elfsym_open(&e, path), 0);        /* .symtab: "fixture_v@@VER_2" */
	assert_int_equal(elfsym_open(&s, spath), 0);       /* .dynsym + .gnu.version only */
	assert_true(elfsym_count(s) < elfsym_count(e));
	for (int k = 0; k < 2; k++) {
		struct elfsym *x = k ? s : e;

		assert_int_equal(elfsym_func_offset(x, "fixture_v", &off), 0);
		assert_int_equal(off, want_new);   /* the default version */
		assert_int_equal(elfsym_func_offset(x, "fixture_v@VER_1", &off), 0);
		assert_int_equal(off, want_new);   /* suffix ignored */
		assert_string_equal(elfsym_lookup_offset(x, want_old + 1, &delta), "fixture_v");
		assert_string_equal(elfsym_lookup_offset(x, want_new, &delta), "fixture_v");
		assert_int_equal(elfsym_func_offset(x, "fixture_lib_plain", &off), 0);
	}
	/* Only .symtab has the LOCAL implementation names. */
	assert_int_equal(elfsym_func_offset(e, "fixture_v_old", &off), 0);
	assert_int_equal(off, want_old);
	assert_int_equal(elfsym_func_offset(s, "fixture_v_old", &off), -ENOENT);
	elfsym_close(e);
	elfsym_close(s);
}

/* ---- demangling ---- */

static void expect_demangle(const char *in, const char *want)
{
	char *out = sym_demangle(in);
	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
}

static void test_demangle(void **state UNUSED)
{
	expect_demangle("_Znwm", "operator new(unsigned long)");
	expect_demangle("_ZdlPvm", "operator delete(void*, unsigned long)");
	expect_demangle("_ZN3foo3barEv", "foo::bar()");
	expect_demangle("_ZN3foo3barEv.cold", "foo::bar() [clone .cold]");
	expect_demangle("malloc", "malloc");
	expect_demangle("i", "i");             /* a C symbol, not the type "int" */
	expect_demangle("_Z", "_Z");
	expect_demangle("_Zgarbage!", "_Zgarbage!");
	expect_demangle("", "");
	assert_null(sym_demangle(NULL));

	/* Deep nesting past the length cap comes back verbatim, without blowing the stack. */
	size_t n = SYM_DEMANGLE_MAX_LEN + 100;
	char *deep = malloc(n + 1);
	assert_non_null(deep);
	memcpy(deep, "_Z1fP", 5);
	memset(deep + 5, 'P', n - 6);
	deep[n - 1] = 'i';
	deep[n] = '\0';
	char *out = sym_demangle(deep);
	assert_non_null(out);
	assert_string_equal(out, deep);
	free(out);
	free(deep);
}

/* ---- hostile input ---- */

static void test_bad_files(void **state UNUSED)
{
	char dir[] = "/tmp/test_elfsym.XXXXXX", path[PATH_MAX], id[256];
	unsigned char buf[65536];
	struct elfsym *e = (struct elfsym *)0x1;

	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rnd();
	snprintf(path, sizeof(path), "%s/random", dir);
	write_file(path, buf, sizeof(buf));

	assert_int_equal(elfsym_open(&e, path), -EINVAL);
	assert_null(e);
	assert_int_equal(elf_build_id_of(path, id, sizeof(id)), -EINVAL);
	assert_int_equal(elfsym_open_mem(&e, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(elfsym_is_elf(path), 0);
	/* ELF magic followed by garbage. */
	memcpy(buf, ELFMAG, SELFMAG);
	for (int k = 0; k < 64; k++) {
		buf[EI_CLASS] = (unsigned char)(k & 1 ? ELFCLASS64 : ELFCLASS32);
		buf[EI_DATA] = (unsigned char)(k & 2 ? ELFDATA2LSB : ELFDATA2MSB);
		buf[EI_VERSION] = EV_CURRENT;
		if (elfsym_open_mem(&e, buf, sizeof(buf)) == 0)
			elfsym_close(e);
		for (size_t i = EI_NIDENT; i < sizeof(buf); i++)
			buf[i] = (unsigned char)rnd();
	}
	assert_int_equal(elfsym_open(&e, "/dev/null"), -EINVAL);
	assert_int_equal(elfsym_open(&e, dir), -EINVAL);
	assert_int_equal(elfsym_open(&e, "/nonexistent/x"), -ENOENT);
	assert_int_equal(elfsym_open(&e, NULL), -EINVAL);
	assert_int_equal(elfsym_open_mem(&e, NULL, 10), -EINVAL);
	assert_int_equal(elfsym_open_mem(&e, buf, 0), -EINVAL);
	assert_int_equal(elfsym_is_elf(LIBC), 1);
	assert_int_equal(elfsym_is_elf("/nonexistent/x"), -ENOENT);
	assert_int_equal(elfsym_is_elf("/dev/null"), 0);
	snprintf(path, sizeof(path), "%s/empty", dir);
	write_file(path, "", 0);
	assert_int_equal(elfsym_open(&e, path), -EINVAL);
	assert_int_equal(elfsym_is_elf(path), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/random", dir);
	unlink(path);
	rmdir(dir);
}

static void test_truncated(void **state UNUSED)
{
	char dir[] = "/tmp/test_elfsym.XXXXXX", path[PATH_MAX], id[256];
	size_t len, cuts[] = { 1, 4, 16, 52, 63, 64, 200, 4096, 0, 0, 0 };
	unsigned char *img = read_whole(LIBC, &len);
	struct elfsym *e;

	cuts[8] = len / 2;
	cuts[9] = len - 4096;
	cuts[10] = len - 1;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/trunc.so", dir);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		unsigned char *copy = malloc(cuts[i]);   /* exact size: ASan sees any overread */

		assert_non_null(copy);
		memcpy(copy, img, cuts[i]);
		assert_true(elfsym_open_mem(&e, copy, cuts[i]) < 0);
		write_file(path, copy, cuts[i]);
		assert_true(elfsym_open(&e, path) < 0);
		(void)elf_build_id_of(path, id, sizeof(id));   /* must not crash */
		free(copy);
	}
	unlink(path);
	rmdir(dir);
	free(img);
}

/* Section header `i` of an ELF64 little-endian image, read and written with memcpy. */
static Elf64_Shdr get_shdr(const unsigned char *img, unsigned i)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	memcpy(&eh, img, sizeof(eh));
	memcpy(&sh, img + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof(sh));
	return sh;
}

static void put_shdr(unsigned char *img, unsigned i, const Elf64_Shdr *sh)
{
	Elf64_Ehdr eh;
	memcpy(&eh, img, sizeof(eh));
	memcpy(img + eh.e_shoff + (size_t)i * eh.e_shentsize, sh, sizeof(*sh));
}

static unsigned find_shdr(const unsigned char *img, uint32_t type)
{
	Elf64_Ehdr eh;
	memcpy(&eh, img, sizeof(eh));
	for (unsigned i = 1; i < eh.e_shnum; i++)
		if (get_shdr(img, i).sh_type == type)
			return i;
	fail_msg("no section of type %u", type);
	return 0;
}

/* Opens a mutated copy of libc; returns elfsym_open_mem's result (closing on success). */
static int open_mutated(const unsigned char *img, size_t len,
			void (*mutate)(unsigned char *, size_t, void *), void *arg)
{
	unsigned char *copy = malloc(len);
	struct elfsym *e;
	char id[256];
	int r;

	assert_non_null(copy);
	memcpy(copy, img, len);
	mutate(copy, len, arg);
	r = elfsym_open_mem(&e, copy, len);
	if (r == 0) {
		uint64_t off, delta;
		(void)elfsym_build_id(e, id, sizeof(id));
		(void)elfsym_func_offset(e, "malloc", &off);
		for (int k = 0; k < 64; k++)
			(void)elfsym_lookup_offset(e, rnd() % (len + 64), &delta);
		elfsym_close(e);
	}
	free(copy);
	return r;
}

struct shdr_edit { uint32_t type; int field; uint64_t value; };
enum { F_LINK, F_SIZE, F_OFFSET, F_ENTSIZE, F_FLAGS };

static void mutate_shdr(unsigned char *img, size_t len, void *arg)
{
	const struct shdr_edit *ed = arg;
	unsigned i = find_shdr(img, ed->type);
	Elf64_Shdr sh = get_shdr(img, i);

	switch (ed->field) {
	case F_LINK: sh.sh_link = (uint32_t)ed->value; break;
	case F_SIZE: sh.sh_size = ed->value; break;
	case F_OFFSET: sh.sh_offset = ed->value; break;
	case F_ENTSIZE: sh.sh_entsize = ed->value; break;
	case F_FLAGS: sh.sh_flags |= ed->value; break;
	}
	put_shdr(img, i, &sh);
	(void)len;
}

static void mutate_dynstr(unsigned char *img, size_t len, void *arg)
{
	Elf64_Shdr sh = get_shdr(img, find_shdr(img, SHT_DYNSYM));
	struct shdr_edit ed = { 0, *(int *)arg, 0 };
	Elf64_Shdr str = get_shdr(img, sh.sh_link);

	if (ed.field == F_OFFSET)
		str.sh_offset = len - 8;
	else
		str.sh_size = len;
	put_shdr(img, sh.sh_link, &str);
}

/* st_name of the first defined FUNC in .dynsym -> past the string table. */
static void mutate_st_name(unsigned char *img, size_t len, void *arg)
{
	Elf64_Shdr sh = get_shdr(img, find_shdr(img, SHT_DYNSYM));

	for (uint64_t i = 1; i < sh.sh_size / sizeof(Elf64_Sym); i++) {
		Elf64_Sym s;
		unsigned char *p = img + sh.sh_offset + i * sizeof(s);

		memcpy(&s, p, sizeof(s));
		if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && s.st_shndx != SHN_UNDEF) {
			s.st_name = 0xfffffff0u;
			memcpy(p, &s, sizeof(s));
			return;
		}
	}
	(void)len;
	(void)arg;
}

/* The GNU build-id note's n_descsz or n_namesz, through its PT_NOTE / SHT_NOTE. */
static void mutate_note(unsigned char *img, size_t len, void *arg)
{
	Elf64_Ehdr eh;
	uint32_t v = *(uint32_t *)arg;

	memcpy(&eh, img, sizeof(eh));
	for (unsigned i = 1; i < eh.e_shnum; i++) {
		Elf64_Shdr sh = get_shdr(img, i);
		Elf64_Nhdr nh;

		if (sh.sh_type != SHT_NOTE)
			continue;
		memcpy(&nh, img + sh.sh_offset, sizeof(nh));
		if (nh.n_type != NT_GNU_BUILD_ID)
			continue;
		if (v >= 0x80000000u)
			nh.n_namesz = v;      /* name runs off the note */
		else
			nh.n_descsz = v;
		memcpy(img + sh.sh_offset, &nh, sizeof(nh));
	}
	(void)len;
}

static void mutate_ehdr(unsigned char *img, size_t len, void *arg)
{
	Elf64_Ehdr eh;
	int which = *(int *)arg;

	memcpy(&eh, img, sizeof(eh));
	switch (which) {
	case 0: eh.e_shoff = len - 16; break;
	case 1: eh.e_shnum = 0xff00; break;
	case 2: eh.e_phoff = len - 8; break;
	case 3: eh.e_phnum = 0xfffe; break;
	case 4: eh.e_shentsize = 12; break;
	case 5: eh.e_phentsize = 7; break;
	}
	memcpy(img, &eh, sizeof(eh));
}

static void test_corrupt_headers(void **state UNUSED)
{
	size_t len;
	unsigned char *img = read_whole(LIBC, &len);
	const uint64_t huge = UINT64_MAX - 100;
	struct shdr_edit edits[] = {
		{ SHT_DYNSYM, F_LINK, 9999 },
		{ SHT_DYNSYM, F_LINK, 0 },
		{ SHT_DYNSYM, F_LINK, 1 },               /* not a string table */
		{ SHT_DYNSYM, F_SIZE, huge },
		{ SHT_DYNSYM, F_SIZE, 24 * 1000000 },    /* past the end of the file */
		{ SHT_DYNSYM, F_SIZE, 25 },              /* not a multiple of entsize */
		{ SHT_DYNSYM, F_OFFSET, huge },
		{ SHT_DYNSYM, F_ENTSIZE, 0 },
		{ SHT_DYNSYM, F_ENTSIZE, 16 },
		{ SHT_DYNSYM, F_FLAGS, SHF_COMPRESSED },
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		print_message("edit #%zu\n", i);
		assert_int_equal(open_mutated(img, len, mutate_shdr, &edits[i]), -EINVAL);
	}
	for (int f = F_SIZE; f <= F_OFFSET; f++)
		assert_int_equal(open_mutated(img, len, mutate_dynstr, &f), -EINVAL);
	assert_int_equal(open_mutated(img, len, mutate_st_name, NULL), -EINVAL);
	for (int w = 0; w <= 5; w++) {
		int r = open_mutated(img, len, mutate_ehdr, &w);
		print_message("ehdr edit %d -> %d\n", w, r);
		assert_true(r == -EINVAL || r == -E2BIG);
	}

	/* Bad build-id notes: the file still opens, the build-id is refused. */
	uint32_t vals[] = { ELFSYM_BUILD_ID_MAX + 1, 0, 0xffff0000u, 0x80000000u };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		unsigned char *copy = malloc(len);
		struct elfsym *e;
		char id[256];

		memcpy(copy, img, len);
		mutate_note(copy, len, &vals[i]);
		assert_int_equal(elfsym_open_mem(&e, copy, len), 0);
		assert_true(elfsym_build_id(e, id, sizeof(id)) < 0);
		elfsym_close(e);
		free(copy);
	}
	free(img);
}

/* Limits: more symbols than ELFSYM_MAX_SYMBOLS, names longer than ELFSYM_NAME_MAX. */
static void test_limits(void **state UNUSED)
{
	size_t len, big;
	unsigned char *img = read_whole(LIBC, &len), *copy;
	unsigned i;
	Elf64_Shdr sh;
	struct elfsym *e;

	big = len + ((size_t)ELFSYM_MAX_SYMBOLS + 1) * sizeof(Elf64_Sym);
	copy = calloc(1, big);
	assert_non_null(copy);
	memcpy(copy, img, len);
	i = find_shdr(copy, SHT_DYNSYM);
	sh = get_shdr(copy, i);
	sh.sh_offset = len;
	sh.sh_size = ((uint64_t)ELFSYM_MAX_SYMBOLS + 1) * sizeof(Elf64_Sym);
	put_shdr(copy, i, &sh);
	assert_int_equal(elfsym_open_mem(&e, copy, big), -E2BIG);
	sh.sh_size -= sizeof(Elf64_Sym);   /* at the limit: all-zero symbols, none kept */
	put_shdr(copy, i, &sh);
	assert_int_equal(elfsym_open_mem(&e, copy, big), 0);
	assert_int_equal(elfsym_count(e), 0);
	elfsym_close(e);
	free(copy);

	/* .dynstr moved onto 64 KiB of 'a' without a NUL: every name is over
	 * ELFSYM_NAME_MAX (or runs to the table's end), so none is kept, and nothing reads
	 * past the table. */
	size_t region = 4 * ELFSYM_NAME_MAX;
	Elf64_Shdr dyn, str;
	copy = malloc(len + region);
	assert_non_null(copy);
	memcpy(copy, img, len);
	memset(copy + len, 'a', region);
	dyn = get_shdr(copy, find_shdr(copy, SHT_DYNSYM));
	str = get_shdr(copy, dyn.sh_link);
	assert_true(str.sh_size < region - ELFSYM_NAME_MAX);
	str.sh_offset = len;
	str.sh_size = region;
	put_shdr(copy, dyn.sh_link, &str);
	assert_int_equal(elfsym_open_mem(&e, copy, len + region), 0);
	assert_int_equal(elfsym_count(e), 0);
	elfsym_close(e);
	free(copy);
	free(img);
}

/* Byte flips in the ELF header, program headers, section headers and .dynsym. */
static void test_random_mutations(void **state UNUSED)
{
	size_t len;
	unsigned char *img = read_whole(LIBC, &len);
	Elf64_Ehdr eh;
	Elf64_Shdr dyn;
	unsigned ok = 0;

	memcpy(&eh, img, sizeof(eh));
	dyn = get_shdr(img, find_shdr(img, SHT_DYNSYM));
	for (int it = 0; it < 300; it++) {
		unsigned char *copy = malloc(len);
		struct elfsym *e;
		int flips = 1 + (int)(rnd() % 8);

		memcpy(copy, img, len);
		for (int f = 0; f < flips; f++) {
			size_t at;
			switch (rnd() % 4) {
			case 0: at = rnd() % 64; break;
			case 1: at = eh.e_phoff + rnd() % ((size_t)eh.e_phnum * eh.e_phentsize); break;
			case 2: at = eh.e_shoff + rnd() % ((size_t)eh.e_shnum * eh.e_shentsize); break;
			default: at = dyn.sh_offset + rnd() % dyn.sh_size; break;
			}
			copy[at] ^= (unsigned char)(1u << (rnd() % 8));
		}
		if (elfsym_open_mem(&e, copy, len) == 0) {
			uint64_t off, delta, offs[3];
			static const char *const names[] = { "malloc", "free", "calloc" };
			char id[256];

			ok++;
			(void)elfsym_build_id(e, id, sizeof(id));
			(void)elfsym_find_funcs(e, names, 3, offs);
			if (elfsym_func_offset(e, "malloc", &off) == 0)
				(void)elfsym_lookup_offset(e, off + 1, &delta);
			for (int k = 0; k < 32; k++)
				(void)elfsym_lookup_offset(e, rnd() % len, &delta);
			elfsym_close(e);
		}
		free(copy);
	}
	print_message("%u of 300 mutated images opened\n", ok);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libc_build_id),
		cmocka_unit_test(test_libc_malloc),
		cmocka_unit_test(test_libstdcxx_new),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_fixture_nopie),
		cmocka_unit_test(test_fixture_static),
		cmocka_unit_test(test_fixture_versions),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupt_headers),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_random_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
