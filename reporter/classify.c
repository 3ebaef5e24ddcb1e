/* Context classification: cold if density < CLASSIFY_COLD_DENSITY and the average
 * lifetime >= CLASSIFY_COLD_MIN_AVG_LIFETIME_NS, hot if density > CLASSIFY_HOT_DENSITY,
 * else notcold. Pure functions of the combined MIB, so every reader agrees. */
#include "reporter/classify.h"
#include "store/store.h"

uint64_t classify_avg_lifetime_ns(const struct mib *m)
{
	return m->alloc_count ? m->total_lifetime_ns / m->alloc_count : 0;
}

double classify_density(const struct mib *m)
{
	return store_lifetime_access_density(m);
}

enum classify_class classify_mib(const struct mib *m)
{
	double d = classify_density(m);

	/* floor(total / count) >= T iff total / count >= T, T being an integer. */
	if (d < CLASSIFY_COLD_DENSITY && m->alloc_count &&
	    classify_avg_lifetime_ns(m) >= CLASSIFY_COLD_MIN_AVG_LIFETIME_NS)
		return CLASSIFY_COLD;
	if (d > CLASSIFY_HOT_DENSITY)
		return CLASSIFY_HOT;
	return CLASSIFY_NOTCOLD;
}

const char *classify_name(enum classify_class c)
{
	switch (c) {
	case CLASSIFY_COLD: return "cold";
	case CLASSIFY_HOT: return "hot";
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
