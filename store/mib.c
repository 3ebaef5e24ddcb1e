/* MemInfoBlock arithmetic shared by the daemon (aggregation), the store (merging
 * buckets) and `memprofd merge`. mib_merge() keeps MemProf's MemInfoBlock::Merge()
 * semantics bit for bit; mib_combine() is its order-free counterpart for disjoint
 * aggregates, and is what the store's SQL GROUP BY reproduces (store/query.c).
 * mib_hist_merge() is MemInfoBlock::Merge()'s AccessHistogram rule, order-free by nature,
 * used for both (and by the store's SQL aggregate mib_hist_merge()). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include "store/mib.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

double mib_lifetime_density(uint64_t count, uint64_t size, uint64_t life_ns)
{
	if (!size)
		return 0;
	return (double)count / (double)size /
	       ((double)MAX(life_ns, MIB_MIN_LIFETIME_NS) / 1e9);
}

void mib_density_extremes(const struct mib *m, double *min_ad, double *max_ad,
			  double *min_lad, double *max_lad)
{
	if (m->has_density) {
		*min_ad = m->min_access_density;
		*max_ad = m->max_access_density;
		*min_lad = m->min_lifetime_access_density;
		*max_lad = m->max_lifetime_access_density;
		return;
	}
	if (!m->alloc_count) {
		*min_ad = *max_ad = *min_lad = *max_lad = 0;
		return;
	}
	*min_ad = m->max_size ? (double)m->min_access_count / (double)m->max_size : 0;
	*max_ad = m->min_size ? (double)m->max_access_count / (double)m->min_size : 0;
	*min_lad = mib_lifetime_density(m->min_access_count, m->max_size, m->max_lifetime_ns);
	*max_lad = mib_lifetime_density(m->max_access_count, m->min_size, m->min_lifetime_ns);
}

void mib_from_object(struct mib *m, uint64_t size, uint64_t alloc_ts_ns, uint64_t dealloc_ts_ns,
		     uint32_t alloc_cpu, uint32_t dealloc_cpu, uint64_t access_count)
{
	uint64_t life = dealloc_ts_ns > alloc_ts_ns ? dealloc_ts_ns - alloc_ts_ns : 0;

	*m = (struct mib){
		.alloc_count = 1,
		.total_size = size, .min_size = size, .max_size = size,
		.total_lifetime_ns = life, .min_lifetime_ns = life, .max_lifetime_ns = life,
		.alloc_ts_ns = alloc_ts_ns, .dealloc_ts_ns = dealloc_ts_ns,
		.alloc_cpu = alloc_cpu, .dealloc_cpu = dealloc_cpu,
		.num_migrated_cpu = alloc_cpu != dealloc_cpu,
		.total_access_count = access_count, .min_access_count = access_count,
		.max_access_count = access_count, .alloc_samples = 1,
		.has_density = true,
		.min_access_density = size ? (double)access_count / (double)size : 0,
		.min_lifetime_access_density = mib_lifetime_density(access_count, size, life),
	};
	m->max_access_density = m->min_access_density;
	m->max_lifetime_access_density = m->min_lifetime_access_density;
}

void mib_net_of_probes(struct mib *m, uint64_t probe_ns)
{
	uint64_t life = m->total_lifetime_ns > probe_ns ? m->total_lifetime_ns - probe_ns : 0;

	if (!probe_ns || m->alloc_count != 1)
		return;
	m->total_lifetime_ns = m->min_lifetime_ns = m->max_lifetime_ns = life;
	if (m->has_density)
		m->min_lifetime_access_density = m->max_lifetime_access_density =
			mib_lifetime_density(m->total_access_count, m->total_size, life);
}

void mib_mark_live_at_exit(struct mib *m)
{
	m->live_at_exit_count = m->alloc_count;
	m->live_at_exit_bytes = m->total_size;
	m->live_at_exit_lifetime_ns = m->total_lifetime_ns;
}

/* sqrt(a^2 + b^2) without libm (the store links none): Newton on sqrt(1 + r^2), r <= 1,
 * from 1.2, which six steps take to a double's precision. */
static void combine_counts(struct mib *a, const struct mib *b)
{
	a->alloc_count += b->alloc_count;
	a->total_size += b->total_size;
	a->min_size = MIN(a->min_size, b->min_size);
	a->max_size = MAX(a->max_size, b->max_size);
	a->total_lifetime_ns += b->total_lifetime_ns;
	a->min_lifetime_ns = MIN(a->min_lifetime_ns, b->min_lifetime_ns);
	a->max_lifetime_ns = MAX(a->max_lifetime_ns, b->max_lifetime_ns);
	a->access_samples += b->access_samples;
	a->total_access_count += b->total_access_count;
	a->min_access_count = MIN(a->min_access_count, b->min_access_count);
	a->max_access_count = MAX(a->max_access_count, b->max_access_count);
	a->alloc_samples += b->alloc_samples;
	a->live_at_exit_count += b->live_at_exit_count;
	a->live_at_exit_bytes += b->live_at_exit_bytes;
	a->live_at_exit_lifetime_ns += b->live_at_exit_lifetime_ns;
	a->watch_hits += b->watch_hits;
	a->watch_ns += b->watch_ns;
	/* Errors add: an upper bound (objects of one block share its factor, so their
	 * errors are not independent), and a sum every reader (SQL SUM, the fleet's
	 * ClickHouse sum) reproduces exactly, in any order. */
	a->access_est_err += b->access_est_err;
	a->total_access_bytes += b->total_access_bytes;
	/* Extremes over both sides, or none when either side's objects are not all known. */
	a->has_density = a->has_density && b->has_density;
	a->min_access_density = MIN(a->min_access_density, b->min_access_density);
	a->max_access_density = MAX(a->max_access_density, b->max_access_density);
	a->min_lifetime_access_density = MIN(a->min_lifetime_access_density,
					     b->min_lifetime_access_density);
	a->max_lifetime_access_density = MAX(a->max_lifetime_access_density,
					     b->max_lifetime_access_density);
	if (!a->has_density)   /* meaningless then: kept 0 so equal MIBs compare equal */
		a->min_access_density = a->max_access_density = a->min_lifetime_access_density =
			a->max_lifetime_access_density = 0;
}

static void take_last(struct mib *a, const struct mib *b)
{
	a->alloc_ts_ns = b->alloc_ts_ns;
	a->dealloc_ts_ns = b->dealloc_ts_ns;
	a->alloc_cpu = b->alloc_cpu;
	a->dealloc_cpu = b->dealloc_cpu;
}

void mib_merge(struct mib *into, const struct mib *obj)
{
	if (into->alloc_count == 0) {
		*into = *obj;
		return;
	}
	combine_counts(into, obj);
	/* As MemInfoBlock::Merge: obj was deallocated later, so it overlaps iff it was
	 * allocated before the previous one died. Merge never updates NumMigratedCpu (it
	 * stays the first object's flag), nor adds obj's own overlap/same-CPU counts. */
	into->num_lifetime_overlaps += obj->alloc_ts_ns < into->dealloc_ts_ns;
	into->num_same_alloc_cpu += into->alloc_cpu == obj->alloc_cpu;
	into->num_same_dealloc_cpu += into->dealloc_cpu == obj->dealloc_cpu;
	take_last(into, obj);
}

/* Whether b's last object is the later one: (dealloc_ts, alloc_ts, alloc_cpu,
 * dealloc_cpu) compared in that order; ties go to b. Makes mib_combine order-free. */
static bool last_is_b(const struct mib *a, const struct mib *b)
{
	if (a->dealloc_ts_ns != b->dealloc_ts_ns)
		return b->dealloc_ts_ns > a->dealloc_ts_ns;
	if (a->alloc_ts_ns != b->alloc_ts_ns)
		return b->alloc_ts_ns > a->alloc_ts_ns;
	if (a->alloc_cpu != b->alloc_cpu)
		return b->alloc_cpu > a->alloc_cpu;
	return b->dealloc_cpu >= a->dealloc_cpu;
}

void mib_combine(struct mib *a, const struct mib *b)
{
	if (b->alloc_count == 0)
		return;
	if (a->alloc_count == 0) {
		*a = *b;
		return;
	}
	bool later = last_is_b(a, b);

	combine_counts(a, b);
	a->num_migrated_cpu += b->num_migrated_cpu;
	a->num_lifetime_overlaps += b->num_lifetime_overlaps;
	a->num_same_alloc_cpu += b->num_same_alloc_cpu;
	a->num_same_dealloc_cpu += b->num_same_dealloc_cpu;
	if (later)
		take_last(a, b);
}

/* ---- AccessHistogram ---- */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t le64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* Grows h to n entries (new ones 0); 0 or -ENOMEM. */
static int hist_grow(struct mib_hist *h, uint32_t n)
{
	if (n <= h->len)
		return 0;
	uint64_t *v = realloc(h->v, (size_t)n * sizeof(*v));

	if (!v)
		return -ENOMEM;
	memset(v + h->len, 0, (size_t)(n - h->len) * sizeof(*v));
	h->v = v;
	h->len = n;
	return 0;
}

int mib_hist_merge(struct mib_hist *h, const uint64_t *v, uint32_t n)
{
	if (n > MIB_HIST_MAX_LEN)
		return -E2BIG;
	int r = hist_grow(h, n);

	if (r)
		return r;
	for (uint32_t i = 0; i < n; i++)
		h->v[i] = sat_add(h->v[i], v[i]);
	return 0;
}

int mib_hist_merge_blob(struct mib_hist *h, const void *blob, size_t bytes)
{
	const unsigned char *p = blob;

	if (bytes % 8)
		return -EINVAL;
	if (bytes / 8 > MIB_HIST_MAX_LEN)
		return -E2BIG;
	uint32_t n = (uint32_t)(bytes / 8);
	int r = hist_grow(h, n);

	if (r)
		return r;
	for (uint32_t i = 0; i < n; i++)
		h->v[i] = sat_add(h->v[i], le64_at(p + 8 * (size_t)i));
	return 0;
}

void mib_hist_to_blob(const struct mib_hist *h, void *out)
{
	unsigned char *p = out;

	for (uint32_t i = 0; i < h->len; i++)
		for (int k = 0; k < 8; k++)
			*p++ = (unsigned char)(h->v[i] >> (8 * k));
}

void mib_hist_free(struct mib_hist *h)
{
	free(h->v);
	h->v = NULL;
	h->len = 0;
}
