/* Unit tests for symbolizer/debuginfo.c: a stripped fixture finds its .debug file through
 * a /usr/lib/debug/.build-id style tree and through .gnu_debuglink (same dir, .debug/,
 * under the root) in temp dirs (the root is configurable, nothing touches /usr/lib/debug);
 * wrong build-ids and CRCs are refused; debuginfod is asked only when enabled AND
 * DEBUGINFOD_URLS is set (a local python http.server plays the server). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#include "symbolizer/debuginfo.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define UNUSED __attribute__((unused))
/* The build dir holds the .debug next to the stripped file (debuglink would find it):
 * tests that need it alone use a copy, LONE. */
#define STRIPPED "fixtures_dwarf/dwarf_c_gcc_stripped"
static char LONE[128];
#define DEBUG "fixtures_dwarf/dwarf_c_gcc.debug"
#define OTHER_DEBUG "fixtures_dwarf/dwarf_cc_clang.debug"

static char tmp[64];
static char id[130];

static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static int setup(void **s UNUSED)
{
	strcpy(tmp, "/tmp/test_debuginfo.XXXXXX");
	if (!mkdtemp(tmp) || elf_build_id_of(STRIPPED, id, sizeof(id)) < 0)
		return -1;
	snprintf(LONE, sizeof(LONE), "%s/lone", tmp);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "cp %s %s", STRIPPED, LONE);
	return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **s UNUSED)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_read_link(void **s UNUSED)
{
	char name[256], cmd[512], line[64];
	unsigned crc, want;
	FILE *f;

	assert_int_equal(debuginfo_read_link(STRIPPED, name, sizeof(name), &crc), 0);
	assert_string_equal(name, "dwarf_c_gcc.debug");
	/* The CRC the link records is zlib's crc32 of the debug file: ask python's zlib. */
	snprintf(cmd, sizeof(cmd), "python3 -c 'import zlib,sys; print(zlib.crc32(open(\"%s\",\"rb\").read()))'",
		 DEBUG);
	assert_non_null(f = popen(cmd, "r"));
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	want = (unsigned)strtoul(line, NULL, 10);
	assert_int_equal(crc, want);
	assert_int_equal(debuginfo_file_crc(DEBUG, &crc), 0);
	assert_int_equal(crc, want);
	assert_int_equal(debuginfo_read_link("fixtures_dwarf/dwarf_c_gcc", name, sizeof(name), &crc),
			 -ENOENT);
}

static void test_build_id_tree(void **s UNUSED)
{
	struct debuginfo_opts o = { .debug_root = tmp };
	char out[PATH_MAX], want[PATH_MAX];

	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), -ENOENT);
	/* Another build's debug file at this build-id's place is refused. */
	sh("mkdir -p %s/.build-id/%.2s && cp %s %s/.build-id/%.2s/%s.debug", tmp, id, OTHER_DEBUG,
	   tmp, id, id + 2);
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), -ENOENT);
	sh("cp %s %s/.build-id/%.2s/%s.debug", DEBUG, tmp, id, id + 2);
	snprintf(want, sizeof(want), "%s/.build-id/%.2s/%s.debug", tmp, id, id + 2);
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	/* The build-id is read from the binary when not given. */
	assert_int_equal(debuginfo_find(&o, LONE, NULL, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, 8), -ERANGE);

	/* And the cache resolves the stripped binary through it: the full inline chain. */
	struct symcache_opts co = { .debug = o };
	struct symcache *c = NULL;
	struct dwsym_frames f;
	struct elfsym *e = NULL;
	uint64_t off;

	assert_int_equal(elfsym_open(&e, "fixtures_dwarf/dwarf_c_gcc"), 0);
	assert_int_equal(elfsym_func_offset(e, "outer_static", &off), 0);
	elfsym_close(e);
	assert_int_equal(symcache_new(&c, &co), 0);
	assert_int_equal(symcache_code(c, id, LONE, NULL, off, &f), 0);
	assert_int_equal(f.n, 1);
	assert_string_equal(f.v[0].mangled, "outer_static");
	assert_int_equal(f.v[0].decl_line, 27);
	dwsym_frames_free(&f);
	symcache_free(c);
	sh("rm -rf %s/.build-id", tmp);
}

static void test_debuglink(void **s UNUSED)
{
	char root[256], bin[256], out[PATH_MAX], want[PATH_MAX];
	struct debuginfo_opts o = { .debug_root = root };

	snprintf(root, sizeof(root), "%s/root", tmp);
	snprintf(bin, sizeof(bin), "%s/app/bin", tmp);
	sh("mkdir -p %s %s/app && cp %s %s", root, tmp, STRIPPED, bin);
	assert_int_equal(debuginfo_find(&o, bin, NULL, id, out, sizeof(out)), -ENOENT);

	/* Under the root, by the binary's directory. */
	sh("mkdir -p %s%s/app && cp %s %s%s/app/", root, tmp, DEBUG, root, tmp);
	snprintf(want, sizeof(want), "%s%s/app/dwarf_c_gcc.debug", root, tmp);
	assert_int_equal(debuginfo_find(&o, bin, NULL, id, out, sizeof(out)), 0);
	assert_string_equal(out, want);

	/* In .debug/ next to the binary (preferred over the root). */
	sh("mkdir -p %s/app/.debug && cp %s %s/app/.debug/", tmp, DEBUG, tmp);
	snprintf(want, sizeof(want), "%s/app/.debug/dwarf_c_gcc.debug", tmp);
	assert_int_equal(debuginfo_find(&o, bin, NULL, id, out, sizeof(out)), 0);
	assert_string_equal(out, want);

	/* Next to the binary (preferred over .debug/). */
	sh("cp %s %s/app/", DEBUG, tmp);
	snprintf(want, sizeof(want), "%s/app/dwarf_c_gcc.debug", tmp);
	assert_int_equal(debuginfo_find(&o, bin, NULL, id, out, sizeof(out)), 0);
	assert_string_equal(out, want);

	/* The logical path names the directory (open_path may be a /proc path). */
	char proc[64];
	FILE *keep = fopen(bin, "rb");
	assert_non_null(keep);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fileno(keep));
	assert_int_equal(debuginfo_find(&o, proc, bin, id, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	fclose(keep);

	/* A CRC mismatch anywhere is refused: same build-id, one byte more. */
	sh("for f in %s/app/dwarf_c_gcc.debug %s/app/.debug/dwarf_c_gcc.debug %s%s/app/dwarf_c_gcc.debug;"
	   " do printf x >> $f; done", tmp, tmp, root, tmp);
	assert_int_equal(debuginfo_find(&o, bin, NULL, id, out, sizeof(out)), -ENOENT);
}

static pid_t start_server(const char *dir, int port)
{
	pid_t pid = fork();

	if (pid == 0) {
		char p[16];
		snprintf(p, sizeof(p), "%d", port);
		freopen("/dev/null", "w", stderr);
		freopen("/dev/null", "w", stdout);
		execlp("python3", "python3", "-m", "http.server", "--bind", "127.0.0.1",
		       "--directory", dir, p, (char *)NULL);
		_exit(127);
	}
	/* Wait until it answers. */
	for (int i = 0; i < 100; i++) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "python3 -c 'import urllib.request as u; "
			 "u.urlopen(\"http://127.0.0.1:%d/\")' 2>/dev/null", port);
		if (system(cmd) == 0)
			break;
		usleep(100000);
	}
	return pid;
}

static void test_debuginfod_only_when_configured(void **s UNUSED)
{
	char srv[256], cache[256], root[256], url[64], out[PATH_MAX];
	struct debuginfo_opts o = { .debug_root = root, .debuginfod = true };
	int port = 20000 + getpid() % 20000;
	pid_t pid;

	snprintf(srv, sizeof(srv), "%s/srv", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	snprintf(root, sizeof(root), "%s/emptyroot", tmp);
	sh("mkdir -p %s/buildid/%s %s %s && cp %s %s/buildid/%s/debuginfo", srv, id, cache, root,
	   DEBUG, srv, id);
	pid = start_server(srv, port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	setenv("DEBUGINFOD_TIMEOUT", "10", 1);

	unsetenv("DEBUGINFOD_URLS");
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), -ENOENT);
	setenv("DEBUGINFOD_URLS", url, 1);
	o.debuginfod = false;
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), -ENOENT);
	o.debuginfod = true;
	assert_int_equal(debuginfo_find(&o, LONE, NULL, id, out, sizeof(out)), 0);
	assert_int_equal(strncmp(out, cache, strlen(cache)), 0);
	/* A server answering with another build's file is not believed. */
	char other[130];
	assert_int_equal(elf_build_id_of("fixtures_dwarf/dwarf_cc_clang", other,
					 sizeof(other)), 0);
	sh("mkdir -p %s/buildid/%s && cp %s %s/buildid/%s/debuginfo", srv, other, DEBUG, srv, other);
	assert_int_equal(debuginfo_find(&o, "fixtures_dwarf/dwarf_cc_clang", NULL, other,
					out, sizeof(out)), -ENOENT);
	unsetenv("DEBUGINFOD_URLS");
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

static void test_bad_args(void **s UNUSED)
{
	char out[64], name[8];
	unsigned crc;

	assert_int_equal(debuginfo_find(NULL, NULL, NULL, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(debuginfo_find(NULL, STRIPPED, NULL, "../../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(debuginfo_read_link(STRIPPED, name, sizeof(name), &crc), -ERANGE);
	assert_int_equal(debuginfo_read_link("/dev/null", name, sizeof(name), &crc), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_link),
		cmocka_unit_test(test_build_id_tree),
		cmocka_unit_test(test_debuglink),
		cmocka_unit_test(test_debuginfod_only_when_configured),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
