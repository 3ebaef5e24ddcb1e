/* LD_PRELOAD fault injector for the store's write points: write, pwrite, pwritev, fsync,
 * fdatasync and ftruncate on files whose path contains MEMPROFD_FAULT_PATH are counted, and
 * the MEMPROFD_FAULT_NTH-th of them (1-based) fails with MEMPROFD_FAULT_ERRNO (ENOSPC or
 * EIO) instead of running; every other call passes through. With MEMPROFD_FAULT_COUNT set
 * to a file, each process appends its number of counted calls there at exit, so a test can visit
 * every write point of a clean run. With MEMPROFD_FAULT_WHILE naming a file instead of
 * MEMPROFD_FAULT_NTH, every such call fails while that file exists: a disk that is full or
 * failing for a while and then comes back (the daemon's flush retries). Only for tests: it
 * costs a readlink (and with _WHILE an access) per write. */
/* Both the 32- and 64-bit-offset entry points are defined here, so the headers must not
 * alias one to the other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_long calls;
static long nth = -1;
static int fail_errno = ENOSPC;
static const char *want_path;
static const char *while_path;

__attribute__((constructor)) static void fault_init(void)
{
	const char *e;

	want_path = getenv("MEMPROFD_FAULT_PATH");
	while_path = getenv("MEMPROFD_FAULT_WHILE");
	if ((e = getenv("MEMPROFD_FAULT_NTH")))
		nth = atol(e);
	if ((e = getenv("MEMPROFD_FAULT_ERRNO")))
		fail_errno = !strcmp(e, "EIO") ? EIO : ENOSPC;
}

/* Appends this process's count (children inherit the preload; the test sums the lines).
 * No stdio: an allocation here would show up in a recorded workload's profile. */
__attribute__((destructor)) static void fault_report(void)
{
	const char *out = getenv("MEMPROFD_FAULT_COUNT");
	long n = (long)atomic_load(&calls);
	int fd;

	if (!out || !n || (fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
		return;
	dprintf(fd, "%ld\n", n);
	close(fd);
}

/* 1: this call is the one to fail (errno set). */
static int hit(int fd)
{
	char link[64], path[4096];
	ssize_t n;

	if (!want_path || fd < 0)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	if (!strstr(path, want_path))
		return 0;
	if (atomic_fetch_add(&calls, 1) + 1 != nth &&
	    !(while_path && access(while_path, F_OK) == 0))
		return 0;
	errno = fail_errno;
	return 1;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *b, size_t n)
{
	return hit(fd) ? -1 : REAL(write)(fd, b, n);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	return hit(fd) ? -1 : REAL(pwrite)(fd, b, n, off);
}

ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off)
{
	return hit(fd) ? -1 : REAL(pwrite64)(fd, b, n, off);
}

ssize_t pwritev(int fd, const struct iovec *v, int cnt, off_t off)
{
	return hit(fd) ? -1 : REAL(pwritev)(fd, v, cnt, off);
}

int fsync(int fd)
{
	return hit(fd) ? -1 : REAL(fsync)(fd);
}

int fdatasync(int fd)
{
	return hit(fd) ? -1 : REAL(fdatasync)(fd);
}

int ftruncate(int fd, off_t len)
{
	return hit(fd) ? -1 : REAL(ftruncate)(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	return hit(fd) ? -1 : REAL(ftruncate64)(fd, len);
}
