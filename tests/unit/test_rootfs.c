/* symbolizer/rootfs.c: a container-style root whose links point out of it (absolute,
 * ../ chains, /proc magic links) opens nothing outside; links that stay inside work. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/rootfs.h"

static char top[] = "/tmp/test_rootfs.XXXXXX";
static char outside[300], root[300];

static void put(const char *rel, const char *text)
{
	char p[600];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_non_null(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

static void link_in_root(const char *target, const char *rel)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	char p[600];

	assert_non_null(mkdtemp(top));
	snprintf(outside, sizeof(outside), "%s/host_secret", top);
	snprintf(root, sizeof(root), "%s/root", top);
	FILE *f = fopen(outside, "w");
	assert_non_null(f);
	fputs("host", f);
	fclose(f);
	mkdir(root, 0755);
	snprintf(p, sizeof(p), "%s/lib", root);
	mkdir(p, 0755);
	put("lib/real.so", "container");
	link_in_root(outside, "lib/abs.so");                   /* absolute, to the host */
	link_in_root("../../../../../../host_secret", "lib/dotdot.so");
	link_in_root("/proc/self/root/etc/passwd", "lib/magic.so");
	link_in_root("/lib/real.so", "lib/inside_abs.so");      /* absolute, stays inside */
	link_in_root("real.so", "lib/inside_rel.so");
	return 0;
}

static int teardown(void **state)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

static void read_back(int fd, const char *want)
{
	char buf[32] = "";

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) > 0);
	close(fd);
	assert_string_equal(buf, want);
}

static void test_escapes_stay_inside(void **state)
{
	int rootfd = open(root, O_PATH | O_DIRECTORY);

	assert_true(rootfd >= 0);
	/* Each resolves inside the root, where no host_secret exists. */
	assert_int_equal(rootfs_openat(rootfd, "/lib/abs.so"), -ENOENT);
	assert_int_equal(rootfs_openat(rootfd, "/lib/dotdot.so"), -ENOENT);
	assert_int_equal(rootfs_openat(rootfd, "/../../host_secret"), -ENOENT);
	assert_true(rootfs_openat(rootfd, "/lib/magic.so") < 0);
	/* Links that stay inside still work. */
	read_back(rootfs_openat(rootfd, "/lib/real.so"), "container");
	read_back(rootfs_openat(rootfd, "/lib/inside_abs.so"), "container");
	read_back(rootfs_openat(rootfd, "/lib/inside_rel.so"), "container");
	assert_int_equal(rootfs_openat(rootfd, "lib/real.so"), -EINVAL);   /* relative */
	close(rootfd);
}

static void test_own_root(void **state)
{
	/* Our own root is "/": the host file is reachable, as it should be. */
	read_back(rootfs_open(getpid(), outside), "host");
	assert_true(rootfs_open(999999999, "/etc/passwd") < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escapes_stay_inside),
		cmocka_unit_test(test_own_root),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
