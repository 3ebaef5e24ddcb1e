/* rootfs (rootfs.h): openat2 from /proc/PID/root with the resolution confined to it. Cost:
 * two opens and a close per file; callers open each binary once per inode anyway. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "symbolizer/rootfs.h"

int rootfs_openat(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (!path || path[0] != '/')
		return -EINVAL;
	fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

int rootfs_open(pid_t pid, const char *path)
{
	char root[64];
	int rootfd, fd;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	fd = rootfs_openat(rootfd, path);
	close(rootfd);
	return fd;
}
