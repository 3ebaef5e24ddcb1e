/* Unit tests for symbolizer/elf_needed.c: which host libraries a binary names in
 * DT_NEEDED (the daemon links libstdc++ at a held exec only when the executable does).
 * Expected masks come from readelf -d (an independent reader) on Debian binaries and the
 * static fixture; truncated and mutated copies must fail cleanly or match nothing. */
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
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/elf_needed.h"

#define UNUSED __attribute__((unused))
#define COPY_MAX (8u << 20)   /* bytes of a binary copied for the mutation cases */

static const char *const libs[] = { "libc.so", "libstdc++.so", "libm.so" };
#define NLIBS (sizeof(libs) / sizeof(libs[0]))

/* The mask readelf -d gives path, or -1 where readelf cannot run. */
static int readelf_mask(const char *path)
{
	char cmd[PATH_MAX + 64], line[1024];
	int mask = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf -dW '%s' 2>/dev/null", path);
	if (!(f = popen(cmd, "r")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *lib = strstr(line, "(NEEDED)") ? strstr(line, "Shared library: [") : NULL;
		if (!lib)
			continue;
		lib += strlen("Shared library: [");
		for (size_t i = 0; i < NLIBS; i++)
			if (!strncmp(lib, libs[i], strlen(libs[i])))
				mask |= 1 << i;
	}
	return pclose(f) == 0 ? mask : -1;
}

static void check_against_readelf(const char *path)
{
	uint32_t mask = 0xdead;
	int want;

	if (access(path, R_OK))
		return;   /* not installed here */
	if ((want = readelf_mask(path)) < 0) {
		skip();
		return;
	}
	assert_int_equal(elf_needs(path, libs, NLIBS, &mask), 0);
	if ((int)mask != want)
		fail_msg("%s: elf_needs mask %#x, readelf says %#x", path, mask, (unsigned)want);
}

static void test_debian_binaries(void UNUSED **state)
{
	static const char *const bins[] = {
		"/bin/ls", "/usr/bin/python3", "/usr/bin/sqlite3", "/usr/bin/xz", "/usr/bin/git",
		"/usr/bin/c++filt", "/usr/bin/gdb", "/usr/bin/cmake", "/usr/bin/ninja",
		"/lib/x86_64-linux-gnu/libstdc++.so.6",
	};
	int cxx = 0;

	for (size_t i = 0; i < sizeof(bins) / sizeof(bins[0]); i++) {
		check_against_readelf(bins[i]);
		if (readelf_mask(bins[i]) > 0 && (readelf_mask(bins[i]) & 2))
			cxx++;
	}
	/* /bin/ls needs libc alone: the common case the hold relies on. */
	uint32_t mask;
	assert_int_equal(elf_needs("/bin/ls", libs, NLIBS, &mask), 0);
	assert_int_equal(mask, 1);
	if (!cxx)
		print_message("no C++ binary among the candidates on this machine\n");
}

static void test_static(void UNUSED **state)
{
	const char *dir = getenv("MEMPROFD_FIXTURES");
	char path[PATH_MAX];
	uint32_t mask = 0xdead;

	snprintf(path, sizeof(path), "%s/elfsym_fixture_static", dir ? dir : "fixtures");
	if (access(path, R_OK))
		fail_msg("fixture %s missing", path);
	assert_int_equal(elf_needs(path, libs, NLIBS, &mask), 0);
	assert_int_equal(mask, 0);   /* no dynamic section */
}

static void test_bad_files(void UNUSED **state)
{
	uint32_t mask = 0xdead;

	assert_int_equal(elf_needs("/nonexistent/x", libs, NLIBS, &mask), -ENOENT);
	assert_int_equal(mask, 0);
	assert_true(elf_needs("/etc/passwd", libs, NLIBS, &mask) < 0);
	assert_int_equal(elf_needs("/bin/ls", libs, 33, &mask), -EINVAL);
}

/* Copies of /bin/ls cut at many lengths, and with random bytes flipped: an error or a
 * mask of known bits, never a crash (run under ASan to mean it). */
static void test_hostile_copies(void UNUSED **state)
{
	char tmp[] = "/tmp/test_elf_needed.XXXXXX";
	int src = open("/bin/ls", O_RDONLY | O_CLOEXEC), fd = mkstemp(tmp);
	unsigned char *buf = malloc(COPY_MAX);
	ssize_t n;

	assert_true(src >= 0 && fd >= 0 && buf);
	n = read(src, buf, COPY_MAX);
	close(src);
	assert_true(n > 4096);
	srand(18);
	for (int round = 0; round < 400; round++) {
		size_t len = round < 200 ? (size_t)rand() % (size_t)n : (size_t)n;
		unsigned char *copy = malloc((size_t)n);
		memcpy(copy, buf, (size_t)n);
		for (int k = 0; round >= 200 && k < 16; k++)
			copy[(size_t)rand() % (size_t)n] ^= (unsigned char)(1 + rand() % 255);
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(pwrite(fd, copy, len, 0), (ssize_t)len);
		free(copy);
		uint32_t mask = 0;
		int err = elf_needs(tmp, libs, NLIBS, &mask);
		assert_true(err <= 0);
		assert_int_equal(mask & ~((1u << NLIBS) - 1), 0);
	}
	close(fd);
	unlink(tmp);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debian_binaries),
		cmocka_unit_test(test_static),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_hostile_copies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
