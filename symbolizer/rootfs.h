/* Opening a file named by a traced process inside that process's own root. Paths a target
 * gives us (its maps, its LD_PRELOAD, its executable's name) are hostile: in a container,
 * /proc/PID/root/PATH follows the container's symlinks, and an absolute or ../ link there
 * resolves against memprofd's root, i.e. the host (a link to /etc/shadow would be read
 * as root). rootfs_open resolves PATH with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * from the process's root directory, so every component, link targets included, stays
 * inside it; without openat2 (Linux < 5.6) it refuses rather than fall back. */
#pragma once
#include <sys/types.h>

/* An open file descriptor for PATH (absolute, as the process sees it) in pid's root,
 * opened O_RDONLY | O_CLOEXEC, or -errno: -EXDEV / -ELOOP for a path that would leave the
 * root or cross a magic link, -ENOSYS without openat2. */
int rootfs_open(pid_t pid, const char *path);
/* The same for a directory file descriptor of a root already open (tests; a root held
 * across several opens). */
int rootfs_openat(int rootfd, const char *path);
