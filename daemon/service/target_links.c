/* Per-target multi-uprobe links (target_links.h). A process's set lives from its gate
 * decision (or fork) to its exit record; a set left by a process whose exit record was
 * lost is replaced when its PID comes back; a held process the exec gate rejected is
 * remembered (the last TARGET_LINKS_DROPPED), so the hold thread's late links for it are
 * undone. The closer thread owns only fds queued to it; a full queue closes on the
 * caller's thread (slow, never lost). */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/service/target_links.h"

struct tlink_set {
	uint32_t pid;
	uint64_t start_ns;
	uint64_t held_ns;              /* its hold's start when the hold thread linked it */
	size_t n, nfiles;
	int fds[TARGET_LINKS_MAX];
	uint64_t files[TARGET_LINKS_MAX / EXACT_PID_LINKS];   /* file keys linked */
};

static uint64_t key_of(uint32_t pid)
{
	return hash_u64(pid) | 1;
}

static bool same_pid(const void *val, const void *key)
{
	return ((const struct tlink_set *)val)->pid == *(const uint32_t *)key;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void *closer_main(void *arg)
{
	struct target_links *tl = arg;

	pthread_mutex_lock(&tl->mu);
	for (;;) {
		while (!tl->nqueue && !tl->stop)
			pthread_cond_wait(&tl->cv, &tl->mu);
		if (!tl->nqueue)
			break;
		int fd = tl->queue[--tl->nqueue];
		pthread_mutex_unlock(&tl->mu);
		uint64_t t0 = mono_ns();
		close(fd);
		uint64_t d = mono_ns() - t0;
		pthread_mutex_lock(&tl->mu);
		tl->closed++;
		tl->close_ns_sum += d;
		if (d > tl->close_ns_max)
			tl->close_ns_max = d;
	}
	pthread_mutex_unlock(&tl->mu);
	return NULL;
}

int target_links_init(struct target_links *tl, struct recorder *r)
{
	memset(tl, 0, sizeof(*tl));
	tl->r = r;
	pthread_mutex_init(&tl->mu_set, NULL);
	pthread_mutex_init(&tl->mu, NULL);
	pthread_cond_init(&tl->cv, NULL);
	/* Each close waits for its own grace periods (~50 ms measured under load); closes
	 * on many threads share them. A stack of 64 KiB is plenty for close(). */
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	for (; tl->ncloser < TARGET_LINKS_CLOSERS; tl->ncloser++) {
		int e = pthread_create(&tl->closer[tl->ncloser], &a, closer_main, tl);
		if (e) {
			if (!tl->ncloser)
				log_warn("daemon: no closer thread for probes (%s): detaching on the main "
					 "thread", strerror(e));
			break;
		}
	}
	pthread_attr_destroy(&a);
	tl->closer_up = tl->ncloser > 0;
	return 0;
}

static void close_later(struct target_links *tl, int fd)
{
	if (tl->closer_up) {
		pthread_mutex_lock(&tl->mu);
		bool queued = tl->nqueue < TARGET_LINKS_QUEUE;
		if (queued)
			tl->queue[tl->nqueue++] = fd;
		if (tl->nqueue > tl->queue_max)
			tl->queue_max = tl->nqueue;
		pthread_cond_signal(&tl->cv);
		pthread_mutex_unlock(&tl->mu);
		if (queued)
			return;
	}
	close(fd);
}

static struct tlink_set *find(const struct target_links *tl, uint32_t pid)
{
	return hmap_find(&tl->by_pid, key_of(pid), same_pid, &pid);
}

static void set_free(struct target_links *tl, struct tlink_set *s)
{
	hmap_remove(&tl->by_pid, key_of(s->pid), s);
	for (size_t i = 0; i < s->n; i++)
		close_later(tl, s->fds[i]);
	free(s);
}

static bool was_rejected(const struct target_links *tl, uint32_t pid, uint64_t start_ns)
{
	for (size_t i = 0; i < TARGET_LINKS_DROPPED; i++)
		if (tl->dropped[i].pid == pid && tl->dropped[i].start_ns == start_ns)
			return true;
	return false;
}

/* Under mu_set: counts (pid, start_ns) as not linked, once. */
static void deny(struct target_links *tl, uint32_t pid, uint64_t start_ns)
{
	for (size_t i = 0; i < TARGET_LINKS_DROPPED; i++)
		if (tl->denied[i].pid == pid && tl->denied[i].start_ns == start_ns)
			return;
	tl->denied[tl->ndenied].pid = pid;
	tl->denied[tl->ndenied].start_ns = start_ns;
	tl->ndenied = (tl->ndenied + 1) % TARGET_LINKS_DROPPED;
	tl->over_budget++;
}

void target_links_deny(struct target_links *tl, uint32_t pid, uint64_t start_ns)
{
	pthread_mutex_lock(&tl->mu_set);
	deny(tl, pid, start_ns);
	pthread_mutex_unlock(&tl->mu_set);
}

/* Under mu_set: whether a new process may be linked now. Closing a link waits for grace
 * periods and registering walks every process that maps the file, both serialized in
 * the kernel (dup_mmap_sem): with TARGET_LINKS_QUEUE_HIGH closes waiting, the kernel is
 * behind, and new processes are counted (once each) instead of linked. */
static bool admit(struct target_links *tl, uint32_t pid, uint64_t start_ns)
{
	uint64_t now = mono_ns();

	/* Tokens: TARGET_LINKS_RATE a second, at most TARGET_LINKS_RATE saved. */
	tl->tokens += (double)(now - tl->tokens_at) * TARGET_LINKS_RATE / 1e9;
	if (!tl->tokens_at || tl->tokens > TARGET_LINKS_RATE)
		tl->tokens = TARGET_LINKS_RATE;
	tl->tokens_at = now;
	pthread_mutex_lock(&tl->mu);
	size_t queued = tl->nqueue;
	pthread_mutex_unlock(&tl->mu);
	if (queued < TARGET_LINKS_QUEUE_HIGH && tl->tokens >= 1) {
		tl->tokens -= 1;
		return true;
	}
	deny(tl, pid, start_ns);
	return false;
}

/* Under mu_set: pid's set for start_ns, made if missing (a predecessor's is dropped);
 * NULL without memory (*err -ENOMEM) or over the budget (-EBUSY). */
static struct tlink_set *set_of(struct target_links *tl, uint32_t pid, uint64_t start_ns, int *err)
{
	struct tlink_set *s = find(tl, pid);

	if (s && start_ns && s->start_ns && s->start_ns != start_ns) {
		set_free(tl, s);   /* a predecessor's, whose exit record was lost */
		s = NULL;
	}
	if (s)
		return s;
	*err = -EBUSY;
	if (!admit(tl, pid, start_ns))
		return NULL;
	*err = -ENOMEM;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	s->pid = pid;
	s->start_ns = start_ns;
	if (hmap_insert(&tl->by_pid, key_of(pid), s)) {
		free(s);
		return NULL;
	}
	tl->attached++;
	return s;
}

static bool has_file(const struct tlink_set *s, uint64_t file_key)
{
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->files[i] == file_key)
			return true;
	return false;
}

int target_links_add(struct target_links *tl, uint32_t pid, uint64_t start_ns, uint64_t held_ns,
		     uint64_t file_key, const char *path, const struct exact_sites *sites)
{
	int fds[EXACT_PID_LINKS] = { -1, -1, -1 };
	struct tlink_set *s;
	int err = -ESRCH;

	pthread_mutex_lock(&tl->mu_set);
	s = was_rejected(tl, pid, start_ns) ? NULL : set_of(tl, pid, start_ns, &err);
	if (s) {
		err = 0;
		if (held_ns > s->held_ns)
			s->held_ns = held_ns;
	}
	if (!s)
		;   /* err says why */
	else if (has_file(s, file_key))
		err = 1;   /* linked already (a new image mapping the same file) */
	else if (s->nfiles == TARGET_LINKS_MAX / EXACT_PID_LINKS)
		err = -E2BIG;
	pthread_mutex_unlock(&tl->mu_set);
	if (err)
		return err > 0 ? 0 : err;
	/* Made outside the lock: a registration may wait for an RCU grace period. */
	err = exact_attach_pid_links(tl->r, path, sites, (int)pid, fds);
	pthread_mutex_lock(&tl->mu_set);
	if (err) {
		tl->failed++;
	} else if (!(s = find(tl, pid)) || (start_ns && s->start_ns != start_ns) ||
		   has_file(s, file_key) || s->nfiles == TARGET_LINKS_MAX / EXACT_PID_LINKS ||
		   was_rejected(tl, pid, start_ns)) {
		for (int k = 0; k < EXACT_PID_LINKS; k++)   /* dropped or linked meanwhile */
			if (fds[k] >= 0)
				close_later(tl, fds[k]);
	} else {
		for (int k = 0; k < EXACT_PID_LINKS; k++)
			if (fds[k] >= 0)
				s->fds[s->n++] = fds[k];
		s->files[s->nfiles++] = file_key;
	}
	pthread_mutex_unlock(&tl->mu_set);
	return err;
}

bool target_links_held_after(struct target_links *tl, uint32_t pid, uint64_t start_ns,
			     uint64_t exec_ns)
{
	pthread_mutex_lock(&tl->mu_set);
	const struct tlink_set *s = find(tl, pid);
	bool later = s && s->start_ns == start_ns && s->held_ns > exec_ns;
	pthread_mutex_unlock(&tl->mu_set);
	return later;
}

uint64_t target_links_take_denied(struct target_links *tl)
{
	pthread_mutex_lock(&tl->mu_set);
	uint64_t n = tl->over_budget - tl->over_budget_taken;
	tl->over_budget_taken = tl->over_budget;
	pthread_mutex_unlock(&tl->mu_set);
	return n;
}

bool target_links_has(struct target_links *tl, uint32_t pid)
{
	pthread_mutex_lock(&tl->mu_set);
	bool has = find(tl, pid) != NULL;
	pthread_mutex_unlock(&tl->mu_set);
	return has;
}

void target_links_drop(struct target_links *tl, uint32_t pid)
{
	pthread_mutex_lock(&tl->mu_set);
	struct tlink_set *s = find(tl, pid);
	if (s)
		set_free(tl, s);
	pthread_mutex_unlock(&tl->mu_set);
}

void target_links_reject(struct target_links *tl, uint32_t pid, uint64_t start_ns)
{
	pthread_mutex_lock(&tl->mu_set);
	tl->dropped[tl->ndropped].pid = pid;
	tl->dropped[tl->ndropped].start_ns = start_ns;
	tl->ndropped = (tl->ndropped + 1) % TARGET_LINKS_DROPPED;
	struct tlink_set *s = find(tl, pid);
	if (s && (!start_ns || !s->start_ns || s->start_ns == start_ns))
		set_free(tl, s);
	pthread_mutex_unlock(&tl->mu_set);
}

void target_links_free(struct target_links *tl)
{
	if (!tl->r)
		return;
	hmap_foreach(&tl->by_pid, i) {
		struct tlink_set *s = tl->by_pid.vals[i];
		for (size_t k = 0; k < s->n; k++)
			close_later(tl, s->fds[k]);
		free(s);
	}
	hmap_free(&tl->by_pid);
	if (tl->closer_up) {
		pthread_mutex_lock(&tl->mu);
		tl->stop = true;
		pthread_cond_broadcast(&tl->cv);
		pthread_mutex_unlock(&tl->mu);
		for (size_t i = 0; i < tl->ncloser; i++)
			pthread_join(tl->closer[i], NULL);
	}
	if (getenv("MEMPROFD_HOLD_STATS") && tl->closed)   /* bench and tests */
		fprintf(stderr, "memprofd: daemon: %llu processes linked, %llu over the budget, %llu link "
			"closes, %.2f ms on average, %.2f ms at most, %zu queued at most\n",
			(unsigned long long)tl->attached, (unsigned long long)tl->over_budget,
			(unsigned long long)tl->closed, tl->close_ns_sum / 1e6 / (double)tl->closed,
			tl->close_ns_max / 1e6, tl->queue_max);
	pthread_mutex_destroy(&tl->mu);
	pthread_cond_destroy(&tl->cv);
	pthread_mutex_destroy(&tl->mu_set);
	memset(tl, 0, sizeof(*tl));
}
