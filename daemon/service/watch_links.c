/* Per-process memprofd:watch links (watch_links.h). Invariants: a process has at most one
 * entry, held with a pidfd so that a reused PID is never taken for it; entries in use <=
 * cap <= WLINKS_MAX. A link filtered on one process makes the kernel install the probe,
 * and count its semaphore, in that process's mm only (checked by the test
 * daemon_watch_links: another process mapping the same sampler file arms nothing).
 * Threads: the event loop adds and removes entries; the worker alone makes and closes
 * links, outside the lock. An entry's state says whose it is:
 *   FREE -> WANT (loop: queued) -> BUSY (worker: making it) -> LINKED
 *   WANT -> FREE (loop: removed; worker: process ended first, or the link refused)
 *   BUSY -> GONE (loop: removed meanwhile; the worker closes what it made) -> FREE
 *   LINKED -> CLOSING (loop: removed) -> FREE (worker: closed)
 * Lookups are linear over WLINKS_MAX entries, once per exec or exit of a selected
 * process: cheap next to the link itself. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/log.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/uprobe_multi.h"
#include "daemon/alloc/usdt_multi.h"
#include "daemon/service/watch_links.h"

enum { W_FREE, W_WANT, W_BUSY, W_LINKED, W_GONE, W_CLOSING };

struct wlink {
	int state;
	pid_t pid;
	int pidfd;                 /* closed by whichever side frees the entry or drops it */
	int file;                  /* index in files */
	int link_fd;               /* LINKED, CLOSING */
};

struct wlink_file {
	dev_t dev;
	ino_t ino;
	int fd;                    /* the caller's, open while wlinks lives */
	int prog_fd;
	struct usdt_sites sites;   /* -ENOENT etc. in err when it has none */
	int err;
};

static bool ended(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;   /* a pidfd is readable once its process exited */
}

/* Makes one link for entry e (BUSY), outside the lock; lock held on entry and return. */
static void work_link(struct wlinks *w, struct wlink *e)
{
	const struct wlink_file *f = &w->files[e->file];
	char path[64];
	pid_t pid = e->pid;

	pthread_mutex_unlock(&w->mu);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
	uint64_t t0 = mono_ns();
	int fd = uprobe_multi_link_pid(f->prog_fd, path, f->sites.off, f->sites.ref, f->sites.cookie,
				       f->sites.n, false, (int)pid);
	uint64_t t1 = mono_ns();

	pthread_mutex_lock(&w->mu);
	w->st.attach_ns += t1 - t0;
	if (e->state == W_GONE) {                 /* removed meanwhile */
		e->state = W_FREE;
		if (fd >= 0) {
			pthread_mutex_unlock(&w->mu);
			close(fd);
			pthread_mutex_lock(&w->mu);
		}
	} else if (fd < 0) {
		close(e->pidfd);
		e->state = W_FREE;
		w->st.n--;
		if (fd == -ESRCH)
			w->st.ended_first++;
		else
			w->st.failed++;
	} else {
		e->link_fd = fd;
		e->state = W_LINKED;
		w->st.attached++;
	}
}

static void *worker(void *arg)
{
	struct wlinks *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		struct wlink *e = NULL;

		for (size_t i = 0; i < WLINKS_MAX && !e; i++)
			if (w->v[i].state == W_WANT || w->v[i].state == W_CLOSING)
				e = &w->v[i];
		if (!e) {
			pthread_cond_wait(&w->cv, &w->mu);
			continue;
		}
		if (e->state == W_CLOSING) {
			int fd = e->link_fd;

			e->state = W_FREE;
			pthread_mutex_unlock(&w->mu);
			close(fd);                       /* waits for the kernel */
			pthread_mutex_lock(&w->mu);
		} else if (ended(e->pidfd)) {            /* a blip: gone before its turn */
			close(e->pidfd);
			e->state = W_FREE;
			w->st.n--;
			w->st.ended_first++;
		} else {
			e->state = W_BUSY;
			work_link(w, e);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int wlinks_init(struct wlinks *w, struct sampled *smp)
{
	int err;

	memset(w, 0, sizeof(*w));
	w->cap = WLINKS_MAX;
	if (!smp)
		return 0;
	w->v = calloc(WLINKS_MAX, sizeof(*w->v));
	w->files = calloc(WLINKS_FILES_MAX, sizeof(*w->files));
	if (!w->v || !w->files) {
		free(w->v);
		free(w->files);
		w->v = NULL;
		w->files = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if ((err = pthread_create(&w->worker, NULL, worker, w))) {
		wlinks_free(w);
		return log_error_errno(-err, "daemon: in-process watch links: thread: %s", strerror(err));
	}
	w->started = true;
	w->smp = smp;
	return 0;
}

void wlinks_free(struct wlinks *w)
{
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->worker, NULL);
	}
	for (size_t i = 0; w->v && i < WLINKS_MAX; i++) {
		struct wlink *e = &w->v[i];

		if (e->state == W_LINKED || e->state == W_CLOSING)
			close(e->link_fd);
		if (e->state == W_LINKED || e->state == W_WANT)
			close(e->pidfd);
	}
	if (w->v) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
	}
	free(w->v);
	free(w->files);
	memset(w, 0, sizeof(*w));
}

/* The resolved watch sites of the sampler file open at fd: its index, or -errno. */
static int file_of(struct wlinks *w, int fd)
{
	struct stat st;
	char path[64];

	if (fstat(fd, &st) < 0)
		return -errno;
	for (size_t i = 0; i < w->nfiles; i++)
		if (w->files[i].dev == st.st_dev && w->files[i].ino == st.st_ino)
			return w->files[i].err ? w->files[i].err : (int)i;
	if (w->nfiles == WLINKS_FILES_MAX)
		return -ENOSPC;
	struct wlink_file *f = &w->files[w->nfiles];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	*f = (struct wlink_file){ .dev = st.st_dev, .ino = st.st_ino, .fd = fd };
	f->err = sampled_watch_sites(w->smp, path, &f->sites, &f->prog_fd);
	w->nfiles++;
	return f->err ? f->err : (int)(w->nfiles - 1);
}

/* The entry of pid the loop still holds (WANT, BUSY, LINKED), or NULL. Lock held. */
static struct wlink *find(struct wlinks *w, pid_t pid)
{
	for (size_t i = 0; i < WLINKS_MAX; i++) {
		struct wlink *e = &w->v[i];

		if (e->pid == pid && (e->state == W_WANT || e->state == W_BUSY || e->state == W_LINKED))
			return e;
	}
	return NULL;
}

/* Takes e out of the loop's hands (lock held); the worker finishes what it holds. */
static void drop(struct wlinks *w, struct wlink *e)
{
	close(e->pidfd);
	e->state = e->state == W_LINKED ? W_CLOSING : e->state == W_BUSY ? W_GONE : W_FREE;
	w->st.n--;
	pthread_cond_signal(&w->cv);
}

/* Queues pid's link on files[file]. Lock held on entry and return. */
static int add_locked(struct wlinks *w, pid_t pid, int file)
{
	struct wlink *e = find(w, pid);

	if (e && !ended(e->pidfd))
		return 0;
	if (e)
		drop(w, e);   /* a reused PID: the old process's link goes */
	e = NULL;
	for (size_t i = 0; i < WLINKS_MAX && !e; i++)
		if (w->v[i].state == W_FREE)
			e = &w->v[i];
	if (w->st.n >= w->cap || !e) {
		w->st.capped++;
		return 0;
	}
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -errno;
	*e = (struct wlink){ .state = W_WANT, .pid = pid, .pidfd = pidfd, .file = file, .link_fd = -1 };
	w->st.n++;
	w->st.queued++;
	pthread_cond_signal(&w->cv);
	return 0;
}

int wlinks_add(struct wlinks *w, pid_t pid, int sampler_fd)
{
	if (!w->smp || sampler_fd < 0)
		return 0;
	int file = file_of(w, sampler_fd);

	if (file < 0)
		return file;
	pthread_mutex_lock(&w->mu);
	int err = add_locked(w, pid, file);
	pthread_mutex_unlock(&w->mu);
	return err;
}

int wlinks_add_child(struct wlinks *w, pid_t child, pid_t parent)
{
	if (!w->smp)
		return 0;
	pthread_mutex_lock(&w->mu);
	const struct wlink *p = find(w, parent);
	int err = p ? add_locked(w, child, p->file) : 0;
	pthread_mutex_unlock(&w->mu);
	return err;
}

void wlinks_remove(struct wlinks *w, pid_t pid)
{
	if (!w->smp)
		return;
	pthread_mutex_lock(&w->mu);
	struct wlink *e = find(w, pid);
	if (e)
		drop(w, e);
	pthread_mutex_unlock(&w->mu);
}

void wlinks_prune(struct wlinks *w)
{
	if (!w->smp)
		return;
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < WLINKS_MAX; i++) {
		struct wlink *e = &w->v[i];

		if ((e->state == W_WANT || e->state == W_LINKED) && ended(e->pidfd))
			drop(w, e);
	}
	pthread_mutex_unlock(&w->mu);
}

void wlinks_set_cap(struct wlinks *w, size_t cap)
{
	if (!w->smp)
		return;
	pthread_mutex_lock(&w->mu);
	w->cap = cap < WLINKS_MAX ? cap : WLINKS_MAX;
	for (size_t i = WLINKS_MAX; i-- > 0 && w->st.n > w->cap;) {
		struct wlink *e = &w->v[i];

		if (e->state == W_WANT || e->state == W_BUSY || e->state == W_LINKED)
			drop(w, e);
	}
	pthread_mutex_unlock(&w->mu);
}

void wlinks_get_stats(struct wlinks *w, struct wlinks_stats *out)
{
	if (!w->smp) {
		*out = (struct wlinks_stats){ 0 };
		return;
	}
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	pthread_mutex_unlock(&w->mu);
}
