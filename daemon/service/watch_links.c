/* Per-process memprofd:watch links (watch_links.h). Invariants: a process has at most one
 * link, held with a pidfd so that a reused PID is never taken for it; n <= cap <=
 * WLINKS_MAX. A link filtered on one process makes the kernel install the probe, and
 * count its semaphore, in that process's mm only: other processes mapping the same
 * sampler file keep the semaphore at 0 and arm nothing. Lookups are linear (n is small:
 * the selected processes alive at once). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/array.h"
#include "base/clock.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/usdt_multi.h"
#include "daemon/service/watch_links.h"

struct wlink {
	pid_t pid;
	int pidfd;
	struct usdt_link link;
};

int wlinks_init(struct wlinks *w, struct sampled *smp)
{
	memset(w, 0, sizeof(*w));
	w->smp = smp;
	w->cap = WLINKS_MAX;
	return 0;
}

static void drop(struct wlinks *w, size_t i)
{
	usdt_link_destroy(&w->v[i].link);
	close(w->v[i].pidfd);
	w->v[i] = w->v[--w->n];
	w->ended++;
}

void wlinks_free(struct wlinks *w)
{
	while (w->n)
		drop(w, w->n - 1);
	free(w->v);
	memset(w, 0, sizeof(*w));
}

static bool ended(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;   /* a pidfd is readable once its process exited */
}

int wlinks_add(struct wlinks *w, pid_t pid, int sampler_fd)
{
	char path[64];

	if (!w->smp || sampler_fd < 0)
		return 0;
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i].pid == pid) {
			if (!ended(w->v[i].pidfd))
				return 0;
			drop(w, i);   /* a reused PID: the old process's link goes */
			break;
		}
	if (w->n >= w->cap) {
		w->capped++;
		return 0;
	}
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -errno;
	struct wlink l = { .pid = pid, .pidfd = pidfd };
	uint64_t t0 = mono_ns();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sampler_fd);
	int err = sampled_attach_watch_pid(w->smp, path, (int)pid, &l.link);
	w->attach_ns += mono_ns() - t0;
	/* Exited meanwhile: the link would never see its exit record. */
	if (!err && ended(pidfd))
		err = -ESRCH;
	if (err || ARRAY_GROW(w->v, w->alloc, w->n, 16) < 0) {
		usdt_link_destroy(&l.link);
		close(pidfd);
		w->failed += err != -ESRCH;
		return err ? err : -ENOMEM;
	}
	w->v[w->n++] = l;
	w->attached++;
	return 0;
}

void wlinks_remove(struct wlinks *w, pid_t pid)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i].pid == pid) {
			drop(w, i);
			return;
		}
}

void wlinks_prune(struct wlinks *w)
{
	for (size_t i = w->n; i-- > 0;)
		if (ended(w->v[i].pidfd))
			drop(w, i);
}

void wlinks_set_cap(struct wlinks *w, size_t cap)
{
	w->cap = cap < WLINKS_MAX ? cap : WLINKS_MAX;
	while (w->n > w->cap)
		drop(w, w->n - 1);
}
