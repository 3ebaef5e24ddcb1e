/* Target matching with fnmatch(3): exe and cgroup globs match across '/' (flags 0), so
 * "/opt/NAME-[0-9]*" and "/system.slice/NAME*" both work; comm globs too; build-ids
 * compare as hex, a given prefix of 8+ digits matching like git's abbreviated ids. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "daemon/service/rules.h"

static bool any_glob(const struct strlist *l, const char *s)
{
	if (!*s)
		return false;
	for (size_t i = 0; i < l->n; i++)
		if (fnmatch(l->v[i], s, 0) == 0)
			return true;
	return false;
}

static bool any_build_id(const struct strlist *l, const char *bid)
{
	size_t n = strlen(bid);

	if (!n)
		return false;
	for (size_t i = 0; i < l->n; i++) {
		size_t m = strlen(l->v[i]);

		if (m == n ? !strcasecmp(l->v[i], bid) : (m >= 8 && m < n && !strncasecmp(l->v[i], bid, m)))
			return true;
	}
	return false;
}

/* A key with values constrains; an empty key does not. */
static bool key_ok(const struct strlist *l, bool hit)
{
	return l->n == 0 || hit;
}

struct rule_match rules_match(const struct config *c, const struct proc_identity *id)
{
	const struct deny_rule *d = &c->deny;

	if (any_glob(&d->exe, id->exe))
		return (struct rule_match){ RULE_DENIED, "deny", "exe" };
	if (any_glob(&d->comm, id->comm))
		return (struct rule_match){ RULE_DENIED, "deny", "comm" };
	if (any_glob(&d->cgroup, id->cgroup))
		return (struct rule_match){ RULE_DENIED, "deny", "cgroup" };
	if (any_build_id(&d->build_id, id->build_id))
		return (struct rule_match){ RULE_DENIED, "deny", "build_id" };
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct target_rule *t = &c->targets[i];

		if (!t->exe.n && !t->comm.n && !t->cgroup.n && !t->build_id.n)
			continue;   /* an empty section matches nothing, not everything */
		if (key_ok(&t->exe, any_glob(&t->exe, id->exe)) &&
		    key_ok(&t->comm, any_glob(&t->comm, id->comm)) &&
		    key_ok(&t->cgroup, any_glob(&t->cgroup, id->cgroup)) &&
		    key_ok(&t->build_id, any_build_id(&t->build_id, id->build_id)))
			return (struct rule_match){ RULE_TARGET, t->name, NULL };
	}
	return (struct rule_match){ RULE_NONE, NULL, NULL };
}

static int copy_path(const char *p, size_t len, char *out, size_t outsz)
{
	if (len == 0 || len >= outsz)
		return -ENOENT;
	memcpy(out, p, len);
	out[len] = '\0';
	return 0;
}

int rules_parse_cgroup(const char *text, char *out, size_t outsz)
{
	const char *first = NULL, *sysd = NULL;
	size_t first_len = 0, sysd_len = 0;

	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (c1 + 1 - line)) : NULL;

		if (c2) {
			const char *path = c2 + 1;
			size_t plen = len - (path - line);

			if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1)
				return copy_path(path, plen, out, outsz);     /* v2 unified */
			if ((size_t)(c2 - c1 - 1) == strlen("name=systemd") &&
			    !strncmp(c1 + 1, "name=systemd", c2 - c1 - 1)) {
				sysd = path;
				sysd_len = plen;
			}
			if (!first) {
				first = path;
				first_len = plen;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (sysd)
		return copy_path(sysd, sysd_len, out, outsz);
	if (first)
		return copy_path(first, first_len, out, outsz);
	return -ENOENT;
}

static int read_small(const char *path, char *buf, size_t sz)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((size_t)total < sz - 1 && (n = read(fd, buf + total, sz - 1 - total)) > 0)
		total += n;
	int e = n < 0 ? -errno : 0;
	close(fd);
	buf[total] = '\0';
	return e;
}

int rules_read_identity(pid_t pid, struct proc_identity *id)
{
	char path[64], buf[RULES_PATH_MAX + 64];
	ssize_t n;
	int r;

	memset(id, 0, sizeof(*id));
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	r = read_small(path, id->comm, sizeof(id->comm));
	if (r)
		return r;
	id->comm[strcspn(id->comm, "\n")] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, id->exe, sizeof(id->exe) - 1);
	if (n > 0) {
		static const char deleted[] = " (deleted)";   /* replaced by an upgrade */
		size_t dl = sizeof(deleted) - 1;

		id->exe[n] = '\0';
		if ((size_t)n > dl && !strcmp(id->exe + n - dl, deleted))
			id->exe[n - dl] = '\0';
	}
	else if (errno == ENOENT && kill(pid, 0) < 0 && errno == ESRCH)
		return -ESRCH;
	else
		id->exe[0] = '\0';      /* a kernel thread, or not ours to read */
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_small(path, buf, sizeof(buf)) == 0)
		rules_parse_cgroup(buf, id->cgroup, sizeof(id->cgroup));
	return 0;
}
