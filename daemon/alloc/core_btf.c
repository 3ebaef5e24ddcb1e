/* The minimized-BTF cache (core_btf.h). Making one: fork; the child forks the maker and
 * exits (reaped here at once, so no zombie and no wait); the maker closes every inherited
 * descriptor (BPF objects and links included: they must not outlive record), writes the
 * object to a temporary file, runs bpftool at nice 19 and renames its output into place. */
#include "daemon/alloc/core_btf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "base/hash.h"

#define CORE_BTF_NICE 19
static const char *const bpftool_paths[] = { "/usr/sbin/bpftool", "/usr/bin/bpftool",
					     "/sbin/bpftool" };

static int cache_dir(char *out, size_t outsz)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;

	if (x && *x == '/')
		n = snprintf(out, outsz, "%s/" CORE_BTF_SUBDIR, x);
	else if (home && *home == '/')
		n = snprintf(out, outsz, "%s/.cache/" CORE_BTF_SUBDIR, home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

void core_btf_find(struct core_btf *b, const char *name, const void *obj, size_t size)
{
	struct utsname u;
	struct stat st;
	uint64_t key;
	int n;

	*b = (struct core_btf){ 0 };
	if (getenv(CORE_BTF_OFF_ENV) || !obj || cache_dir(b->dir, sizeof(b->dir)) < 0 ||
	    uname(&u) < 0 || stat(CORE_BTF_VMLINUX, &st) < 0)
		return;
	key = fnv1a(u.release, strlen(u.release));
	key = fnv1a_from(key, u.version, strlen(u.version));
	key = fnv1a_from(key, u.machine, strlen(u.machine));
	key = fnv1a_from(key, &st.st_size, sizeof(st.st_size));
	key ^= (uint64_t)crc32(0, obj, (uInt)size) << 32 ^ (uint64_t)size;
	n = snprintf(b->path, sizeof(b->path), "%s/%s-%016llx.btf", b->dir, name,
		     (unsigned long long)key);
	if (n < 0 || (size_t)n >= sizeof(b->path))
		return;
	b->can_make = true;
	if (lstat(b->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_size > 0 && st.st_size <= CORE_BTF_MAX)
		b->have = true;
}

/* dir and its parents, the last one ours and not a symlink. */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? 0 : -EPERM;
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

/* The maker's work, in the detached process: 0 on success. */
static int make(const struct core_btf *b, const void *obj, size_t size, const char *tool)
{
	char in[PATH_MAX + 16], out[PATH_MAX + 16];
	int fd, status;
	pid_t pid;

	if (make_dirs(b->dir) < 0)
		return 1;
	snprintf(in, sizeof(in), "%s.o.XXXXXX", b->path);
	snprintf(out, sizeof(out), "%s.XXXXXX", b->path);
	if ((fd = mkostemp(in, O_CLOEXEC)) < 0)
		return 1;
	bool ok = write_all(fd, obj, size);
	close(fd);
	if (ok && (fd = mkostemp(out, O_CLOEXEC)) >= 0) {
		close(fd);
		if ((pid = fork()) == 0) {
			execl(tool, tool, "gen", "min_core_btf", CORE_BTF_VMLINUX, out, in, (char *)NULL);
			_exit(127);
		}
		ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		     !WEXITSTATUS(status) && rename(out, b->path) == 0;
		if (!ok)
			unlink(out);
	}
	unlink(in);
	return ok ? 0 : 1;
}

void core_btf_make_later(const struct core_btf *b, const void *obj, size_t size)
{
	const char *tool = NULL;
	pid_t pid;

	if (!b->can_make || b->have)
		return;
	for (size_t i = 0; !tool && i < sizeof(bpftool_paths) / sizeof(bpftool_paths[0]); i++)
		if (access(bpftool_paths[i], X_OK) == 0)
			tool = bpftool_paths[i];
	if (!tool || (pid = fork()) < 0)
		return;
	if (pid == 0) {
		if (fork() != 0)
			_exit(0);   /* the maker is reparented: nobody waits for it */
		/* Not record's stdin/stdout/stderr: a reader of record's output (a pipe) would
		 * wait for the maker's end to see EOF. */
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		close_range(3, ~0U, 0);
		setpriority(PRIO_PROCESS, 0, CORE_BTF_NICE);
		_exit(make(b, obj, size, tool));
	}
	waitpid(pid, NULL, 0);
}

int core_btf_load(const struct core_btf_skel *k, bool *used, enum core_btf_stage *stage)
{
	struct core_btf cb;
	int err;

	core_btf_find(&cb, k->name, k->obj, k->objsz);
	core_btf_make_later(&cb, k->obj, k->objsz);
	for (;;) {
		LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = cb.have ? cb.path : NULL);
		*stage = CORE_BTF_OPEN;
		if ((err = k->open(k->arg, &oo)) < 0 && cb.have) {
			cb.have = false;
			continue;
		}
		if (err < 0)
			return err;
		*stage = CORE_BTF_CONFIGURE;
		if ((err = k->configure(k->arg)) < 0)
			return err;
		*stage = CORE_BTF_LOAD;
		err = k->load(k->arg);
		if (!err || !cb.have)
			break;
		k->destroy(k->arg);
		cb.have = false;
		core_btf_make_later(&cb, k->obj, k->objsz);
	}
	if (err < 0)
		return err;
	*used = cb.have;
	return 0;
}

