/* Context classification: hot if density > CLASSIFY_HOT_DENSITY; cold only if, besides
 * MemProf's rule (density < CLASSIFY_COLD_DENSITY, average lifetime >=
 * CLASSIFY_COLD_MIN_AVG_LIFETIME_NS), a hot context of its size would have given
 * CLASSIFY_MIN_EXPECTED_SAMPLES samples, or it had accesses; unknown otherwise. Pure
 * functions of the combined MIB's four summed fields (alloc_count, total_size,
 * total_lifetime_ns, total_access_count: what a store_ctx_filter's accept() sees) and of
 * the store's evidence and of the MIB's own watch evidence (watch_ns: the time its
 * objects' granules were watched), so every reader agrees. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "reporter/classify.h"
#include "store/store.h"

struct ev_sums {
	double samples, est;
	bool sampled;
};

static int ev_class_cb(const struct store_access_class_row *r, void *arg)
{
	struct ev_sums *e = arg;

	e->samples += (double)r->samples;
	e->est += (double)r->est_accesses;
	return 0;
}

static int ev_run_cb(const struct store_run_row *r, void *arg)
{
	struct ev_sums *e = arg;

	if (r->run.alloc_mode && !strcmp(r->run.alloc_mode, "sampled"))
		e->sampled = true;
	return 0;
}

int classify_evidence_load(struct store *s, struct classify_evidence *ev)
{
	struct ev_sums e = { 0 };
	int r = store_query_access_classes(s, 0, ev_class_cb, &e);

	if (!r)
		r = store_query_runs(s, ev_run_cb, &e);
	if (r < 0)
		return r;
	ev->access_weight = e.samples > 0 ? e.est / e.samples : 0;
	ev->sampler_mean = e.sampled ? CLASSIFY_SAMPLER_MEAN : 0;
	return 0;
}

uint64_t classify_avg_lifetime_ns(const struct mib *m)
{
	return m->alloc_count ? m->total_lifetime_ns / m->alloc_count : 0;
}

double classify_density(const struct mib *m)
{
	return store_lifetime_access_density(m);
}

/* Traps m's watches would have taken at the hot threshold. */
static double expected_hot_traps(const struct mib *m)
{
	return CLASSIFY_HOT_DENSITY * CLASSIFY_WATCH_GRANULE * (double)m->watch_ns / 1e9;
}

double classify_expected_hot_samples(const struct mib *m, const struct classify_evidence *ev)
{
	if (!m->alloc_count)
		return 0;
	if (!ev || ev->access_weight <= 0)
		return expected_hot_traps(m);

	double bytes = (double)m->total_size;
	double life_s = (double)classify_avg_lifetime_ns(m) / 1e9;

	if (ev->sampler_mean > 0)   /* Horvitz-Thompson weights undone: the bytes watched */
		bytes *= -expm1(-(bytes / (double)m->alloc_count) / ev->sampler_mean);
	if (life_s < 0.001)
		life_s = 0.001;     /* as store_lifetime_access_density() */
	return CLASSIFY_HOT_DENSITY * bytes * life_s / ev->access_weight + expected_hot_traps(m);
}

enum classify_class classify_mib(const struct mib *m, const struct classify_evidence *ev)
{
	double d = classify_density(m);

	if (d > CLASSIFY_HOT_DENSITY)
		return CLASSIFY_HOT;
	/* Seen accesses are their own evidence: n samples at density d <= the hot threshold
	 * say n * hot / d >= n would have been seen at it. */
	if (!m->total_access_count &&
	    classify_expected_hot_samples(m, ev) < CLASSIFY_MIN_EXPECTED_SAMPLES)
		return CLASSIFY_UNKNOWN;
	/* floor(total / count) >= T iff total / count >= T, T being an integer. */
	if (d < CLASSIFY_COLD_DENSITY && m->alloc_count &&
	    classify_avg_lifetime_ns(m) >= CLASSIFY_COLD_MIN_AVG_LIFETIME_NS)
		return CLASSIFY_COLD;
	return CLASSIFY_NOTCOLD;
}

void classify_density_interval(const struct mib *m, const struct classify_evidence *ev,
			       double *lo, double *hi)
{
	double d = classify_density(m);

	if (m->access_samples && d > 0) {
		double rel = CLASSIFY_INTERVAL_Z / sqrt((double)m->access_samples);

		*lo = rel < 1 ? d * (1 - rel) : 0;
		*hi = d * (1 + rel);
		return;
	}
	double e = classify_expected_hot_samples(m, ev);

	*lo = 0;
	*hi = e > 0 ? CLASSIFY_MIN_EXPECTED_SAMPLES * CLASSIFY_HOT_DENSITY / e : INFINITY;
}

const char *classify_name(enum classify_class c)
{
	switch (c) {
	case CLASSIFY_COLD: return "cold";
	case CLASSIFY_HOT: return "hot";
	case CLASSIFY_UNKNOWN: return "unknown";
	default: return "notcold";
	}
}

enum classify_class classify_data(uint64_t est_accesses, uint64_t size, uint64_t observed_ns)
{
	double d;

	if (!est_accesses)
		return CLASSIFY_COLD;
	d = store_data_density(est_accesses, size, observed_ns);
	if (d < CLASSIFY_COLD_DENSITY)
		return CLASSIFY_COLD;
	if (d > CLASSIFY_HOT_DENSITY)
		return CLASSIFY_HOT;
	return CLASSIFY_NOTCOLD;
}
