/* Mappings of processes that may be gone (see procmaps.h). Invariant: a snapshot holds
 * only file-backed mappings (what frames resolve against and libdwfl reports modules
 * from), copied, never shared; it lives only until the process's own maps are read (they
 * are kept then, a failed re-read leaves them) and is dropped at exec; the mappings BPF
 * told (EV_MMAP) belong to one address space and are joined in only when /proc fails.
 * Cost: one copy of a few dozen entries per exec, fork and executable mmap. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "bpf/alloc.h"
#include "daemon/alloc/procmaps.h"

#define KDEV_MINORBITS 20   /* the kernel's dev_t (s_dev): major << 20 | minor */
#define KDEV_MINOR(d) ((d) & ((1u << KDEV_MINORBITS) - 1))

static void copy_files(struct maps *dst, const struct maps *src)
{
	size_t n = 0;

	dst->v = NULL;
	dst->n = 0;
	for (size_t i = 0; i < src->n; i++)
		n += src->v[i].path[0] == '/';
	if (!n || !(dst->v = calloc(n, sizeof(*dst->v))))
		return;
	for (size_t i = 0; i < src->n; i++) {
		if (src->v[i].path[0] != '/')
			continue;
		dst->v[dst->n] = src->v[i];
		if (!(dst->v[dst->n].path = strdup(src->v[i].path)))
			return;   /* what was copied stands, sorted still */
		dst->n++;
	}
}

void procmaps_keep(struct proc *p, const struct maps *m)
{
	struct maps k;

	copy_files(&k, m);
	if (!k.n) {
		maps_free(&k);
		return;   /* nothing better than what is kept */
	}
	maps_free(&p->maps_kept);
	p->maps_kept = k;
}

static bool overlaps(const struct map_entry *a, const struct map_entry *b)
{
	return a->start < b->end && b->start < a->end;
}

static int by_start(const void *a, const void *b)
{
	const struct map_entry *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* dst = the entries of base that no mapping told by BPF covers, and those: sorted. */
static void join_events(struct maps *dst, const struct maps *base, const struct maps *ev)
{
	struct maps b;
	size_t n = 0;

	copy_files(&b, base);
	dst->n = 0;
	dst->v = calloc(b.n + ev->n + 1, sizeof(*dst->v));
	if (!dst->v) {
		*dst = b;
		return;
	}
	for (size_t i = 0; i < b.n; i++) {
		bool covered = false;
		for (size_t j = 0; j < ev->n && !covered; j++)
			covered = overlaps(&b.v[i], &ev->v[j]);
		if (covered) {
			free(b.v[i].path);
			continue;
		}
		dst->v[n++] = b.v[i];
	}
	free(b.v);
	for (size_t j = 0; j < ev->n; j++) {
		dst->v[n] = ev->v[j];
		if (!(dst->v[n].path = strdup(ev->v[j].path)))
			break;
		n++;
	}
	dst->n = n;
	qsort(dst->v, n, sizeof(*dst->v), by_start);
}

/* Own maps (a zombie's are empty), else what is known already: the maps read before,
 * else the snapshot, with what BPF told of files mapped since. Once the process's own
 * maps were read they are the fallback and the snapshot is dropped. */
/* Whether /proc shows the image the records being read come from: a process that
 * exec'd since (a shell's child between fork and exec, read after its exec) shows
 * another executable. */
static bool same_image(const struct proc *p)
{
	char path[64];
	struct stat st;

	if (!p->exe_known)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/exe", p->pid);
	if (stat(path, &st))
		return true;   /* its maps were read: a kernel thread, or gone just now */
	return st.st_ino == p->exe_ino && major(st.st_dev) == p->exe_dev_major &&
	       minor(st.st_dev) == p->exe_dev_minor;
}

static void read_or_kept(struct proc *p)
{
	struct maps m;

	maps_read_pid(&m, p->pid);
	if (m.n && !same_image(p))
		maps_free(&m);   /* another image's: what is kept stands for this one */
	p->maps_proc = m.n > 0;
	if (m.n) {
		maps_free(&p->maps);
		p->maps = m;
		maps_free(&p->maps_kept);
		return;
	}
	maps_free(&m);
	if (!p->maps_ev.n) {
		if (!p->maps.n && p->maps_kept.n)
			copy_files(&p->maps, &p->maps_kept);
		return;
	}
	join_events(&m, p->maps.n ? &p->maps : &p->maps_kept, &p->maps_ev);
	maps_free(&p->maps);
	p->maps = m;
}

int procmaps_mapped(struct proc *p, uint64_t mm, const struct map_entry *e)
{
	struct maps *ev = &p->maps_ev;
	size_t n = 0;

	if (mm != p->mm_ev) {   /* another address space: the old image's are stale */
		maps_free(ev);
		p->mm_ev = mm;
	}
	for (size_t i = 0; i < ev->n; i++) {   /* a newer mapping replaces what it covers */
		if (overlaps(&ev->v[i], e))
			free(ev->v[i].path);
		else
			ev->v[n++] = ev->v[i];
	}
	ev->n = n;
	struct map_entry *v = realloc(ev->v, (n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ev->v = v;
	v[n] = *e;
	if (!(v[n].path = strdup(e->path)))
		return -ENOMEM;
	ev->n = n + 1;
	qsort(ev->v, ev->n, sizeof(*ev->v), by_start);
	p->maps_loaded = false;   /* joined at the next load if /proc is gone by then */
	return 0;
}

void procmaps_exec(struct proc *p, uint64_t mm)
{
	maps_free(&p->maps);
	maps_free(&p->maps_kept);
	p->maps_loaded = false;
	if (mm != p->mm_ev) {
		maps_free(&p->maps_ev);
		p->mm_ev = mm;
	}
}

void procmaps_load(struct proc *p)
{
	if (p->maps_loaded)
		return;
	p->maps_loaded = true;
	read_or_kept(p);
}

void procmaps_reload(struct proc *p)
{
	p->maps_loaded = true;
	read_or_kept(p);
}

void procmaps_inherit(struct proc *child, struct proc *parent)
{
	procmaps_load(parent);   /* the parent lives on, mostly: read while it can be */
	maps_free(&child->maps_kept);
	copy_files(&child->maps_kept, parent->maps.n ? &parent->maps : &parent->maps_kept);
}

void procmaps_exited(struct proc *p)
{
	maps_free(&p->maps_kept);
	maps_free(&p->maps_ev);
}

void procmaps_free(struct proc *p)
{
	maps_free(&p->maps);
	maps_free(&p->maps_kept);
	maps_free(&p->maps_ev);
	p->maps_loaded = false;
}

/* The path of an EV_MMAP record (names innermost first) into buf, if it names the very
 * file mapped: the names come from the kernel's dentries, but a file may have been
 * renamed or replaced since, and this one is opened as root. */
static bool mmap_path(const struct ev_mmap *e, char *buf, size_t size)
{
	size_t len = 0;
	struct stat st;

	if (!e->nnames || e->nnames > ALLOC_MMAP_DEPTH)
		return false;
	for (unsigned i = e->nnames; i-- > 0;) {
		const char *name = e->names[i];
		size_t n = strnlen(name, ALLOC_MMAP_NAME);
		if (!n || n == ALLOC_MMAP_NAME || memchr(name, '/', n) || !strcmp(name, ".") ||
		    !strcmp(name, "..") || len + 1 + n + 1 > size)
			return false;
		buf[len++] = '/';
		memcpy(buf + len, name, n);
		len += n;
	}
	buf[len] = '\0';
	return !stat(buf, &st) && S_ISREG(st.st_mode) && st.st_ino == e->ino &&
	       major(st.st_dev) == e->dev >> KDEV_MINORBITS && minor(st.st_dev) == KDEV_MINOR(e->dev);
}

void procmaps_on_mmap(struct proc *p, const struct ev_mmap *e)
{
	char path[ALLOC_MMAP_DEPTH * ALLOC_MMAP_NAME + 1];
	struct map_entry m = { .start = e->start, .end = e->end, .offset = e->pgoff,
			       .prot = PROT_READ | PROT_EXEC, .dev_major = e->dev >> KDEV_MINORBITS,
			       .dev_minor = KDEV_MINOR(e->dev), .inode = e->ino, .path = path };

	if (e->exe) {
		p->exe_ino = e->ino;
		p->exe_dev_major = m.dev_major;
		p->exe_dev_minor = m.dev_minor;
		p->exe_known = true;
	}
	if (e->end <= e->start || e->pgoff > e->start || !mmap_path(e, path, sizeof(path)))
		return;   /* not a file the reader can name: /proc stays the only source */
	if (e->pgoff) {
		/* The file's first bytes, mapped read-only below its text by the loader (each
		 * segment at its own offset from one base): libdwfl takes a module's bias from
		 * its lowest mapping. */
		struct map_entry head = m;
		head.start = e->start - e->pgoff;
		head.end = e->start;
		head.offset = 0;
		head.prot = PROT_READ;
		procmaps_mapped(p, e->mm, &head);
	}
	procmaps_mapped(p, e->mm, &m);   /* out of memory: /proc stays the only source */
}
