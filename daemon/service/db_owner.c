/* One daemon per database by file identity: the lock is an flock on the database file
 * itself (opened through any symlink, so every path of one file, hard links included,
 * meets the same lock), and the holder's pid sits in RESOLVED.lock next to the resolved
 * path for the refusal message. flock and SQLite's fcntl locks do not interact on Linux
 * local filesystems. The check writes nothing it keeps: a transaction rolled back, and a
 * file or directory it had to create is removed. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/log.h"
#include "daemon/service/db_owner.h"
#include "store/store.h"

/* The path db resolves to (symlinks, `..`), also when the file does not exist yet. */
static int resolve(const char *db, char *out, size_t n)
{
	char dir[PATH_MAX], base[PATH_MAX], rdir[PATH_MAX];

	if (realpath(db, out))
		return 0;
	if (errno != ENOENT || strlen(db) >= sizeof(dir))
		return -errno;
	strcpy(dir, db);
	strcpy(base, db);
	if (!realpath(dirname(dir), rdir))
		return -errno;
	return snprintf(out, n, "%s/%s", rdir, basename(base)) < (int)n ? 0 : -ENAMETOOLONG;
}

/* The directories above db that do not exist yet are made (mode 0750, as the unit's
 * StateDirectory would): a daemon started by hand with the packaged config, before any
 * service start or tmpfiles run made /var/lib/memprofd, has nowhere to put its store.
 * m gets the lengths of db's prefixes this call created, outermost first (for --check
 * to remove; a directory someone else made meanwhile is not ours); 0 or -errno. */
#define DB_PARENTS_MAX 8
struct made_dirs {
	size_t len[DB_PARENTS_MAX];
	unsigned n;
};

static int make_parents(const char *db, struct made_dirs *m)
{
	char dir[PATH_MAX];
	size_t miss[DB_PARENTS_MAX];
	unsigned nmiss = 0;
	struct stat st;

	m->n = 0;
	if (strlen(db) >= sizeof(dir))
		return -ENAMETOOLONG;
	strcpy(dir, db);
	/* Walk up to the first directory that exists, noting the missing ones. */
	for (char *slash = strrchr(dir, '/'); slash && slash != dir; slash = strrchr(dir, '/')) {
		*slash = '\0';
		if (stat(dir, &st) == 0)
			break;
		if (errno != ENOENT)
			return -errno;
		if (nmiss == DB_PARENTS_MAX)
			return -ENAMETOOLONG;
		miss[nmiss++] = (size_t)(slash - dir);
	}
	while (nmiss) {
		size_t len = miss[--nmiss];

		memcpy(dir, db, len);
		dir[len] = '\0';
		if (mkdir(dir, 0750) == 0)
			m->len[m->n++] = len;
		else if (errno != EEXIST)
			return -errno;
	}
	return 0;
}

static void remove_made(const char *db, const struct made_dirs *m)
{
	char dir[PATH_MAX];

	for (unsigned i = m->n; i-- > 0;) {
		memcpy(dir, db, m->len[i]);
		dir[m->len[i]] = '\0';
		rmdir(dir);
	}
}

int db_owner_lock(struct db_owner *o, const char *db)
{
	char path[PATH_MAX], lock[PATH_MAX + 8], pid[32] = "";
	struct made_dirs made;
	int err;

	o->db_fd = o->pid_fd = -1;
	if ((err = make_parents(db, &made)) < 0)
		return log_error_errno(1, "daemon: %s: making its directory: %s", db, strerror(-err));
	if ((err = resolve(db, path, sizeof(path))) < 0)
		return log_error_errno(1, "daemon: %s: %s", db, strerror(-err));
	snprintf(lock, sizeof(lock), "%s" DB_OWNER_LOCK_SUFFIX, path);
	o->db_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (o->db_fd < 0)
		return log_error_errno(1, "daemon: %s: %s", db, strerror(errno));
	if (flock(o->db_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno, fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = fd >= 0 ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;

		if (fd >= 0)
			close(fd);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		db_owner_release(o);
		if (e == EWOULDBLOCK)
			return log_error_errno(1, "daemon: %s: another memprofd daemon (pid %s) writes "
					       "this database (%s); one daemon per database (lock %s)",
					       db, *pid ? pid : "?", path, lock);
		return log_error_errno(1, "daemon: %s: locking: %s", path, strerror(e));
	}
	o->pid_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (o->pid_fd >= 0 && ftruncate(o->pid_fd, 0) == 0)
		dprintf(o->pid_fd, "%d\n", (int)getpid());
	return 0;
}

void db_owner_release(struct db_owner *o)
{
	if (o->db_fd >= 0)
		close(o->db_fd);
	if (o->pid_fd >= 0)
		close(o->pid_fd);
	o->db_fd = o->pid_fd = -1;
}

static void remove_created(const char *db)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[PATH_MAX + 16];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", db, sfx[i]);
		unlink(p);
	}
}

int db_owner_check(const char *db)
{
	struct store *s = NULL;
	char err[256] = "";
	struct stat st;
	bool existed = stat(db, &st) == 0;
	struct made_dirs made = { .n = 0 };
	int64_t run;
	int r = make_parents(db, &made);

	if (r < 0)
		snprintf(err, sizeof(err), "making its directory: %s", strerror(-r));
	else
		r = store_open(&s, db, STORE_RDWR, err, sizeof(err));

	if (r == 0 && (r = store_begin(s)) == 0) {
		struct store_run probe = { .command = "daemon --check" };
		r = store_run_begin(s, &probe, &run);
	}
	if (r < 0 && s)
		snprintf(err, sizeof(err), "%s", store_errmsg(s));
	if (s) {
		store_rollback(s);
		store_close(s);
	}
	if (!existed)
		remove_created(db);
	remove_made(db, &made);    /* the service (StateDirectory=) or the daemon makes them */
	if (r < 0)
		return log_error_errno(1, "daemon --check: %s: not writable: %s", db,
				       *err ? err : strerror(-r));
	return 0;
}
