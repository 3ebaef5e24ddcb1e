/* Attribution: per-process interval index of allocations (array sorted by start; an
 * address can appear in several intervals over time, told apart by [alloc_ns, free_ns)),
 * samples held by page until the object they fall in is known, and the static-data
 * table. Objects leave the index only when settled, so a sample processed after its
 * object's free still finds it as long as the caller's watermark lags the sample. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/attrib.h"
#include "daemon/intern.h"
#include "reporter/classify.h"
#include "symbolizer/insn.h"

#define LIVE UINT64_MAX
#define PAGE_SHIFT 12

struct aobj {
	uint64_t start, end, alloc_ns, free_ns;
	void *ctx;
	uint32_t acpu, fcpu;
	bool live_at_end;
	uint64_t samples, est;
	uint64_t *hist;
};

struct pend {
	uint64_t time, addr, weight;
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
	struct aobj *v;
	size_t n, cap;
	uint64_t max_size;        /* largest object ever indexed: bounds the backward scan */
	struct hmap pend;         /* hash(page) -> struct pbucket * */
};

struct attrib {
	struct attrib_ops ops;
	struct hmap procs;        /* hash(tgid, start) -> struct aproc * */
	struct attrib_counts c;
	uint64_t watermark;
	struct attrib_data_entry *data;
	size_t ndata, data_cap;
	struct hmap data_idx;     /* hash(binary, symbol) -> (void *)(index + 1) */
};

static const char *const class_names[ATTRIB_CLASS_MAX] = {
	"heap", "heap_untracked", "static", "stack", "tls", "anon", "file", "unknown",
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

static void proc_free(struct aproc *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].hist);
	free(p->v);
	hmap_foreach(&p->pend, i) {
		struct pbucket *b = p->pend.vals[i];
		free(b->v);
		free(b);
	}
	hmap_free(&p->pend);
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

static struct aproc *proc_get(struct attrib *a, uint32_t tgid, uint64_t start_ns)
{
	struct pkey k = { tgid, start_ns };
	uint64_t h = hash_u64(((uint64_t)tgid << 32) ^ hash_u64(start_ns));
	struct aproc *p = hmap_find(&a->procs, h, proc_eq, &k);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->tgid = tgid;
	p->start_ns = start_ns;
	if (hmap_insert(&a->procs, h, p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* First index whose start > addr. */
static size_t upper(const struct aproc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct aobj *lookup(struct aproc *p, uint64_t addr, uint64_t t)
{
	for (size_t i = upper(p, addr); i-- > 0;) {
		struct aobj *o = &p->v[i];
		if (o->start + p->max_size <= addr)
			break;
		if (addr < o->end && o->alloc_ns <= t && t < o->free_ns)
			return o;
	}
	return NULL;
}

static void credit(struct attrib *a, struct aobj *o, uint64_t addr, uint64_t w)
{
	uint64_t size = o->end - o->start;

	o->samples++;
	o->est += w;
	if (size && size <= ATTRIB_HIST_MAX_BYTES) {
		if (!o->hist)
			o->hist = calloc((size + ATTRIB_GRANULE - 1) / ATTRIB_GRANULE, sizeof(uint64_t));
		if (o->hist)
			o->hist[(addr - o->start) / ATTRIB_GRANULE] += w;
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

/* Held samples of [start, end) with alloc_ns <= t < free_ns go to o. */
static void claim_pending(struct attrib *a, struct aproc *p, struct aobj *o)
{
	uint64_t first = o->start >> PAGE_SHIFT, last = (o->end - 1) >> PAGE_SHIFT;

	if (!p->pend.n || o->end <= o->start)
		return;
	if (last - first + 1 > p->pend.cap) {
		/* A huge object: walk the buckets instead of its pages. */
		hmap_foreach(&p->pend, i) {
			struct pbucket *b = p->pend.vals[i];
			if (b->page < first || b->page > last)
				continue;
			for (uint32_t j = 0; j < b->n;) {
				struct pend *s = &b->v[j];
				if (s->addr >= o->start && s->addr < o->end && s->time >= o->alloc_ns &&
				    s->time < o->free_ns) {
					credit(a, o, s->addr, s->weight);
					a->c.pending_resolved++;
					a->c.pending--;
					b->v[j] = b->v[--b->n];
				} else {
					j++;
				}
			}
		}
		return;
	}
	for (uint64_t pg = first; pg <= last; pg++) {
		struct pbucket *b = hmap_find(&p->pend, hash_u64(pg) | 1, bucket_eq, &pg);
		if (!b)
			continue;
		for (uint32_t j = 0; j < b->n;) {
			struct pend *s = &b->v[j];
			if (s->addr >= o->start && s->addr < o->end && s->time >= o->alloc_ns &&
			    s->time < o->free_ns) {
				credit(a, o, s->addr, s->weight);
				a->c.pending_resolved++;
				a->c.pending--;
				b->v[j] = b->v[--b->n];
			} else {
				j++;
			}
		}
	}
}

static struct aobj *insert(struct attrib *a, struct aproc *p, uint64_t addr, uint64_t size)
{
	size_t at;

	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 64;
		struct aobj *nv = realloc(p->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		p->v = nv;
		p->cap = nc;
	}
	at = upper(p, addr);
	memmove(&p->v[at + 1], &p->v[at], (p->n - at) * sizeof(*p->v));
	p->n++;
	memset(&p->v[at], 0, sizeof(p->v[at]));
	p->v[at].start = addr;
	p->v[at].end = addr + (size ? size : 1);
	if (size > p->max_size)
		p->max_size = size ? size : 1;
	(void)a;
	return &p->v[at];
}

/* The live interval starting at addr, if any. */
static struct aobj *find_live(struct aproc *p, uint64_t addr)
{
	for (size_t i = upper(p, addr); i-- > 0 && p->v[i].start == addr;)
		if (p->v[i].free_ns == LIVE)
			return &p->v[i];
	return NULL;
}

int attrib_alloc(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		 uint64_t size, void *ctx, uint64_t alloc_ns, uint32_t cpu)
{
	struct aproc *p = proc_get(a, tgid, start_ns);
	struct aobj *o;

	if (!p)
		return -ENOMEM;
	if ((o = find_live(p, addr))) {   /* its free was lost: it died when the address was reused */
		o->free_ns = alloc_ns;
		o->fcpu = cpu;
		a->c.unmatched_free++;
	}
	if (!(o = insert(a, p, addr, size)))
		return -ENOMEM;
	o->ctx = ctx;
	o->alloc_ns = alloc_ns;
	o->free_ns = LIVE;
	o->acpu = o->fcpu = cpu;
	claim_pending(a, p, o);
	return 0;
}

int attrib_free(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		uint64_t free_ns, uint32_t cpu)
{
	struct aproc *p = proc_get(a, tgid, start_ns);
	struct aobj *o = p ? find_live(p, addr) : NULL;

	if (!p)
		return -ENOMEM;
	if (!o) {
		a->c.unmatched_free++;
		return 0;
	}
	o->free_ns = free_ns;
	o->fcpu = cpu;
	return 0;
}

int attrib_object(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		  uint64_t size, void *ctx, uint64_t alloc_ns, uint64_t free_ns,
		  uint32_t alloc_cpu, uint32_t free_cpu)
{
	struct aproc *p = proc_get(a, tgid, start_ns);
	struct aobj *o;

	if (!p || !(o = insert(a, p, addr, size)))
		return -ENOMEM;
	o->ctx = ctx;
	o->alloc_ns = alloc_ns;
	o->free_ns = free_ns;
	o->acpu = alloc_cpu;
	o->fcpu = free_cpu;
	claim_pending(a, p, o);
	return 0;
}

static int hold(struct attrib *a, struct aproc *p, const struct access_sample *s,
		enum attrib_class cls)
{
	uint64_t pg = s->addr >> PAGE_SHIFT;
	uint64_t h = hash_u64(pg) | 1;
	struct pbucket *b;

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
		if (a->ndata == a->data_cap) {
			size_t nc = a->data_cap ? a->data_cap * 2 : 64;
			struct attrib_data_entry *nv = realloc(a->data, nc * sizeof(*nv));
			if (!nv)
				return;
			a->data = nv;
			a->data_cap = nc;
		}
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

int attrib_sample(struct attrib *a, const struct access_sample *s)
{
	struct aproc *p;
	struct aobj *o;
	struct attrib_region r = { .kind = REGION_NONE };

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
	if (!(p = proc_get(a, s->tgid, s->start_ns))) {
		count_class(a, ATTRIB_UNKNOWN, s->weight);
		return ATTRIB_UNKNOWN;
	}
	if ((o = lookup(p, s->addr, s->time_ns))) {
		credit(a, o, s->addr, s->weight);
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
		if (a->ops.datasym && a->ops.datasym(a->ops.arg, &r, s->addr, &ds) != 0) {
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
		return hold(a, p, s, ATTRIB_HEAP_UNTRACKED);
	case REGION_ANON:
		if (s->fs_base && s->addr < s->fs_base + 4096 &&
		    s->addr + ATTRIB_TLS_WINDOW >= s->fs_base) {
			count_class(a, ATTRIB_TLS, s->weight);
			return ATTRIB_TLS;
		}
		return hold(a, p, s, ATTRIB_ANON);
	case REGION_NONE:
		break;
	}
	count_class(a, ATTRIB_UNKNOWN, s->weight);
	return ATTRIB_UNKNOWN;
}

static void settle(struct attrib *a, struct aproc *p, uint64_t before)
{
	size_t w = 0;

	for (size_t i = 0; i < p->n; i++) {
		struct aobj *o = &p->v[i];
		/* Every sample of its lifetime (t < free_ns <= watermark) has been seen. */
		if (o->free_ns == LIVE || o->free_ns > before) {
			p->v[w++] = *o;
			continue;
		}
		uint64_t size = o->end - o->start;
		struct attrib_object ob = {
			.tgid = p->tgid, .start_ns = p->start_ns, .addr = o->start, .size = size,
			.ctx = o->ctx, .alloc_ns = o->alloc_ns, .free_ns = o->free_ns,
			.alloc_cpu = o->acpu, .free_cpu = o->fcpu, .live_at_end = o->live_at_end,
			.samples = o->samples, .est_accesses = o->est, .hist = o->hist,
			.hist_len = o->hist ? (uint32_t)((size + ATTRIB_GRANULE - 1) / ATTRIB_GRANULE) : 0,
		};
		a->ops.object(a->ops.arg, &ob);
		a->c.objects_settled++;
		free(o->hist);
	}
	p->n = w;
}

void attrib_advance(struct attrib *a, uint64_t watermark_ns)
{
	if (watermark_ns > a->watermark)
		a->watermark = watermark_ns;
	hmap_foreach(&a->procs, i)
		settle(a, a->procs.vals[i], a->watermark);
}

static void end_live(struct aproc *p, uint64_t ts)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].free_ns == LIVE) {
			p->v[i].free_ns = ts;
			p->v[i].live_at_end = true;
		}
}

void attrib_process_exit(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns)
{
	struct pkey k = { tgid, start_ns };
	struct aproc *p = hmap_find(&a->procs, hash_u64(((uint64_t)tgid << 32) ^ hash_u64(start_ns)),
				    proc_eq, &k);

	if (p)
		end_live(p, ts_ns);
}

void attrib_finish(struct attrib *a, uint64_t end_ns)
{
	hmap_foreach(&a->procs, i) {
		struct aproc *p = a->procs.vals[i];
		end_live(p, end_ns);
		settle(a, p, LIVE);
		hmap_foreach(&p->pend, j) {
			struct pbucket *b = p->pend.vals[j];
			for (uint32_t k = 0; k < b->n; k++)
				count_class(a, b->v[k].cls, b->v[k].weight);
			a->c.pending -= b->n;
			b->n = 0;
		}
	}
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
		return;
	}
	if (e->path[0] == '\0' && e > m->v) {
		const struct map_entry *prev = e - 1;
		/* .bss past the file's last page: anonymous, right after the file's rw mapping. */
		if (prev->end == e->start && prev->path[0] == '/' && (prev->prot & 2) &&
		    (e->prot & 2)) {
			out->kind = REGION_DATA;
			out->path = prev->path;
			out->map_start = prev->start;
			out->map_offset = prev->offset;
			return;
		}
	}
	if (e->path[0] == '\0') {
		out->kind = REGION_ANON;
		return;
	}
	out->kind = REGION_FILE;   /* [vdso], [vvar], memfd:..., other pseudo files */
	out->path = e->path;
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

double attrib_density(uint64_t accesses, uint64_t size, uint64_t lifetime_ns)
{
	double s = lifetime_ns < 1000000 ? 1e-3 : (double)lifetime_ns / 1e9;

	return size ? (double)accesses / (double)size / s : 0.0;
}

void attrib_thresholds_default(struct attrib_thresholds *t)
{
	t->cold_density = CLASSIFY_COLD_DENSITY;
	t->cold_min_lifetime_ns = CLASSIFY_COLD_MIN_AVG_LIFETIME_NS;
	t->hot_density = CLASSIFY_HOT_DENSITY;
}

enum attrib_hotness attrib_classify_context(const struct attrib_thresholds *t,
					    uint64_t total_lifetime_density_x100,
					    uint64_t alloc_count, uint64_t total_lifetime_ns)
{
	double d, life;

	if (!alloc_count)
		return ATTRIB_NOTCOLD;
	d = (double)total_lifetime_density_x100 / (double)alloc_count / 100.0;
	life = (double)total_lifetime_ns / (double)alloc_count;
	if (d < t->cold_density && life >= (double)t->cold_min_lifetime_ns)
		return ATTRIB_COLD;
	if (d > t->hot_density)
		return ATTRIB_HOT;
	return ATTRIB_NOTCOLD;
}

enum attrib_hotness attrib_classify_data(const struct attrib_thresholds *t, uint64_t est_accesses,
					 uint64_t size, uint64_t observed_ns)
{
	double d;

	if (!est_accesses)
		return ATTRIB_COLD;
	d = attrib_density(est_accesses, size ? size : 1, observed_ns);
	if (d < t->cold_density)
		return ATTRIB_COLD;
	if (d > t->hot_density)
		return ATTRIB_HOT;
	return ATTRIB_NOTCOLD;
}

const char *attrib_hotness_name(enum attrib_hotness h)
{
	switch (h) {
	case ATTRIB_COLD: return "cold";
	case ATTRIB_HOT: return "hot";
	default: return "notcold";
	}
}
