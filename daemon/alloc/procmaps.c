/* Mappings of processes that may be gone (see procmaps.h). Invariant: a snapshot holds
 * only file-backed mappings (what frames resolve against and libdwfl reports modules
 * from), copied, never shared; it lives only until the process's own maps are read (they
 * are kept then, a failed re-read leaves them) and is dropped at exec. Cost: one copy of
 * a few dozen entries per exec and fork. */
#include <stdlib.h>
#include <string.h>
#include "daemon/alloc/procmaps.h"

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

/* Own maps (a zombie's are empty), else what is known already: the maps read before,
 * else the snapshot. Once the process's own maps were read they are the fallback and
 * the snapshot is dropped. */
static void read_or_kept(struct proc *p)
{
	struct maps m;

	maps_read_pid(&m, p->pid);
	if (m.n) {
		maps_free(&p->maps);
		p->maps = m;
		maps_free(&p->maps_kept);
	} else {
		maps_free(&m);
		if (!p->maps.n && p->maps_kept.n)
			copy_files(&p->maps, &p->maps_kept);
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
}

void procmaps_free(struct proc *p)
{
	maps_free(&p->maps);
	maps_free(&p->maps_kept);
	p->maps_loaded = false;
}
