/* Attribution: per process, an interval tree (daemon/attrib/itree.h) of the objects not yet
 * settled — an address can appear in several over time, told apart by [alloc_ns,
 * free_ns) — and one min-heap of the dead ones by free_ns, which settles them in order
 * as the watermark passes; samples held by page until the object they fall in is known
 * (sources that learn objects at their death), samples deferred until the allocation
 * watermark passes them (sources that see both ends), and the static-data table.
 * Objects leave the index only when settled, so a sample processed after its object's
 * free still finds it as long as the caller's watermark lags the sample.
 * Costs: an object's insert, free and settle O(log n) (n objects indexed); a sample
 * O(log n + k), k the unsettled objects holding its address. Memory is bounded by
 * ATTRIB_OBJECTS_MAX, ATTRIB_PENDING_MAX, ATTRIB_DEFER_MAX and ATTRIB_DATA_MAX. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/attrib/attrib.h"
#include "daemon/alloc/intern.h"
#include "daemon/attrib/itree.h"
#include "symbolizer/insn.h"
#include "base/array.h"

#define LIVE UINT64_MAX
#define PAGE_SHIFT 12
#define SLAB_OBJS 1024            /* objects per allocation of the object pool */

struct aproc;

struct aobj {
	struct itree_node node;   /* [addr, addr + size) */
	struct aproc *p;
	uint64_t alloc_ns, free_ns;
	void *ctx;
	uint64_t weight_q16;
	uint32_t acpu, fcpu;
	bool live_at_end;
	uint64_t probe_ns;
	uint64_t samples, est, est_bytes;
	double est_var;           /* the samples' weight_err squared, summed */
	uint64_t *hist;
};

/* Objects come from slabs and go back to a free list (linked through node.l): no malloc
 * per object, which matters where the recorder's own malloc is uprobed (exact mode). */
struct aslab {
	struct aslab *next;
	struct aobj v[SLAB_OBJS];
};

struct pend {
	uint64_t time, addr, weight, weight_err, bytes;
	uint32_t size;
	uint8_t rw, cls;          /* the class it is counted in if no object claims it */
};

struct pbucket {
	uint64_t page;
	uint32_t n, cap;
	struct pend *v;
};

struct aproc {
	uint32_t tgid;
	uint64_t start_ns;
	struct itree objs;        /* unsettled objects */
	struct hmap live;         /* hash(start) -> struct aobj * of the live ones: a free finds
	                           * its object in O(1), however many dead ones share its
	                           * address (the sampler's region reuses its slots) */
	struct hmap pend;         /* hash(page) -> struct pbucket * */
	bool exited;              /* no object of it can come any more */
};

struct attrib {
	struct attrib_ops ops;
	struct hmap procs;        /* hash(tgid, start) -> struct aproc * */
	struct attrib_counts c;
	uint64_t watermark;       /* samples older than this have all come */
	uint64_t alloc_wm;        /* allocation events older than this have all come */
	bool alloc_wm_on;         /* the caller gives alloc_wm (attrib_alloc_watermark) */
	uint64_t seq;             /* tie-break of objects starting at the same address */
	size_t nobjs;
	struct aslab *slabs;
	struct aobj *free_objs;
	struct aobj **dead;       /* min-heap by free_ns of the objects whose free is known */
	size_t ndead, dead_cap;   /* dead_cap >= nobjs, so a push never fails */
	struct access_sample *defer;   /* samples at or past alloc_wm, unordered */
	size_t ndefer, defer_cap;
	struct attrib_data_entry *data;
	size_t ndata, data_cap;
	struct hmap data_idx;     /* hash(binary, symbol) -> (void *)(index + 1) */
};

static const char *const class_names[ATTRIB_CLASS_MAX] = {
	"heap", "heap_untracked", "static", "stack", "tls", "anon", "file", "unknown",
	"heap_unsampled",
};

const char *attrib_class_name(enum attrib_class c)
{
	return (unsigned)c < ATTRIB_CLASS_MAX ? class_names[c] : "?";
}

int attrib_open(struct attrib **out, const struct attrib_ops *ops)
{
	struct attrib *a;

	if (!ops || !ops->object)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->ops = *ops;
	*out = a;
	return 0;
}

static void free_hists(struct itree_node *n)
{
	if (!n)
		return;
	free_hists(n->l);
	free_hists(n->r);
	free(((struct aobj *)n)->hist);
}

static void pend_free(struct aproc *p)
{
	hmap_foreach(&p->pend, i) {
		struct pbucket *b = p->pend.vals[i];
		free(b->v);
		free(b);
	}
	hmap_free(&p->pend);
}

static void proc_free(struct aproc *p)
{
	free_hists(p->objs.root);
	hmap_free(&p->live);
	pend_free(p);
	free(p);
}

void attrib_close(struct attrib *a)
{
	if (!a)
		return;
	hmap_foreach(&a->procs, i)
		proc_free(a->procs.vals[i]);
	hmap_free(&a->procs);
	hmap_free(&a->data_idx);
	while (a->slabs) {
		struct aslab *n = a->slabs->next;
		free(a->slabs);
		a->slabs = n;
	}
	free(a->dead);
	free(a->defer);
	free(a->data);
	free(a);
}

struct pkey { uint32_t tgid; uint64_t start; };
static bool proc_eq(const void *val, const void *key)
{
	const struct aproc *p = val;
	const struct pkey *k = key;
	return p->tgid == k->tgid && p->start_ns == k->start;
}

static uint64_t proc_hash(uint32_t tgid, uint64_t start_ns)
{
	return hash_u64(((uint64_t)tgid << 32) ^ hash_u64(start_ns));
}

static struct aproc *proc_find(struct attrib *a, uint32_t tgid, uint64_t start_ns)
{
	struct pkey k = { tgid, start_ns };

	return hmap_find(&a->procs, proc_hash(tgid, start_ns), proc_eq, &k);
}

static struct aproc *proc_get(struct attrib *a, uint32_t tgid, uint64_t start_ns)
{
	struct aproc *p = proc_find(a, tgid, start_ns);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->tgid = tgid;
	p->start_ns = start_ns;
	if (hmap_insert(&a->procs, proc_hash(tgid, start_ns), p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* ---- the dead-object heap ---- */

static void dead_push(struct attrib *a, struct aobj *o)
{
	size_t i = a->ndead++;

	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (a->dead[up]->free_ns <= o->free_ns)
			break;
		a->dead[i] = a->dead[up];
		i = up;
	}
	a->dead[i] = o;
}

static struct aobj *dead_pop(struct attrib *a)
{
	struct aobj *top = a->dead[0], *last = a->dead[--a->ndead];
	size_t i = 0, n = a->ndead;

	if (!n)
		return top;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && a->dead[c + 1]->free_ns < a->dead[c]->free_ns)
			c++;
		if (a->dead[c]->free_ns >= last->free_ns)
			break;
		a->dead[i] = a->dead[c];
		i = c;
	}
	a->dead[i] = last;
	return top;
}

static uint64_t live_hash(uint64_t addr)
{
	return hash_u64(addr) | 1;
}

static void set_free(struct attrib *a, struct aobj *o, uint64_t free_ns, uint32_t cpu)
{
	if (o->free_ns == LIVE)
		hmap_remove(&o->p->live, live_hash(o->node.start), o);
	o->free_ns = free_ns;
	o->fcpu = cpu;
	dead_push(a, o);
}

/* ---- the object index ---- */

struct stab_at { uint64_t t; };
static int alive_at(struct itree_node *n, void *arg)
{
	const struct aobj *o = (const struct aobj *)n;
	uint64_t t = ((const struct stab_at *)arg)->t;

	return o->alloc_ns <= t && t < o->free_ns;
}

static struct aobj *lookup(struct aproc *p, uint64_t addr, uint64_t t)
{
	struct stab_at k = { t };

	return (struct aobj *)itree_stab(&p->objs, addr, alive_at, &k);
}

static bool live_starting_at(const void *val, const void *key)
{
	return ((const struct aobj *)val)->node.start == *(const uint64_t *)key;
}

/* The live object starting at addr, if any. */
static struct aobj *find_live(struct aproc *p, uint64_t addr)
{
	return hmap_find(&p->live, live_hash(addr), live_starting_at, &addr);
}

/* A new object of p, indexed; NULL with *err set when the index is full or memory is. */
static struct aobj *new_obj(struct attrib *a, struct aproc *p, uint64_t addr, uint64_t size,
			    int *err)
{
	struct aobj *o;

	if (a->nobjs >= ATTRIB_OBJECTS_MAX) {
		a->c.objects_overflow++;
		*err = -ENOSPC;
		return NULL;
	}
	if (ARRAY_GROW(a->dead, a->dead_cap, a->nobjs, 256) < 0) {
		*err = -ENOMEM;
		return NULL;
	}
	if (!a->free_objs) {
		struct aslab *sl = malloc(sizeof(*sl));
		if (!sl) {
			*err = -ENOMEM;
			return NULL;
		}
		sl->next = a->slabs;
		a->slabs = sl;
		for (size_t i = 0; i < SLAB_OBJS; i++) {
			sl->v[i].node.l = a->free_objs ? &a->free_objs->node : NULL;
			a->free_objs = &sl->v[i];
		}
	}
	o = a->free_objs;
	a->free_objs = (struct aobj *)o->node.l;
	memset(o, 0, sizeof(*o));
	o->node.start = addr;
	o->node.end = addr + (size ? size : 1);
	if (o->node.end <= addr)
		o->node.end = UINT64_MAX;          /* a size that wraps: up to the top */
	o->node.seq = a->seq++;
	o->p = p;
	o->weight_q16 = ATTRIB_WEIGHT_ONE;
	itree_insert(&p->objs, &o->node);
	a->nobjs++;
	a->c.objects = a->nobjs;
	return o;
}

static void credit(struct attrib *a, struct aobj *o, uint64_t addr, uint64_t w, uint64_t err,
		   uint64_t bytes)
{
	uint64_t size = o->node.end - o->node.start;

	o->samples++;
	o->est += w;
	o->est_bytes += bytes;
	o->est_var += (double)err * (double)err;
	if (size && size <= ATTRIB_HIST_MAX_BYTES) {
		if (!o->hist)
			o->hist = calloc((size + ATTRIB_GRANULE - 1) / ATTRIB_GRANULE, sizeof(uint64_t));
		if (o->hist)
			o->hist[(addr - o->node.start) / ATTRIB_GRANULE] += w;
	}
	a->c.by_class[ATTRIB_HEAP]++;
	a->c.est_by_class[ATTRIB_HEAP] += w;
}

static void count_class(struct attrib *a, enum attrib_class c, uint64_t w)
{
	a->c.by_class[c]++;
	a->c.est_by_class[c] += w;
}

static bool bucket_eq(const void *val, const void *key)
{
	return ((const struct pbucket *)val)->page == *(const uint64_t *)key;
}

/* Held samples of bucket b inside o's range and lifetime go to o. */
static void claim_bucket(struct attrib *a, struct pbucket *b, struct aobj *o)
{
	for (uint32_t j = 0; j < b->n;) {
		struct pend *s = &b->v[j];
		if (s->addr >= o->node.start && s->addr < o->node.end && s->time >= o->alloc_ns &&
		    s->time < o->free_ns) {
			credit(a, o, s->addr, s->weight, s->weight_err, s->bytes);
			a->c.pending_resolved++;
			a->c.pending--;
			b->v[j] = b->v[--b->n];
		} else {
			j++;
		}
	}
}

static void claim_pending(struct attrib *a, struct aproc *p, struct aobj *o)
{
	uint64_t first = o->node.start >> PAGE_SHIFT, last = (o->node.end - 1) >> PAGE_SHIFT;

	if (!p->pend.n)
		return;
	if (last - first + 1 > p->pend.cap) {
		/* A huge object: walk the buckets instead of its pages. */
		hmap_foreach(&p->pend, i) {
			struct pbucket *b = p->pend.vals[i];
			if (b->page >= first && b->page <= last)
				claim_bucket(a, b, o);
		}
		return;
	}
	for (uint64_t pg = first; pg <= last; pg++) {
		struct pbucket *b = hmap_find(&p->pend, hash_u64(pg) | 1, bucket_eq, &pg);
		if (b)
			claim_bucket(a, b, o);
	}
}

/* Held samples of p that no object can claim any more go to their class. */
static void release_pending(struct attrib *a, struct aproc *p)
{
	hmap_foreach(&p->pend, j) {
		struct pbucket *b = p->pend.vals[j];
		for (uint32_t k = 0; k < b->n; k++)
			count_class(a, b->v[k].cls, b->v[k].weight);
		a->c.pending -= b->n;
	}
	pend_free(p);
	memset(&p->pend, 0, sizeof(p->pend));
}

int attrib_alloc(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		 uint64_t size, void *ctx, uint64_t alloc_ns, uint32_t cpu, uint64_t weight_q16)
{
	struct aproc *p = proc_get(a, tgid, start_ns);
	struct aobj *o;
	int err = 0;

	if (!p)
		return -ENOMEM;
	if ((o = find_live(p, addr))) {   /* its free was lost: it died when the address was reused */
		set_free(a, o, alloc_ns, cpu);
		a->c.unmatched_free++;
	}
	if (!(o = new_obj(a, p, addr, size, &err)))
		return err;
	o->ctx = ctx;
	o->alloc_ns = alloc_ns;
	o->free_ns = LIVE;
	if (hmap_insert(&p->live, live_hash(addr), o)) {
		/* Out of memory: not indexed after all; the caller keeps the object. */
		itree_erase(&p->objs, &o->node);
		a->nobjs--;
		a->c.objects = a->nobjs;
		o->node.l = a->free_objs ? &a->free_objs->node : NULL;
		a->free_objs = o;
		return -ENOMEM;
	}
	o->acpu = o->fcpu = cpu;
	o->weight_q16 = weight_q16;
	claim_pending(a, p, o);
	return 0;
}

int attrib_free(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		uint64_t free_ns, uint32_t cpu)
{
	struct aproc *p = proc_find(a, tgid, start_ns);
	struct aobj *o = p ? find_live(p, addr) : NULL;

	if (!o) {
		a->c.unmatched_free++;
		return -ENOENT;
	}
	set_free(a, o, free_ns < o->alloc_ns ? o->alloc_ns : free_ns, cpu);
	return 0;
}

int attrib_object(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		  uint64_t size, void *ctx, uint64_t alloc_ns, uint64_t free_ns,
		  uint32_t alloc_cpu, uint32_t free_cpu, uint64_t probe_ns)
{
	struct aproc *p = proc_get(a, tgid, start_ns);
	struct aobj *o;
	int err = -ENOMEM;

	if (!p || !(o = new_obj(a, p, addr, size, &err)))
		return err;
	o->ctx = ctx;
	o->alloc_ns = alloc_ns;
	o->acpu = alloc_cpu;
	o->probe_ns = probe_ns;
	if (free_ns < alloc_ns)
		free_ns = alloc_ns;
	set_free(a, o, free_ns == LIVE ? LIVE - 1 : free_ns, free_cpu);
	claim_pending(a, p, o);
	return 0;
}

static int hold(struct attrib *a, struct aproc *p, const struct access_sample *s,
		enum attrib_class cls)
{
	uint64_t pg = s->addr >> PAGE_SHIFT;
	uint64_t h = hash_u64(pg) | 1;
	struct pbucket *b;

	/* The index is complete at the sample's time: no object can claim it later. */
	if (a->alloc_wm_on || p->exited) {
		count_class(a, cls, s->weight);
		return cls;
	}
	if (a->c.pending >= ATTRIB_PENDING_MAX)
		goto now;
	b = hmap_find(&p->pend, h, bucket_eq, &pg);
	if (!b) {
		if (!(b = calloc(1, sizeof(*b))))
			goto now;
		b->page = pg;
		if (hmap_insert(&p->pend, h, b)) {
			free(b);
			goto now;
		}
	}
	if (b->n == b->cap) {
		uint32_t nc = b->cap ? b->cap * 2 : 8;
		struct pend *nv = realloc(b->v, nc * sizeof(*nv));
		if (!nv)
			goto now;
		b->v = nv;
		b->cap = nc;
	}
	b->v[b->n++] = (struct pend){ .time = s->time_ns, .addr = s->addr, .weight = s->weight,
				      .weight_err = s->weight_err, .bytes = access_sample_bytes(s),
				      .size = s->size, .rw = s->rw, .cls = (uint8_t)cls };
	a->c.pending++;
	return -1;
now:
	a->c.pending_overflow++;
	count_class(a, cls, s->weight);
	return cls;
}

struct dkey { const struct attrib *a; const char *bin, *sym; };
static bool data_eq(const void *val, const void *key)
{
	const struct dkey *k = key;
	const struct attrib_data_entry *e = &k->a->data[(uintptr_t)val - 1];
	return e->sym.binary == k->bin && e->sym.symbol == k->sym;
}

static void add_data(struct attrib *a, const struct attrib_datasym *ds,
		     const struct access_sample *s)
{
	struct dkey k = { a, ds->binary, ds->symbol };
	uint64_t h = hash_u64((uintptr_t)ds->binary ^ hash_u64((uintptr_t)ds->symbol)) | 1;
	uintptr_t idx = (uintptr_t)hmap_find(&a->data_idx, h, data_eq, &k);
	struct attrib_data_entry *e;

	if (!idx) {
		if (a->ndata >= ATTRIB_DATA_MAX) {
			a->c.data_overflow++;
			return;
		}
		if (ARRAY_GROW(a->data, a->data_cap, a->ndata, 64) < 0)
			return;
		if (hmap_insert(&a->data_idx, h, (void *)(uintptr_t)(a->ndata + 1)))
			return;
		idx = ++a->ndata;
		memset(&a->data[idx - 1], 0, sizeof(a->data[0]));
		a->data[idx - 1].sym = *ds;
	}
	e = &a->data[idx - 1];
	e->samples++;
	e->est_accesses += s->weight;
	if (s->rw & 1)
		e->reads++;
	if (s->rw & 2)
		e->writes++;
}

/* An anonymous mapping's address: the TLS block just below fs_base, else held as anon
 * (an object allocated later may still claim it). */
static int classify_anon(struct attrib *a, struct aproc *p, const struct access_sample *s)
{
	if (s->fs_base && s->addr < s->fs_base + 4096 && s->addr + ATTRIB_TLS_WINDOW >= s->fs_base) {
		count_class(a, ATTRIB_TLS, s->weight);
		return ATTRIB_TLS;
	}
	return hold(a, p, s, ATTRIB_ANON);
}

/* A sample whose time the object index covers (or may still come to cover, held). */
static int classify(struct attrib *a, const struct access_sample *s)
{
	struct aproc *p;
	struct aobj *o;
	struct attrib_region r = { .kind = REGION_NONE };

	if (!(p = proc_get(a, s->tgid, s->start_ns))) {
		count_class(a, ATTRIB_UNKNOWN, s->weight);
		return ATTRIB_UNKNOWN;
	}
	if ((o = lookup(p, s->addr, s->time_ns))) {
		credit(a, o, s->addr, s->weight, s->weight_err, access_sample_bytes(s));
		return ATTRIB_HEAP;
	}
	if (!a->ops.region)
		return hold(a, p, s, ATTRIB_UNKNOWN);
	a->ops.region(a->ops.arg, s->tgid, s->start_ns, s->addr, s->sp, &r);
	switch (r.kind) {
	case REGION_STACK:
		count_class(a, ATTRIB_STACK, s->weight);
		return ATTRIB_STACK;
	case REGION_DATA: {
		struct attrib_datasym ds = { .binary = r.path, .symbol = "", .section = "" };
		int e = a->ops.datasym ? a->ops.datasym(a->ops.arg, &r, s->addr, &ds) : 0;
		if (e == -ERANGE)
			return classify_anon(a, p, s);        /* merged onto a .bss, past the image */
		if (e) {
			count_class(a, ATTRIB_FILE, s->weight);   /* not a binary's data */
			return ATTRIB_FILE;
		}
		add_data(a, &ds, s);
		count_class(a, ATTRIB_STATIC, s->weight);
		return ATTRIB_STATIC;
	}
	case REGION_FILE:
		count_class(a, ATTRIB_FILE, s->weight);
		return ATTRIB_FILE;
	case REGION_HEAP:
		return hold(a, p, s, a->ops.objects_sampled ? ATTRIB_HEAP_UNSAMPLED
							   : ATTRIB_HEAP_UNTRACKED);
	case REGION_ANON:
		return classify_anon(a, p, s);
	case REGION_NONE:
		break;
	}
	count_class(a, ATTRIB_UNKNOWN, s->weight);
	return ATTRIB_UNKNOWN;
}

int attrib_sample(struct attrib *a, const struct access_sample *s)
{
	a->c.samples++;
	if (s->time_ns < a->watermark)
		a->c.late++;
	if (s->flags & INSN_F_STACK) {
		count_class(a, ATTRIB_STACK, s->weight);
		return ATTRIB_STACK;
	}
	if (s->flags & INSN_F_TLS) {
		count_class(a, ATTRIB_TLS, s->weight);
		return ATTRIB_TLS;
	}
	if (a->alloc_wm_on && s->time_ns >= a->alloc_wm) {
		/* An alloc or free before it may not have come yet: wait for them. */
		if (a->ndefer < ATTRIB_DEFER_MAX) {
			if (ARRAY_GROW(a->defer, a->defer_cap, a->ndefer, 256) < 0)
				goto now;
			a->defer[a->ndefer++] = *s;
			a->c.deferred = a->ndefer;
			return -1;
		}
now:
		a->c.defer_overflow++;
	}
	return classify(a, s);
}

static uint64_t settle_bound(const struct attrib *a)
{
	return a->alloc_wm_on && a->alloc_wm < a->watermark ? a->alloc_wm : a->watermark;
}

/* Objects dead at or before `before` are final: every sample of their lifetime
 * (t < free_ns <= before) has been seen. Oldest free first. */
static void settle(struct attrib *a, uint64_t before)
{
	while (a->ndead && a->dead[0]->free_ns <= before) {
		struct aobj *o = dead_pop(a);
		struct aproc *p = o->p;
		uint64_t size = o->node.end - o->node.start;
		struct attrib_object ob = {
			.tgid = p->tgid, .start_ns = p->start_ns, .addr = o->node.start, .size = size,
			.ctx = o->ctx, .alloc_ns = o->alloc_ns, .free_ns = o->free_ns,
			.alloc_cpu = o->acpu, .free_cpu = o->fcpu, .live_at_end = o->live_at_end,
			.probe_ns = o->probe_ns, .weight_q16 = o->weight_q16,
			.samples = o->samples, .est_accesses = o->est,
			.est_bytes = o->est_bytes, .est_err = (uint64_t)(sqrt(o->est_var) + 0.5), .hist = o->hist,
			.hist_len = o->hist ? (uint32_t)((size + ATTRIB_GRANULE - 1) / ATTRIB_GRANULE) : 0,
		};
		itree_erase(&p->objs, &o->node);
		a->nobjs--;
		a->c.objects = a->nobjs;
		a->ops.object(a->ops.arg, &ob);
		a->c.objects_settled++;
		if (o->hist)          /* free(NULL) too would trap on exact mode's uprobe */
			free(o->hist);
		o->node.l = a->free_objs ? &a->free_objs->node : NULL;
		a->free_objs = o;
	}
}

void attrib_advance(struct attrib *a, uint64_t watermark_ns)
{
	if (watermark_ns > a->watermark)
		a->watermark = watermark_ns;
	settle(a, settle_bound(a));
}

void attrib_alloc_watermark(struct attrib *a, uint64_t watermark_ns)
{
	size_t w = 0;

	if (!a->alloc_wm_on || watermark_ns > a->alloc_wm)
		a->alloc_wm = watermark_ns;
	a->alloc_wm_on = true;
	for (size_t i = 0; i < a->ndefer; i++) {
		if (a->defer[i].time_ns < a->alloc_wm)
			classify(a, &a->defer[i]);
		else
			a->defer[w++] = a->defer[i];
	}
	a->ndefer = w;
	a->c.deferred = w;
	settle(a, settle_bound(a));
}

struct end_arg { struct attrib *a; uint64_t ts; };
static int end_one(struct itree_node *n, void *arg)
{
	struct end_arg *e = arg;
	struct aobj *o = (struct aobj *)n;

	if (o->free_ns == LIVE) {
		o->live_at_end = true;
		set_free(e->a, o, e->ts < o->alloc_ns ? o->alloc_ns : e->ts, o->acpu);
	}
	return 0;
}

static void end_live(struct attrib *a, struct aproc *p, uint64_t ts)
{
	struct end_arg e = { a, ts };

	itree_walk(&p->objs, end_one, &e);
}

void attrib_process_exit(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns)
{
	struct aproc *p = proc_find(a, tgid, start_ns);

	if (!p)
		return;
	end_live(a, p, ts_ns);
	p->exited = true;
	release_pending(a, p);
}

bool attrib_holds(struct attrib *a, uint32_t tgid, uint64_t start_ns)
{
	struct aproc *p = proc_find(a, tgid, start_ns);

	return p && (p->objs.root || p->pend.n);
}

size_t attrib_forget_gone(struct attrib *a, attrib_gone_fn gone, void *arg)
{
	struct aproc **v;
	size_t n = 0;

	if (!a->procs.n || !(v = malloc(a->procs.n * sizeof(*v))))
		return 0;
	hmap_foreach(&a->procs, i) {
		struct aproc *p = a->procs.vals[i];
		if (!p->objs.root && gone(arg, p->tgid, p->start_ns))
			v[n++] = p;
	}
	for (size_t i = 0; i < n; i++) {
		release_pending(a, v[i]);
		hmap_remove(&a->procs, proc_hash(v[i]->tgid, v[i]->start_ns), v[i]);
		proc_free(v[i]);
	}
	free(v);
	return n;
}

void attrib_finish(struct attrib *a, uint64_t end_ns)
{
	if (a->alloc_wm_on)
		attrib_alloc_watermark(a, UINT64_MAX);
	hmap_foreach(&a->procs, i)
		end_live(a, a->procs.vals[i], end_ns);
	settle(a, UINT64_MAX);
	hmap_foreach(&a->procs, i)
		release_pending(a, a->procs.vals[i]);
}

const struct attrib_counts *attrib_counts(const struct attrib *a)
{
	return &a->c;
}

const struct attrib_data_entry *attrib_data(const struct attrib *a, size_t *n)
{
	*n = a->ndata;
	return a->data;
}

static bool is_stack_path(const char *p)
{
	return !strncmp(p, "[stack", 6);
}

void attrib_region_from_maps(const struct maps *m, uint64_t addr, uint64_t sp,
			     struct attrib_region *out)
{
	const struct map_entry *e = m ? maps_find(m, addr) : NULL;

	memset(out, 0, sizeof(*out));
	if (!e)
		return;
	if (is_stack_path(e->path) || (sp && sp >= e->start && sp < e->end)) {
		out->kind = REGION_STACK;
		return;
	}
	if (!strcmp(e->path, "[heap]")) {
		out->kind = REGION_HEAP;
		return;
	}
	if (e->path[0] == '/') {
		/* A binary's data: any private file mapping that is not executable text
		 * (.rodata is read-only, .data/.bss writable). The resolver decides whether
		 * a symbol covers it. */
		out->kind = REGION_DATA;
		out->path = e->path;
		out->map_start = e->start;
		out->map_offset = e->offset;
		out->dev = (uint64_t)e->dev_major << 32 | e->dev_minor;
		out->inode = e->inode;
		return;
	}
	if (e->path[0] == '\0' && e > m->v) {
		const struct map_entry *prev = e - 1;
		/* .bss past the file's last page: anonymous, right after the file's rw mapping.
		 * A later anonymous mmap placed right after it is merged into it by the kernel:
		 * the datasym op tells that part by the image's end (-ERANGE). */
		if (prev->end == e->start && prev->path[0] == '/' && (prev->prot & 2) &&
		    (e->prot & 2)) {
			out->kind = REGION_DATA;
			out->path = prev->path;
			out->map_start = prev->start;
			out->map_offset = prev->offset;
			out->dev = (uint64_t)prev->dev_major << 32 | prev->dev_minor;
			out->inode = prev->inode;
			return;
		}
	}
	if (e->path[0] == '\0') {
		out->kind = REGION_ANON;
		return;
	}
	out->kind = REGION_FILE;   /* [vdso], [vvar], memfd:..., other pseudo files */
	out->path = e->path;
	out->dev = (uint64_t)e->dev_major << 32 | e->dev_minor;
	out->inode = e->inode;
}

/* ---- densities */

static uint32_t sat32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

uint32_t attrib_access_density_x100(uint64_t accesses, uint64_t size)
{
	if (!size)
		return 0;
	if (accesses > UINT64_MAX / 100)
		return UINT32_MAX;
	return sat32(accesses * 100 / size);
}

uint32_t attrib_lifetime_access_density_x100(uint64_t accesses, uint64_t size, uint64_t lifetime_ns)
{
	uint64_t ms = lifetime_ns / 1000000;

	return sat32((uint64_t)attrib_access_density_x100(accesses, size) * 1000 / (ms ? ms : 1));
}
