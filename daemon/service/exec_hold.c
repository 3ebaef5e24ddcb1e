/* The hold thread (exec_hold.h). Invariant: a process it reads from the holds ring is
 * continued once its links exist (or could not be made); it touches only the hold ring,
 * the held map and target_links (locked), never the recorder's state. Cost per hold: one
 * pid-filtered link per program and file (entry, return, free), each registration a walk
 * over the processes that map the file, sometimes an RCU grace period. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "alloc.skel.h"
#include "base/log.h"
#include "daemon/record/recorder.h"
#include "daemon/service/exec_hold.h"
#include "daemon/service/target_links.h"

int exec_hold_add_file(struct exec_hold *h, const struct hold_key *kkey, uint64_t key, int fd,
		       const struct exact_sites *sites)
{
	if (h->nfiles == EXEC_HOLD_FILES_MAX)
		return -E2BIG;
	struct exec_hold_file *f = &h->files[h->nfiles++];
	memset(f, 0, sizeof(*f));
	if (kkey)
		f->kkey = *kkey;
	f->key = key;
	snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", fd);
	f->sites = sites;
	return 0;
}

void exec_hold_release(int held_fd, uint32_t pid, uint64_t start_ns)
{
	struct hold_val v;

	if (bpf_map_lookup_elem(held_fd, &pid, &v) || (start_ns && v.start_ns != start_ns))
		return;   /* released already, or a successor of the PID */
	bpf_map_delete_elem(held_fd, &pid);
	kill((pid_t)pid, SIGCONT);   /* ESRCH: gone (killed while held) */
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int on_hold(void *ctx, void *data, size_t len)
{
	struct exec_hold *h = ctx;
	const struct ev_hold *e = data;
	static const struct hold_key every;

	if (len < sizeof(*e))
		return 0;
	struct hold_val v;
	if (bpf_map_lookup_elem(h->held_fd, &e->pid, &v) || v.start_ns != e->start_ns) {
		h->stale++;   /* continued by the watchdog already (counted late): consider()
		               * links it as it would a process found at its exec record */
		return 0;
	}
	uint64_t t0 = mono_ns();
	for (size_t i = 0; i < h->nfiles; i++) {
		const struct exec_hold_file *f = &h->files[i];
		if (!f->sites || (memcmp(&f->kkey, &every, sizeof(every)) &&
				  memcmp(&f->kkey, &e->file, sizeof(e->file))))
			continue;
		int err = target_links_add(h->tl, e->pid, e->start_ns, e->held_ns, f->key, f->path, f->sites);
		if (err && err != -ESRCH && err != -ENOENT && err != -EBUSY)
			log_warn("daemon: probing held pid %u in %s: %s", e->pid, f->path, strerror(-err));
	}
	h->link_ns_sum += mono_ns() - t0;
	exec_hold_release(h->held_fd, e->pid, e->start_ns);
	uint64_t d = mono_ns() - e->held_ns;
	h->holds++;
	h->hold_ns_sum += d;
	if (d > h->hold_ns_max)
		h->hold_ns_max = d;
	return 0;
}

int exec_hold_request(struct exec_hold *h, uint32_t pid, uint64_t start_ns, uint64_t key, int fd,
		      const struct exact_sites *sites)
{
	pthread_mutex_lock(&h->mu);
	bool room = h->nreqs < EXEC_HOLD_REQS;
	if (room)
		h->reqs[(h->reqs_head + h->nreqs++) % EXEC_HOLD_REQS] = (struct exec_hold_req){
			.pid = pid, .start_ns = start_ns, .key = key, .fd = fd, .sites = sites };
	pthread_mutex_unlock(&h->mu);
	if (!room) {
		target_links_deny(h->tl, pid, start_ns);
		return -EBUSY;
	}
	eventfd_write(h->wake_fd, 1);
	return 0;
}

/* One queued request, if any: false when none waits. */
static bool next_request(struct exec_hold *h)
{
	struct exec_hold_req q;
	char path[32];

	pthread_mutex_lock(&h->mu);
	bool any = h->nreqs > 0;
	if (any) {
		q = h->reqs[h->reqs_head];
		h->reqs_head = (h->reqs_head + 1) % EXEC_HOLD_REQS;
		h->nreqs--;
	}
	pthread_mutex_unlock(&h->mu);
	if (!any)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", q.fd);
	int err = target_links_add(h->tl, q.pid, q.start_ns, 0, q.key, path, q.sites);
	if (err && err != -ESRCH && err != -ENOENT && err != -EBUSY)
		log_warn("daemon: probing pid %u in %s: %s", q.pid, path, strerror(-err));
	return true;
}

/* Holds first (a process waits stopped), then one request at a time. */
static void *hold_main(void *arg)
{
	struct exec_hold *h = arg;
	struct pollfd p[3] = {
		{ .fd = ring_buffer__epoll_fd(h->rb), .events = POLLIN },
		{ .fd = h->stop_fd, .events = POLLIN },
		{ .fd = h->wake_fd, .events = POLLIN },
	};
	eventfd_t v;

	for (;;) {
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[2].revents)
			eventfd_read(h->wake_fd, &v);
		do
			ring_buffer__consume(h->rb);
		while (next_request(h));
	}
	return NULL;
}

int exec_hold_start(struct exec_hold *h, struct recorder *r, struct target_links *tl)
{
	int err;

	h->r = r;
	h->tl = tl;
	h->held_fd = bpf_map__fd(r->skel->maps.held);
	h->late_fd = bpf_map__fd(r->skel->maps.hold_late);
	h->alive_fd = -1;
	pid_t wd = exec_hold_watchdog(h->held_fd, bpf_map__fd(r->skel->maps.hold_files),
				      h->late_fd, &h->alive_fd);
	if (wd < 0)
		return log_error_errno((int)wd, "daemon: starting the hold watchdog: %s", strerror((int)-wd));
	h->watchdog = wd;
	h->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.holds), on_hold, h, NULL);
	if (!h->rb)
		return log_error_errno(-errno, "daemon: hold ring: %s", strerror(errno));
	if ((h->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0 ||
	    (h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return log_error_errno(-errno, "daemon: hold thread: %s", strerror(errno));
	pthread_mutex_init(&h->mu, NULL);
	h->mu_up = true;
	if ((err = pthread_create(&h->th, NULL, hold_main, h)))
		return log_error_errno(-err, "daemon: hold thread: %s", strerror(err));
	h->up = true;
	return 0;
}

void exec_hold_count_late(struct exec_hold *h, struct recorder *r)
{
	uint64_t late;

	if (!h->rb || bpf_map_lookup_elem(h->late_fd, &(uint32_t){ 0 }, &late) || late <= h->late_seen)
		return;
	r->missed_late += late - h->late_seen;
	h->late_seen = late;
}

void exec_hold_stop(struct exec_hold *h)
{
	if (!h->r)
		return;   /* never started */
	if (h->up) {
		eventfd_write(h->stop_fd, 1);
		pthread_join(h->th, NULL);
		h->up = false;
		if (h->holds && getenv("MEMPROFD_HOLD_STATS"))   /* bench and tests */
			fprintf(stderr, "memprofd: daemon: %llu execs held, %.2f ms on average (linking "
				"%.2f ms), %.2f ms at most; %llu continued late\n",
				(unsigned long long)h->holds, h->hold_ns_sum / 1e6 / (double)h->holds,
				h->link_ns_sum / 1e6 / (double)h->holds, h->hold_ns_max / 1e6,
				(unsigned long long)h->stale);
	}
	if (h->stop_fd > 0)
		close(h->stop_fd);
	if (h->wake_fd > 0)
		close(h->wake_fd);
	if (h->mu_up)
		pthread_mutex_destroy(&h->mu);
	h->mu_up = false;
	ring_buffer__free(h->rb);
	h->rb = NULL;
	/* No new hold, and what is held continued now; the watchdog does the same once it
	 * reads EOF (for holds in flight), then exits. */
	int files_fd = bpf_map__fd(h->r->skel->maps.hold_files);
	struct hold_key k;
	uint32_t pid;
	while (bpf_map_get_next_key(files_fd, NULL, &k) == 0)
		bpf_map_delete_elem(files_fd, &k);
	while (bpf_map_get_next_key(h->held_fd, NULL, &pid) == 0)
		exec_hold_release(h->held_fd, pid, 0);
	if (h->alive_fd >= 0)
		close(h->alive_fd);
	h->alive_fd = -1;
	if (h->watchdog > 0)
		while (waitpid(h->watchdog, NULL, 0) < 0 && errno == EINTR)
			;
	h->watchdog = 0;
}
