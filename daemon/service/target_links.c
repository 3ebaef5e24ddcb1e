/* Per-target multi-uprobe links (target_links.h). A process's set lives from its gate
 * decision (or fork) to its exit record; a set left by a process whose exit record was
 * lost is replaced when its PID comes back. The closer thread owns only fds queued to
 * it; a full queue closes on the caller's thread (slow, never lost). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/log.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/service/target_links.h"

struct tlink_set {
	uint32_t pid;
	uint64_t start_ns;
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
		close(fd);
		pthread_mutex_lock(&tl->mu);
	}
	pthread_mutex_unlock(&tl->mu);
	return NULL;
}

int target_links_init(struct target_links *tl, struct recorder *r)
{
	memset(tl, 0, sizeof(*tl));
	tl->r = r;
	pthread_mutex_init(&tl->mu, NULL);
	pthread_cond_init(&tl->cv, NULL);
	int e = pthread_create(&tl->closer, NULL, closer_main, tl);
	if (e)
		log_warn("daemon: no closer thread for probes (%s): detaching on the main thread",
			 strerror(e));
	tl->closer_up = !e;
	return 0;
}

static void close_later(struct target_links *tl, int fd)
{
	if (tl->closer_up) {
		pthread_mutex_lock(&tl->mu);
		bool queued = tl->nqueue < TARGET_LINKS_QUEUE;
		if (queued)
			tl->queue[tl->nqueue++] = fd;
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

int target_links_add(struct target_links *tl, uint32_t pid, uint64_t start_ns,
		     uint64_t file_key, const char *path, const struct exact_sites *sites)
{
	struct tlink_set *s = find(tl, pid);
	int fds[EXACT_PID_LINKS] = { -1, -1, -1 };
	int err;

	if (s && start_ns && s->start_ns && s->start_ns != start_ns) {
		set_free(tl, s);   /* a predecessor's, whose exit record was lost */
		s = NULL;
	}
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))))
			return -ENOMEM;
		s->pid = pid;
		s->start_ns = start_ns;
		if (hmap_insert(&tl->by_pid, key_of(pid), s)) {
			free(s);
			return -ENOMEM;
		}
		tl->attached++;
	}
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->files[i] == file_key)
			return 0;   /* linked already (a new image mapping the same file) */
	if (s->nfiles == TARGET_LINKS_MAX / EXACT_PID_LINKS)
		return -E2BIG;
	if ((err = exact_attach_pid_links(tl->r, path, sites, (int)pid, fds))) {
		tl->failed++;
		return err;
	}
	for (int k = 0; k < EXACT_PID_LINKS; k++)
		if (fds[k] >= 0)
			s->fds[s->n++] = fds[k];
	s->files[s->nfiles++] = file_key;
	return 0;
}

bool target_links_has(const struct target_links *tl, uint32_t pid)
{
	return find(tl, pid) != NULL;
}

void target_links_drop(struct target_links *tl, uint32_t pid)
{
	struct tlink_set *s = find(tl, pid);

	if (s)
		set_free(tl, s);
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
		pthread_cond_signal(&tl->cv);
		pthread_mutex_unlock(&tl->mu);
		pthread_join(tl->closer, NULL);
	}
	pthread_mutex_destroy(&tl->mu);
	pthread_cond_destroy(&tl->cv);
	memset(tl, 0, sizeof(*tl));
}
