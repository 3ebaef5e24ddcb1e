/* Private copies of the allocator libraries for `record --alloc exact -- CMD` (see
 * private_libs.h). The copy is made with copy_file_range (a reflink or an in-kernel copy
 * on most filesystems: ~2 MiB each, a few ms) into a mkdtemp directory under $TMPDIR or
 * /tmp, mode 0700: no other user can swap a file in before the command maps it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "daemon/record/private_libs.h"

extern char **environ;

static const char *const libs[PRIVATE_LIBS_MAX] = { "libc.so.6", "libstdc++.so.6" };

static int copy_file(const char *from, const char *to)
{
	struct stat st;
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, r = 0;

	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || (out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0500)) < 0) {
		r = -errno;
		close(in);
		return r;
	}
	for (off_t left = st.st_size; left > 0;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		left -= n;
	}
	close(in);
	if (close(out) < 0 && !r)
		r = -errno;
	return r;
}

int private_libs_make(struct private_libs *pl, int (*find)(const char *name, char *out, size_t n))
{
	const char *tmp = getenv("TMPDIR");
	int r;

	memset(pl, 0, sizeof(*pl));
	snprintf(pl->dir, sizeof(pl->dir), "%s/memprofd-libs.XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
	if (!mkdtemp(pl->dir)) {
		r = -errno;
		pl->dir[0] = '\0';
		return r;
	}
	for (size_t i = 0; i < PRIVATE_LIBS_MAX; i++) {
		char *orig = pl->orig[pl->n], *copy = pl->copy[pl->n];
		if (find(libs[i], orig, PATH_MAX) < 0)
			continue;
		char path[PATH_MAX + 32];
		if (snprintf(path, sizeof(path), "%s/%s", pl->dir, libs[i]) >= PATH_MAX) {
			private_libs_remove(pl);
			return -ENAMETOOLONG;
		}
		memcpy(copy, path, strlen(path) + 1);
		if ((r = copy_file(orig, copy)) < 0) {
			private_libs_remove(pl);
			return r;
		}
		pl->n++;
	}
	return 0;
}

int private_libs_env(struct private_libs *pl, char ***envp)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t n = 0, k = 0;
	char **env;

	*envp = NULL;
	while (environ[n])
		n++;
	if (!(env = calloc(n + 2, sizeof(*env))))
		return -ENOMEM;
	size_t len = strlen("LD_LIBRARY_PATH=") + strlen(pl->dir) + (old && *old ? strlen(old) + 1 : 0) + 1;
	if (!(pl->env_value = malloc(len))) {
		free(env);
		return -ENOMEM;
	}
	snprintf(pl->env_value, len, "LD_LIBRARY_PATH=%s%s%s", pl->dir, old && *old ? ":" : "",
		 old && *old ? old : "");
	env[k++] = pl->env_value;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_LIBRARY_PATH=", 16))
			env[k++] = environ[i];
	*envp = env;
	return 0;
}

void private_libs_free_env(char **envp)
{
	free(envp);
}

void private_libs_remove(struct private_libs *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		unlink(pl->copy[i]);
	if (pl->dir[0])
		rmdir(pl->dir);
	free(pl->env_value);
	pl->env_value = NULL;
	pl->dir[0] = '\0';
	pl->n = 0;
}
