/* record's per-target memprofd:watch links (watch_targets.h). Invariant: every link is
 * filtered on one process (the command, or a process it forked while recorded); the
 * sampler file is held open by fd for the whole run, so each link names the file the
 * command was given, not whatever its path names later. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "bpf/alloc.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/record/recorder.h"
#include "daemon/record/watch_targets.h"

static void on_lifecycle(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	struct rec_wtargets *w = arg;

	if (type == EV_FORK && rwt_add(w, (pid_t)tgid) == 0)
		w->forks++;
	else if (type == EV_EXIT && !w->classic)
		wlinks_remove(&w->wl, (pid_t)tgid);
	if (w->next)
		w->next(w->next_arg, type, tgid, start_ns);
}

int rwt_open(struct rec_wtargets *w, struct recorder *r, struct sampled *smp,
	     const char *sampler_path)
{
	int err;

	*w = (struct rec_wtargets){ .fd = -1 };
	if (!smp || !r->watch || !r->watch_inprocess)
		return 0;
	w->fd = open(sampler_path, O_RDONLY | O_CLOEXEC);
	if (w->fd < 0)
		return log_error_errno(-errno, "record: %s: %s", sampler_path, strerror(errno));
	if ((err = wlinks_init(&w->wl, smp)) < 0) {
		close(w->fd);
		w->fd = -1;
		return err;
	}
	w->smp = smp;
	w->next = r->lifecycle;
	w->next_arg = r->lifecycle_arg;
	r->lifecycle = on_lifecycle;
	r->lifecycle_arg = w;
	return 0;
}

int rwt_add(struct rec_wtargets *w, pid_t pid)
{
	char path[64];
	int err;

	if (!w->smp)
		return 0;
	if (!w->classic) {
		err = wlinks_add(&w->wl, pid, w->fd);
		if (err != -EOPNOTSUPP)
			return err;
		w->classic = true;   /* the kernel has no multi-uprobe links */
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", w->fd);
	err = sampled_attach_watch_pid(w->smp, path, (int)pid);
	return err < 0 ? err : 0;
}

void rwt_close(struct rec_wtargets *w)
{
	if (w->smp)
		wlinks_free(&w->wl);
	if (w->fd >= 0)
		close(w->fd);
	*w = (struct rec_wtargets){ .fd = -1 };
}
