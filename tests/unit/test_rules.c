/* daemon/service/rules.c: targets AND/OR semantics, globs across '/', build-id prefixes, deny
 * winning over every target, unknown fields never matching, cgroup file parsing, and
 * reading this very process's identity from /proc. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/service/rules.h"

static char *v1[] = { "/usr/bin/nginx*", "/opt/*/bin/server" };
static char *v2[] = { "nginx" };
static char *v3[] = { "/system.slice/*" };
static char *v4[] = { "deadbeef" };
static char *d1[] = { "*/memprofd" };
static char *d2[] = { "/system.slice/sshd.service" };

static struct target_rule targets[] = {
	{ .name = "web", .exe = { v1, 2 }, .cgroup = { v3, 1 } },
	{ .name = "bycomm", .comm = { v2, 1 } },
	{ .name = "bybid", .build_id = { v4, 1 } },
	{ .name = "empty" },
};

static struct config cfg(bool deny)
{
	struct config c = { .targets = targets, .ntargets = 4 };

	if (deny) {
		c.deny.exe = (struct strlist){ d1, 1 };
		c.deny.cgroup = (struct strlist){ d2, 1 };
	}
	return c;
}

static struct proc_identity id(const char *exe, const char *comm, const char *cg, const char *bid)
{
	struct proc_identity p;

	memset(&p, 0, sizeof(p));
	snprintf(p.exe, sizeof(p.exe), "%s", exe);
	snprintf(p.comm, sizeof(p.comm), "%s", comm);
	snprintf(p.cgroup, sizeof(p.cgroup), "%s", cg);
	snprintf(p.build_id, sizeof(p.build_id), "%s", bid);
	return p;
}

static void test_targets(void **state)
{
	struct config c = cfg(false);
	struct proc_identity p;
	struct rule_match m;

	/* exe AND cgroup both needed for "web". */
	p = id("/usr/bin/nginx-debug", "x", "/system.slice/web.service", "");
	m = rules_match(&c, &p);
	assert_int_equal(m.verdict, RULE_TARGET);
	assert_string_equal(m.rule, "web");
	p = id("/usr/bin/nginx", "x", "/user.slice/u.scope", "");
	assert_int_equal(rules_match(&c, &p).verdict, RULE_NONE);
	/* '*' spans '/', the second exe pattern is an alternative. */
	p = id("/opt/a/b/bin/server", "x", "/system.slice/s.service", "");
	assert_int_equal(rules_match(&c, &p).verdict, RULE_TARGET);
	/* comm rule. */
	p = id("/bin/other", "nginx", "", "");
	m = rules_match(&c, &p);
	assert_int_equal(m.verdict, RULE_TARGET);
	assert_string_equal(m.rule, "bycomm");
	/* build-id: exact, prefix of >= 8, case-insensitive; shorter strings do not match. */
	p = id("/bin/x", "x", "", "deadbeef");
	assert_string_equal(rules_match(&c, &p).rule, "bybid");
	p = id("/bin/x", "x", "", "DEADBEEF00112233");
	assert_string_equal(rules_match(&c, &p).rule, "bybid");
	p = id("/bin/x", "x", "", "deadbee");
	assert_int_equal(rules_match(&c, &p).verdict, RULE_NONE);
	/* Unknown fields never match; the empty rule matches nothing. */
	p = id("", "", "", "");
	assert_int_equal(rules_match(&c, &p).verdict, RULE_NONE);
}

static void test_deny_wins(void **state)
{
	struct config c = cfg(true);
	struct proc_identity p;
	struct rule_match m;

	p = id("/usr/bin/memprofd", "nginx", "", "deadbeef");   /* matches two targets */
	m = rules_match(&c, &p);
	assert_int_equal(m.verdict, RULE_DENIED);
	assert_string_equal(m.key, "exe");
	p = id("/usr/bin/nginx", "nginx", "/system.slice/sshd.service", "");
	m = rules_match(&c, &p);
	assert_int_equal(m.verdict, RULE_DENIED);
	assert_string_equal(m.key, "cgroup");
	p = id("/usr/bin/nginx", "nginx", "/system.slice/nginx.service", "");
	assert_int_equal(rules_match(&c, &p).verdict, RULE_TARGET);
}

static void test_parse_cgroup(void **state)
{
	char out[256];

	assert_int_equal(rules_parse_cgroup("0::/system.slice/a.service\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/system.slice/a.service");
	/* Hybrid: the unified line wins wherever it is. */
	assert_int_equal(rules_parse_cgroup("12:cpu,cpuacct:/x\n1:name=systemd:/sys/b.service\n"
					    "0::/unified/c\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/unified/c");
	/* v1 only: name=systemd, else the first hierarchy. */
	assert_int_equal(rules_parse_cgroup("3:memory:/m\n1:name=systemd:/sys/b.service\n", out,
					    sizeof(out)), 0);
	assert_string_equal(out, "/sys/b.service");
	assert_int_equal(rules_parse_cgroup("3:memory:/m\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/m");
	assert_int_equal(rules_parse_cgroup("", out, sizeof(out)), -ENOENT);
	assert_int_equal(rules_parse_cgroup("garbage\n", out, sizeof(out)), -ENOENT);
	assert_int_equal(rules_parse_cgroup("0::/toolong\n", out, 4), -ENOENT);
}

static void test_read_self(void **state)
{
	struct proc_identity p;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(n > 0);
	exe[n] = '\0';
	assert_int_equal(rules_read_identity(getpid(), &p), 0);
	assert_string_equal(p.exe, exe);
	assert_string_equal(p.comm, "test_rules");
	assert_true(p.cgroup[0] == '/');
	assert_int_equal(rules_read_identity(0x3ffffff0, &p), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_targets), cmocka_unit_test(test_deny_wins),
		cmocka_unit_test(test_parse_cgroup), cmocka_unit_test(test_read_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
