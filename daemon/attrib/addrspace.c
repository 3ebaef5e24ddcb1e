/* addrspace (addrspace.h): per-process maps live in struct proc (shared with the stack
 * resolver in events.c); this file adds the retry clock per process and the (device,
 * inode) -> binary cache. A cached "not a binary" is kept too, so a mapped data file
 * costs one lookup per sample as well. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "daemon/attrib/addrspace.h"
#include "symbolizer/datasym.h"
#include "symbolizer/maps.h"
#include "daemon/alloc/procmaps.h"
#include "base/clock.h"

struct file_ent {
	uint64_t dev, inode;
	struct binary *b;         /* NULL: not an ELF binary */
};

struct retry_ent {
	const struct proc *p;
	uint64_t read_ns;
};

struct addrspace {
	struct proctab *t;
	struct hmap files;        /* hash(dev, inode) -> struct file_ent * */
	size_t nfiles;
	struct hmap retries;      /* hash(proc) -> struct retry_ent * */
	uint64_t file_lookups, file_hits, maps_reads;
};

int addrspace_open(struct addrspace **out, struct proctab *t)
{
	struct addrspace *as = calloc(1, sizeof(*as));

	if (!as)
		return -ENOMEM;
	as->t = t;
	*out = as;
	return 0;
}

void addrspace_close(struct addrspace *as)
{
	if (!as)
		return;
	hmap_foreach(&as->files, i)
		free(as->files.vals[i]);
	hmap_free(&as->files);
	hmap_foreach(&as->retries, i)
		free(as->retries.vals[i]);
	hmap_free(&as->retries);
	free(as);
}

static bool retry_eq(const void *val, const void *key)
{
	return ((const struct retry_ent *)val)->p == key;
}

/* Whether p's maps may be reread now (and notes that they are). */
static bool may_reread(struct addrspace *as, const struct proc *p)
{
	uint64_t h = hash_u64((uintptr_t)p) | 1, now = mono_ns();
	struct retry_ent *e = hmap_find(&as->retries, h, retry_eq, p);

	if (!e) {
		if (!(e = calloc(1, sizeof(*e))))
			return false;
		e->p = p;
		if (hmap_insert(&as->retries, h, e)) {
			free(e);
			return false;
		}
	} else if (now - e->read_ns < ADDRSPACE_MAPS_RETRY_NS) {
		return false;
	}
	e->read_ns = now;
	return true;
}

void addrspace_forget(struct addrspace *as, const struct proc *p)
{
	uint64_t h = hash_u64((uintptr_t)p) | 1;
	struct retry_ent *e = hmap_find(&as->retries, h, retry_eq, p);

	if (e) {
		hmap_remove(&as->retries, h, e);
		free(e);
	}
}

void addrspace_region(struct addrspace *as, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		      uint64_t sp, struct attrib_region *out)
{
	struct proc *p = proc_find(as->t, tgid, start_ns);

	memset(out, 0, sizeof(*out));
	/* A target none of whose allocations was seen yet (a running process the daemon
	 * found; sampled mode sees few): known from now on, while it runs. */
	if (!p && proc_running(tgid, start_ns))
		p = proc_get(as->t, tgid, start_ns);
	if (!p)
		return;
	/* procmaps, the one home of a process's maps: it frees what it replaces (an mmap
	 * record marks them to be read again, p->maps still held: read over in place here,
	 * they leaked, 4 KiB a time under `record --alloc off`), and where /proc is gone it
	 * keeps what it had, joined with the mmap records. */
	if (!p->maps_loaded) {
		procmaps_load(p);
		as->maps_reads++;
	}
	attrib_region_from_maps(&p->maps, addr, sp, out);
	if (out->kind == REGION_NONE && may_reread(as, p)) {
		/* New mappings (dlopen, mmap) appear later than the first read. */
		as->maps_reads++;
		procmaps_reload(p);
		attrib_region_from_maps(&p->maps, addr, sp, out);
	}
}

struct fkey { uint64_t dev, inode; };
static bool file_eq(const void *val, const void *key)
{
	const struct file_ent *e = val;
	const struct fkey *k = key;
	return e->dev == k->dev && e->inode == k->inode;
}

/* The binary mapped from r's file, through the (device, inode) cache. */
static struct binary *binary_of(struct addrspace *as, const struct attrib_region *r)
{
	struct fkey k = { r->dev, r->inode };
	uint64_t h = hash_u64(r->dev ^ hash_u64(r->inode)) | 1;
	struct file_ent *e;
	struct binary *b;

	as->file_lookups++;
	if (r->inode && (e = hmap_find(&as->files, h, file_eq, &k))) {
		as->file_hits++;
		return e->b;
	}
	b = r->path ? bin_register(as->t, r->path, r->path) : NULL;
	if (r->inode && as->nfiles < ADDRSPACE_FILES_MAX && (e = calloc(1, sizeof(*e)))) {
		*e = (struct file_ent){ r->dev, r->inode, b };
		if (hmap_insert(&as->files, h, e))
			free(e);
		else
			as->nfiles++;
	}
	return b;
}

int addrspace_datasym(struct addrspace *as, const struct attrib_region *reg, uint64_t addr,
		      struct attrib_datasym *out)
{
	struct binary *b = binary_of(as, reg);
	struct datasym_hit hit;
	uint64_t va;

	if (!b)
		return -ENOENT;       /* not an ELF file: counted as a file mapping */
	if (!b->ds && !b->ds_failed && datasym_open(&b->ds, b->fd_path ? b->fd_path : b->path) < 0) {
		b->ds = NULL;
		b->ds_failed = true;
	}
	*out = (struct attrib_datasym){ .binary = b->build_id, .symbol = "", .section = "" };
	if (!b->ds)
		return 0;
	int e = datasym_runtime_to_vaddr(b->ds, reg->map_start, reg->map_offset, addr, &va);
	if (e == -ERANGE)
		return e;             /* past the image: anonymous memory merged onto its .bss */
	if (e < 0)
		return 0;
	if (datasym_lookup(b->ds, va, &hit) == 0) {
		out->symbol = intern_str(as->t->in, hit.name);
		out->section = intern_str(as->t->in, hit.section);
		out->sym_addr = hit.start;
		out->sym_size = hit.size;
		if (!out->symbol || !out->section)
			out->symbol = out->section = "";
	}
	return 0;
}

void addrspace_stats(const struct addrspace *as, uint64_t *file_lookups, uint64_t *file_hits,
		     uint64_t *maps_reads)
{
	*file_lookups = as->file_lookups;
	*file_hits = as->file_hits;
	*maps_reads = as->maps_reads;
}
