/* Fork/attach/exec barrier for `memprofd record -- CMD` (see child.h). The child does
 * nothing between fork and exec but wait and restore its signal mask: no allocation of
 * ours is ever attributed to it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "daemon/record/child.h"

static int check_exec(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (access(path, X_OK) < 0)
		return -errno;
	return 0;
}

int child_find_command(const char *name, char *out, size_t outsz)
{
	const char *path = getenv("PATH");
	int last = -ENOENT;

	if (!*name)
		return -ENOENT;
	if (strchr(name, '/')) {
		char abs[PATH_MAX];
		int r = check_exec(name);
		if (r)
			return r;
		/* Absolute, so the exec event names a file we can open after the process is gone. */
		if (!realpath(name, abs))
			return -errno;
		if (strlen(abs) >= outsz)
			return -ENAMETOOLONG;
		snprintf(out, outsz, "%s", abs);
		return 0;
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		int w = snprintf(out, outsz, "%.*s%s%s", (int)n, path, n ? "/" : "", name);
		if (w > 0 && (size_t)w < outsz) {
			int r = check_exec(out);
			if (r == 0)
				return 0;
			if (r == -EACCES)
				last = r;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return last;
}

int child_spawn(struct child *c, const char *path, char *const argv[], const sigset_t *child_mask)
{
	int go[2], err[2];

	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = -errno;
		close(go[0]);
		close(go[1]);
		return e;
	}
	c->pid = fork();
	if (c->pid < 0) {
		int e = -errno;
		close(go[0]); close(go[1]); close(err[0]); close(err[1]);
		return e;
	}
	if (c->pid == 0) {
		char b;
		close(go[1]);
		close(err[0]);
		if (read(go[0], &b, 1) != 1)
			_exit(127);          /* the recorder died before releasing us */
		sigprocmask(SIG_SETMASK, child_mask, NULL);
		execv(path, argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	c->go_fd = go[1];
	c->err_fd = err[0];
	return 0;
}

int child_release(struct child *c)
{
	char b = 'g';
	int e = 0;
	ssize_t n;

	if (write(c->go_fd, &b, 1) != 1)
		return -errno;
	close(c->go_fd);
	c->go_fd = -1;
	do
		n = read(c->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(c->err_fd);
	c->err_fd = -1;
	if (n == sizeof(e))
		return -e;
	return 0;
}
