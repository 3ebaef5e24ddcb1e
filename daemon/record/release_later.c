/* The helper that inherits record's BPF and perf objects and drops them after record has
 * exited (see release_later.h). Invariant: the helper closes every descriptor that is not
 * an anon-inode BPF or perf object, then waits for record's exit (EOF on a pipe whose
 * write end only record holds) and exits: it holds the last references. After fork it
 * calls only close, read and _exit (record may have threads). Cost to record: one fork. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "daemon/record/release_later.h"

/* Whether fd is a BPF link, program or map, or a perf event: what the helper keeps. */
static bool is_probe_object(int fd)
{
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return !strncmp(target, "anon_inode:bpf", 14) || !strcmp(target, "anon_inode:[perf_event]");
}

/* The descriptors the helper must close: every open one but the probe objects and keep. */
static int fds_to_close(int *out, size_t max, int keep, size_t *n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -errno;
	*n = 0;
	while ((e = readdir(d))) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end || end == e->d_name || fd == dirfd(d) || fd == keep || is_probe_object((int)fd))
			continue;
		if (*n == max) {
			closedir(d);
			return -EMFILE;
		}
		out[(*n)++] = (int)fd;
	}
	closedir(d);
	return 0;
}

int release_later(void)
{
	int *fds = malloc(RELEASE_LATER_FDS_MAX * sizeof(*fds)), alive[2];
	size_t n = 0;
	pid_t pid;
	int err;

	if (!fds)
		return -ENOMEM;
	/* alive: its write end is ours alone; the helper's read returns at our exit. */
	if (pipe2(alive, O_CLOEXEC) < 0) {
		free(fds);
		return -errno;
	}
	err = fds_to_close(fds, RELEASE_LATER_FDS_MAX, alive[0], &n);
	fflush(NULL);   /* no buffered output written twice */
	pid = err ? -1 : fork();
	if (pid == 0) {
		char c;
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
		while (read(alive[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);      /* the kernel drops the probe objects: the slow part, now ours */
	}
	if (!err && pid < 0)
		err = -errno;
	close(alive[0]);
	if (err)
		close(alive[1]);   /* else held until our exit */
	free(fds);
	return err;
}
