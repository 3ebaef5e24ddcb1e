/* Ring-buffer records both allocation modes share (alloc.h's EV_STACK, EV_FORK, EV_EXEC,
 * EV_EXIT): stacks into interned contexts, and the process lifecycle. Invariant: a
 * process's allocations are reaped (through the mode's callback) before its stack keys
 * are forgotten at exec, and before it is marked exited. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdarg.h>
#include <time.h>
#include <sys/mman.h>
#include <pthread.h>
#include "base/log.h"
#include "daemon/alloc/events.h"
#include "daemon/access/access.h"
#include "symbolizer/elfsym.h"
#include "daemon/alloc/ustack.h"
#include "daemon/alloc/procmaps.h"
#include "daemon/alloc/unwind.h"
#include "base/array.h"
#include "base/clock.h"

/* An IP the kernel could not turn into (build-id, offset): try the process's maps. */
static struct iframe resolve_ip(struct recorder *r, struct proc *p, uint64_t ip,
			       struct binary **out)
{
	struct iframe f = { "", ip };
	const struct map_entry *m;
	struct binary *b;

	*out = NULL;

	procmaps_load(p);
	m = maps_find(&p->maps, ip);
	if (!m || m->path[0] != '/')
		return f;
	b = bin_register_map(&r->procs, p, m);
	if (!b)
		return f;
	f.build_id = b->build_id;
	f.offset = ip - m->start + m->offset;
	*out = b;
	return f;
}

static bool exec_mapped(struct proc *p, uint64_t ip)
{
	const struct map_entry *m = p->maps_loaded ? maps_find(&p->maps, ip) : NULL;

	return m && (m->prot & PROT_EXEC);
}

static unsigned stack_unresolved(const struct iframe *f, unsigned n)
{
	unsigned u = 0;

	for (unsigned i = 0; i < n; i++)
		u += !*f[i].build_id;
	return u;
}

/* A stack record. The kernel sends bare IPs when it could not take the process's mmap
 * lock (alloc_common.bpf.h send_stack): they are resolved from the process's maps, read
 * afresh (the process is likely still running: the record woke us at once), and a later
 * copy of the same key replaces an earlier one that resolved fewer frames. */
static void on_stack(struct recorder *r, const struct ev_stack *e, size_t len)
{
	struct iframe f[ALLOC_MAX_FRAMES];
	unsigned n = 0, max = e->nframes, bare = 0;
	struct proc *p = events_proc(r, e->h.tgid, e->h.start_ns);
	bool scanned = false, truncated = false, own = false;
	struct binary *b, *outer = NULL;

	if (!p)
		return;
	if (!p->fp_checked)
		ustack_decide(r, p);
	if (max > ALLOC_MAX_FRAMES || offsetof(struct ev_stack, frames) + max * sizeof(e->frames[0]) > len)
		max = (len - offsetof(struct ev_stack, frames)) / sizeof(e->frames[0]);
	for (unsigned i = 0; i < max; i++)
		bare += e->frames[i].status == 2;
	if (bare && bare == max && p->maps_loaded) {
		maps_free(&p->maps);
		p->maps_loaded = false;
	}
	for (unsigned i = 0; i < max && n < ALLOC_MAX_FRAMES; i++) {
		const struct ev_frame *ef = &e->frames[i];
		if (ef->status == 1) {
			b = bin_by_raw(&r->procs, ef->build_id);
			if (!b && !scanned) {
				bin_scan_process(&r->procs, p);
				scanned = true;
				b = bin_by_raw(&r->procs, ef->build_id);
			}
			if (b) {
				f[n].build_id = b->build_id;
				own |= !ustack_fp_exempt(b);
				ustack_check_fp_frame(r, p, b);
			} else {
				char hex[41];
				own = true;   /* unknown: not known to be a runtime object */
				elf_hex(ef->build_id, 20, hex, sizeof(hex));
				f[n].build_id = intern_str(&r->in, hex);
			}
			f[n].offset = ef->offset;
		} else if (ef->status == 2) {
			f[n] = resolve_ip(r, p, ef->ip, &b);
			own |= b && !ustack_fp_exempt(b);
			if (!*f[n].build_id && !exec_mapped(p, ef->ip)) {
				truncated = true;   /* never a frame outside the executable mappings */
				break;
			}
		} else {
			break;
		}
		outer = b;
		if (!f[n].build_id) {
			f[n].build_id = "";
		}
		n++;
	}
	p->fp_reached_own |= own && n;
	if (n && !own && p->fp_mode && outer && !ustack_is_loader(outer)) {
		/* The walk never reached the program nor the loader's constructor calls: cut
		 * by a runtime object's use of %rbp. Marked: the copy right behind it in the
		 * ring replaces it (ustack_handle). Before any walk reached the program it may
		 * be a constructor's (libstdc++'s emergency pool, once, from _dl_init): no
		 * switch. */
		truncated = true;
		if (p->fp_reached_own)
			ustack_fp_cut(r, p, outer);
	}
	if (!n)
		return;   /* not one frame: the key's objects count as a stack lost (ustack.c) */
	struct istack *s = intern_stack_cut(&r->in, f, n, truncated);
	if (!s)
		return;
	unsigned unresolved = stack_unresolved(f, n);
	struct istack *old = hmap_find(&p->stacks, stack_slot(e->key), NULL, NULL);
	if (old) {
		unsigned was = stack_unresolved(old->frames, old->nframes);
		if (unresolved >= was)
			return;
		hmap_remove(&p->stacks, stack_slot(e->key), old);
		r->unresolved_frames -= was;
	}
	r->unresolved_frames += unresolved;
	hmap_insert(&p->stacks, stack_slot(e->key), s);
}

static void on_fork(struct recorder *r, struct proc *p, const struct ev_fork *e)
{
	struct proc *parent = proc_find(&r->procs, e->ppid, e->parent_start_ns);

	p->ppid = e->ppid;
	if (parent)   /* fork copied its address space: named frames once the child is gone */
		procmaps_inherit(p, parent);
	if (parent && !p->fp_checked) {   /* BPF copied the parent's unwinding mode */
		p->fp_checked = parent->fp_checked;
		p->fp_mode = parent->fp_mode;
		p->fp_reached_own = parent->fp_reached_own;
	}
	if (parent && !p->fp_shape)
		p->fp_shape = parent->fp_shape;
	if (parent && !p->exe_known) {   /* the parent's image until the child's exec */
		p->exe_ino = parent->exe_ino;
		p->exe_dev_major = parent->exe_dev_major;
		p->exe_dev_minor = parent->exe_dev_minor;
		p->exe_known = parent->exe_known;
	}
	if (parent && (!*p->exe || !*p->build_id)) {
		p->exe = parent->exe;
		p->build_id = parent->build_id;
		p->comm = parent->comm;
	}
}

static void on_exec(struct recorder *r, struct proc *p, const struct ev_exec *e)
{
	char buf[ALLOC_EXEC_NAME + 1];

	if (e->ppid)
		p->ppid = e->ppid;
	memcpy(buf, e->filename, ALLOC_EXEC_NAME);
	buf[ALLOC_EXEC_NAME] = '\0';
	if (buf[0] == '/') {
		proc_set_exe(&r->procs, p, buf);
	} else {
		char link[64], exe[4096];
		snprintf(link, sizeof(link), "/proc/%u/exe", p->pid);
		ssize_t n = readlink(link, exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			proc_set_exe(&r->procs, p, exe);
		}
	}
	if (p->exe[0])
		p->comm = strrchr(p->exe, '/') ? strrchr(p->exe, '/') + 1 : p->exe;
	access_forget(r, p->pid);
	hmap_free(&p->stacks);   /* stack keys were per image */
	procmaps_exec(p, e->mm);
	unwinder_free(p->uw);     /* the new image maps other objects */
	p->uw = NULL;
	p->fp_checked = false;   /* decided again at the new image's first stack */
	p->fp_reached_own = false;
	p->fp_shape = 0;
	p->exe_known = false;   /* told by the EV_MMAP right behind this record */
	p->maps_reloads = 0;
	ustack_decide_exec(r, p);
}

struct proc *events_proc(struct recorder *r, uint32_t tgid, uint64_t start_ns)
{
	struct proc *p = proc_get(&r->procs, tgid, start_ns);

	if (p && !*p->exe)
		r->missed_unknown++;
	return p;
}

static bool handle_common(struct recorder *r, const void *data, size_t len, events_reap_fn reap)
{
	const struct ev_hdr *h = data;
	struct proc *p;

	switch (h->type) {
	case EV_STACK:
		if (len >= offsetof(struct ev_stack, frames))
			on_stack(r, data, len);
		return true;
	case EV_USTACK:
		if (len >= offsetof(struct ev_ustack, data))
			ustack_handle(r, data, len);
		return true;
	case EV_MMAP:
		if (len >= sizeof(struct ev_mmap) && (p = proc_get(&r->procs, h->tgid, h->start_ns)))
			procmaps_on_mmap(p, data);
		return true;
	case EV_FORK:
		if (len >= sizeof(struct ev_fork) && (p = proc_get(&r->procs, h->tgid, h->start_ns)))
			on_fork(r, p, data);
		return true;
	case EV_EXEC: {
		const struct ev_exec *e = data;
		if (len < sizeof(*e) || !(p = proc_get(&r->procs, h->tgid, h->start_ns)))
			return true;
		reap(r, h->tgid, h->start_ns, e->ts_ns, e->cpu);
		on_exec(r, p, e);
		return true;
	}
	case EV_EXIT: {
		const struct ev_exit *e = data;
		if (len < sizeof(*e) || !(p = proc_get(&r->procs, h->tgid, h->start_ns)))
			return true;
		p->exit_mono_ns = e->ts_ns ? e->ts_ns : 1;   /* objects reaped now: live at exit */
		reap(r, h->tgid, h->start_ns, e->ts_ns, e->cpu);
		access_exit(r, h->tgid, h->start_ns, e->ts_ns);
		p->exited = true;
		procmaps_exited(p);
		/* No stack of its follows its exit record: its unwinder (~350 KiB of libdwfl
		 * modules) goes now, not when the process is forgotten, which record never
		 * does (10,000 forked children each checking a frame-pointer key held 3.5 GB). */
		unwinder_free(p->uw);
		p->uw = NULL;
		p->exit_ns = (int64_t)e->ts_ns + r->mono_to_real_ns;
		return true;
	}
	}
	return false;
}

bool events_common(struct recorder *r, const void *data, size_t len, events_reap_fn reap)
{
	const struct ev_hdr *h = data;
	bool handled = handle_common(r, data, len, reap);

	/* The daemon's target bookkeeping, after the recorder has seen the record. */
	if (r->lifecycle && h->type >= EV_FORK && h->type <= EV_NEWEXEC)
		r->lifecycle(r->lifecycle_arg, h->type, h->tgid, h->start_ns);
	return handled;
}

int events_live_keys(int fd, uint32_t tgid, struct live_key **out, size_t *nout)
{
	struct live_key k, next, *keys = NULL;
	size_t n = 0, cap = 0;
	bool first = true;

	/* Collect first, delete after: deleting while walking restarts get_next_key. */
	while (bpf_map_get_next_key(fd, first ? NULL : &k, &next) == 0) {
		first = false;
		k = next;
		if (tgid && next.tgid != tgid)
			continue;
		if (ARRAY_GROW(keys, cap, n, 1024) < 0) {
			free(keys);
			return -ENOMEM;
		}
		keys[n++] = next;
	}
	*out = keys;
	*nout = n;
	return 0;
}

/* libbpf says nothing unless MEMPROFD_DEBUG_BPF is set (its errors become ours). */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_INFO && getenv("MEMPROFD_DEBUG_BPF"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

int events_recorder_init(struct recorder *r)
{
	struct timespec rt, mt;

	libbpf_set_print(libbpf_print);
	r->procs.in = &r->in;
	/* No frame at all: the walk stopped before the root, as `truncated` says. */
	r->unknown_stack = intern_stack_cut(&r->in, NULL, 0, true);
	if (!r->unknown_stack)
		return log_error_errno(-ENOMEM, "record: out of memory");
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	r->mono_to_real_ns = (rt.tv_sec - mt.tv_sec) * 1000000000LL + (rt.tv_nsec - mt.tv_nsec);
	return 0;
}

int events_link_push(struct bpf_link ***v, size_t *n, size_t *cap, struct bpf_link *l)
{
	if (ARRAY_GROW(*v, *cap, *n, 64) < 0) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	(*v)[(*n)++] = l;
	return 0;
}

int events_attach_lifecycle(struct bpf_program *on_fork, struct bpf_program *on_exec,
			    struct bpf_program *on_exit, struct bpf_program *on_mmap,
			    struct bpf_link ***v, size_t *n, size_t *cap)
{
	struct bpf_program *tps[] = { on_fork, on_exec, on_exit, on_mmap };

	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		struct bpf_link *l;
		int err;

		if (!tps[i])
			continue;
		l = bpf_program__attach(tps[i]);
		if (!l)
			return log_error_errno(-errno, "record: attaching %s: %s",
					       bpf_program__name(tps[i]), strerror(errno));
		if ((err = events_link_push(v, n, cap, l)))
			return err;
	}
	return 0;
}

/* Detaching a classic uprobe waits for an RCU grace period (~100 ms here), one after the
 * other when closed in turn: the links are closed in parallel, EVENTS_DETACH_THREADS at
 * a time, so ending a recording costs about one grace period. */
struct detach_job {
	struct bpf_link *link;
	int fd;
};

static void *detach_one(void *arg)
{
	struct detach_job *j = arg;

	if (j->link)
		bpf_link__destroy(j->link);
	if (j->fd >= 0)
		close(j->fd);
	return NULL;
}

void events_detach_all(struct bpf_link **links, size_t nlinks, const int *fds, size_t nfds)
{
	struct detach_job jobs[EVENTS_DETACH_THREADS];
	pthread_t th[EVENTS_DETACH_THREADS];
	size_t total = nlinks + nfds, i = 0;

	while (i < total) {
		size_t k = 0;
		for (; k < EVENTS_DETACH_THREADS && i < total; k++, i++) {
			jobs[k] = i < nlinks ? (struct detach_job){ links[i], -1 }
					     : (struct detach_job){ NULL, fds[i - nlinks] };
			if (pthread_create(&th[k], NULL, detach_one, &jobs[k])) {
				detach_one(&jobs[k]);   /* no thread: in turn */
				th[k] = 0;
			}
		}
		for (size_t j = 0; j < k; j++)
			if (th[j])
				pthread_join(th[j], NULL);
	}
}

int events_slice_after(struct recorder *r)
{
	r->slice_records++;
	if (!r->slice_end_ns || mono_ns() < r->slice_end_ns)
		return 0;
	r->slice_spent = true;
	return -EAGAIN;   /* libbpf stops here; this record is consumed */
}

/* A stop by events_slice_after is not an error: what was read counts. */
static int slice_result(struct recorder *r, int n)
{
	return n == -EAGAIN && r->slice_spent ? 0 : n == -EINTR ? 0 : n;
}

int events_poll(struct recorder *r, struct ring_buffer *rb, int timeout_ms, uint64_t max_ns,
		bool *more)
{
	r->slice_records = 0;
	r->slice_spent = false;
	r->slice_end_ns = max_ns ? mono_ns() + max_ns : 0;
	int n = slice_result(r, ring_buffer__poll(rb, timeout_ms));

	/* The kernel side wakes us only when the ring is a quarter full, so a poll that
	 * times out must still consume what is there, or flushes would fall behind. */
	if (n >= 0 && !r->slice_spent)
		n = slice_result(r, ring_buffer__consume(rb));
	r->slice_end_ns = 0;   /* drains elsewhere (final flush, reaping) run to the end */
	if (more)
		*more = r->slice_spent;
	return n < 0 ? n : (int)(r->slice_records > INT32_MAX ? INT32_MAX : r->slice_records);
}
