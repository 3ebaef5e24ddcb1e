/* Exec gate (exec_gate.h). The decision uses only the record and files, never a /proc
 * read that must succeed: the file run (its realpath, or /proc/PID/exe while the process
 * lives), the comm at exec, the parent; the cgroup only while /proc has it. A rejected
 * process is taken out of the targets map (if the map still holds that instance, not a
 * successor of its PID) and its records are dropped for EXEC_GATE_FORGET_MS, two
 * generations of a small set, so the set stays as small as the exec rate allows; what
 * it allocated meanwhile is purged from the live map at the next periodic tick. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/log.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "alloc.skel.h"
#include "bpf/alloc.h"
#include "daemon/alloc/events.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/record/recorder.h"
#include "daemon/service/exec_gate.h"
#include "daemon/service/rules.h"
#include "daemon/service/targets.h"

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static uint64_t key_of(uint32_t tgid, uint64_t start_ns)
{
	return hash_u64(((uint64_t)tgid << 40) ^ start_ns) | 1;
}

static bool is_rejected(struct exec_gate *g, uint32_t tgid, uint64_t start_ns)
{
	uint64_t k = key_of(tgid, start_ns);

	return hmap_find(&g->rejected[0], k, NULL, NULL) || hmap_find(&g->rejected[1], k, NULL, NULL);
}

/* marked: the kernel made it a target at its exec (mark_at_exec, or held at its exec):
 * what it recorded meanwhile is purged. */
static void reject_marked(struct exec_gate *g, uint32_t tgid, uint64_t start_ns, bool marked)
{
	targets_untrack(g->t, (pid_t)tgid, start_ns);
	/* Known already through another ring (an access sample): forgotten as exited. */
	struct proc *p = proc_find(&g->r->procs, tgid, start_ns);
	if (p && !p->exited)
		p->exited = p->exit_written = true;
	if (!marked)
		return;   /* never marked: it allocated nothing of ours */
	if (g->npurge < EXEC_GATE_PURGE_MAX && g->purge)
		g->purge[g->npurge++] = tgid;
	else
		g->purge_all = true;
	if (hmap_insert(&g->rejected[g->cur], key_of(tgid, start_ns), (void *)1))
		log_warn("daemon: out of memory: records of rejected pid %u may be kept", tgid);
}

static void reject(struct exec_gate *g, uint32_t tgid, uint64_t start_ns)
{
	reject_marked(g, tgid, start_ns, g->r->mark_at_exec);
}

/* Accepted at a later exec: the process's records count again. */
static void unreject(struct exec_gate *g, uint32_t tgid, uint64_t start_ns)
{
	uint64_t k = key_of(tgid, start_ns);

	for (int i = 0; i < 2; i++)
		while (hmap_find(&g->rejected[i], k, NULL, NULL))
			hmap_remove(&g->rejected[i], k, (void *)1);
}

static void age(struct exec_gate *g)
{
	int64_t now = mono_ms();

	if (now < g->next_age_ms)
		return;
	g->cur ^= 1;
	hmap_free(&g->rejected[g->cur]);
	g->next_age_ms = now + EXEC_GATE_FORGET_MS;
}

/* The identity of the record's process: the file it runs as /proc/PID/exe names it while
 * the process lives, else the record's path resolved here; open_path reads its build-id. */
static void identity_of(const struct ev_newexec *e, struct proc_identity *id, char *open_path,
			size_t n)
{
	char file[ALLOC_EXEC_NAME + 1], link[64], buf[PATH_MAX];
	ssize_t len;

	memset(id, 0, sizeof(*id));
	memcpy(file, e->filename, ALLOC_EXEC_NAME);
	file[ALLOC_EXEC_NAME] = '\0';
	memcpy(id->comm, e->comm, sizeof(id->comm) - 1);
	snprintf(link, sizeof(link), "/proc/%u/exe", e->h.tgid);
	len = readlink(link, buf, sizeof(buf) - 1);
	if (len > 0 && proc_running(e->h.tgid, e->h.start_ns)) {
		buf[len] = '\0';
		snprintf(id->exe, sizeof(id->exe), "%s", buf);
		snprintf(open_path, n, "%s", link);
	} else {
		if (!realpath(file, buf))
			snprintf(buf, sizeof(buf), "%s", file);
		snprintf(id->exe, sizeof(id->exe), "%s", buf);
		snprintf(open_path, n, "%s", buf);
	}
	/* Best effort: a process gone already has no cgroup to read (a cgroup rule then
	 * does not match it, as rules.h says of unknown fields). */
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%u/cgroup", e->h.tgid);
	FILE *f = fopen(path, "re");
	if (f) {
		size_t r = fread(text, 1, sizeof(text) - 1, f);
		text[r] = '\0';
		fclose(f);
		if (rules_parse_cgroup(text, id->cgroup, sizeof(id->cgroup)) < 0)
			id->cgroup[0] = '\0';
	}
}

static int decide(struct exec_gate *g, const struct ev_newexec *e)
{
	struct proc_identity id;
	char open_path[PATH_MAX];

	/* Held at its exec (exact mode, exec_hold.c): marked in the kernel, and maybe run
	 * and gone already, its records in the ring as a marked one's. */
	bool held = e->pad & NEWEXEC_HELD;

	if (!held && targets_held_after(g->t, (pid_t)e->h.tgid, e->h.start_ns, e->ts_ns))
		return 0;   /* a wrapper's image; the held exec's own record follows */
	identity_of(e, &id, open_path, sizeof(open_path));
	if (!targets_decide_exec(g->t, (pid_t)e->h.tgid, &id, open_path)) {
		reject_marked(g, e->h.tgid, e->h.start_ns, g->r->mark_at_exec || held);
		return 0;
	}
	unreject(g, e->h.tgid, e->h.start_ns);   /* rejected as its wrapper (sh -c 'exec') */
	targets_retrack(g->t, (pid_t)e->h.tgid, e->h.start_ns);   /* unmarked, or taken back */
	/* Unmarked (exact mode) and gone before this decision: no exit record will come,
	 * and nothing of it was traced. A marked one's exit record is in the ring. */
	if (!g->r->mark_at_exec && !held && !proc_running(e->h.tgid, e->h.start_ns)) {
		targets_untrack(g->t, (pid_t)e->h.tgid, e->h.start_ns);
		targets_unaccept(g->t);
		return 0;
	}
	/* Named now, from the record: a 2 ms process is gone before anything else could. */
	struct proc *p = proc_get(&g->r->procs, e->h.tgid, e->h.start_ns);
	if (p) {
		if (id.exe[0] == '/')
			proc_set_exe(&g->r->procs, p, id.exe);
		if (id.comm[0])
			p->comm = intern_str(&g->r->in, id.comm);
		p->ppid = e->ppid;
		p->exited = p->exit_written = false;   /* rejected before, as its wrapper */
	}
	return 1;
}

/* A rejected process that exec'd again before its rejection took effect (a wrapper: sh
 * -c 'exec app', a pyenv shim): its EV_EXEC is a new exec record, decided as one. */
static int redecide(struct exec_gate *g, const struct ev_exec *x)
{
	struct ev_newexec e = { .h = x->h, .ts_ns = x->ts_ns, .ppid = x->ppid };
	memcpy(e.filename, x->filename, sizeof(e.filename));
	e.filename[sizeof(e.filename) - 1] = '\0';
	const char *base = strrchr(e.filename, '/');
	const char *name = base ? base + 1 : e.filename;
	size_t l = strnlen(name, sizeof(e.comm) - 1);   /* TASK_COMM_LEN, as the kernel cuts it */
	memcpy(e.comm, name, l);
	e.comm[l] = '\0';
	return decide(g, &e);
}

int exec_gate(void *arg, const void *data, size_t len)
{
	struct exec_gate *g = arg;
	const struct ev_hdr *h = data;

	if (h->type == EV_NEWEXEC) {
		age(g);
		if (len < sizeof(struct ev_newexec))
			return 0;
		const struct ev_newexec *e = data;
		int ok = decide(g, e);
		if (e->pad & NEWEXEC_HELD)
			targets_held_exec(g->t, (pid_t)h->tgid, h->start_ns, ok);
		return ok;
	}
	if (h->type == EV_FORK && len >= sizeof(struct ev_fork)) {
		const struct ev_fork *f = data;
		if (is_rejected(g, f->ppid, f->parent_start_ns)) {
			reject(g, h->tgid, h->start_ns);   /* forked before its parent's decision */
			return 0;
		}
	}
	if (!g->rejected[0].n && !g->rejected[1].n)
		return 1;
	if (h->type == EV_EXEC && len >= sizeof(struct ev_exec) && is_rejected(g, h->tgid, h->start_ns))
		return redecide(g, data);
	return !is_rejected(g, h->tgid, h->start_ns);
}

void exec_gate_init(struct exec_gate *g, struct recorder *r, struct targets *t)
{
	memset(g, 0, sizeof(*g));
	g->r = r;
	g->t = t;
	g->next_age_ms = mono_ms() + EXEC_GATE_FORGET_MS;
	g->purge = calloc(EXEC_GATE_PURGE_MAX, sizeof(*g->purge));   /* NULL: purge_all */
}

static int live_fd(const struct recorder *r)
{
	return r->sampled ? sampled_live_fd(r->sampled) : bpf_map__fd(r->skel->maps.live);
}

static bool purged(const struct exec_gate *g, uint32_t tgid)
{
	uint64_t v;

	if (bpf_map_lookup_elem(recorder_targets_fd(g->r), &tgid, &v) == 0)
		return false;   /* a target now (a successor of the PID, say) */
	if (g->purge_all)
		return true;
	for (size_t i = 0; i < g->npurge; i++)
		if (g->purge[i] == tgid)
			return true;
	return false;
}

void exec_gate_purge(struct exec_gate *g)
{
	struct live_key *keys = NULL;
	size_t n = 0;
	int fd = live_fd(g->r);

	if (!g->npurge && !g->purge_all)
		return;
	if (events_live_keys(fd, 0, &keys, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (purged(g, keys[i].tgid))
				bpf_map_delete_elem(fd, &keys[i]);
	free(keys);
	g->npurge = 0;
	g->purge_all = false;
}

void exec_gate_free(struct exec_gate *g)
{
	free(g->purge);
	hmap_free(&g->rejected[0]);
	hmap_free(&g->rejected[1]);
}
