/* Hot/cold classification of an allocation context, with MemProf's default thresholds
 * (llvm/lib/Analysis/MemoryProfileInfo.cpp). Density is accesses per byte per second of
 * average lifetime (store_lifetime_access_density()); lifetimes are in ns here. A class
 * needs evidence: a context for which fewer than CLASSIFY_MIN_EXPECTED_SAMPLES access
 * samples were expected at the hot threshold, and that nothing shows to be hot or
 * notcold, is CLASSIFY_UNKNOWN (never cold). */
#pragma once
#include <stdint.h>
#include "store/mib.h"

struct store;

/* -memprof-lifetime-access-density-cold-threshold: cold below this density... */
#define CLASSIFY_COLD_DENSITY 0.05
/* ...and only with an average lifetime of at least -memprof-ave-lifetime-cold-threshold
 * (200 s), so short-lived objects are never put on cold pages. */
#define CLASSIFY_COLD_MIN_AVG_LIFETIME_NS 200000000000ull
/* -memprof-min-ave-lifetime-access-density-hot-threshold: hot above this density. */
#define CLASSIFY_HOT_DENSITY 1000.0
/* Samples a context at the hot threshold must have been expected to give before their
 * absence says anything: P(0 samples | Poisson(3)) = 5%. */
#define CLASSIFY_MIN_EXPECTED_SAMPLES 3.0
#define CLASSIFY_INTERVAL_Z 1.96             /* density intervals: 95% */
/* sampler/sampler.h's SAMPLER_DEFAULT_MEAN (reporter/ may not include sampler/; the unit
 * test holds the two equal). */
#define CLASSIFY_SAMPLER_MEAN (512u << 10)
/* Bytes one hardware watch covers (the watches' granule, daemon/access/watch.h and
 * sampler/sampler_watch.h): at the hot threshold a watched granule is accessed
 * CLASSIFY_HOT_DENSITY * this many times a second. */
#define CLASSIFY_WATCH_GRANULE 8.0

enum classify_class { CLASSIFY_NOTCOLD, CLASSIFY_COLD, CLASSIFY_HOT, CLASSIFY_UNKNOWN,
		      CLASSIFY_NCLASSES };

/* How much one access sample says, for a whole store (classify_evidence_load()). */
struct classify_evidence {
	double access_weight;     /* estimated accesses per access sample; 0: no samples */
	double sampler_mean;      /* bytes between the sampler's objects; 0: exact mode */
};
/* Mean weight of the store's access samples (access_classes over every run) and, if any
 * run recorded with --alloc sampled, the sampler's default mean (CLASSIFY_SAMPLER_MEAN) (a context's sampled
 * bytes are then its total_size * (1 - exp(-avg size / mean))). 0 or -errno. */
int classify_evidence_load(struct store *s, struct classify_evidence *ev);

/* Average object lifetime in ns (0 for an empty MIB). */
uint64_t classify_avg_lifetime_ns(const struct mib *m);
double classify_density(const struct mib *m);
/* Access samples a context of m's bytes and lifetimes would have given at exactly
 * CLASSIFY_HOT_DENSITY: hot density * sampled bytes * average lifetime s / weight, plus
 * the traps its own watches would have taken: hot density * granule * watched granule-
 * seconds (m->watch_ns; counted with or without ev). */
double classify_expected_hot_samples(const struct mib *m, const struct classify_evidence *ev);
/* hot if density > CLASSIFY_HOT_DENSITY; unknown if no access was seen and fewer than
 * CLASSIFY_MIN_EXPECTED_SAMPLES were expected at the hot threshold (a context with
 * accesses is its own evidence: its samples times hot / density were expected at the
 * threshold); else cold by MemProf's rule, or notcold. ev NULL: no evidence. */
enum classify_class classify_mib(const struct mib *m, const struct classify_evidence *ev);
const char *classify_name(enum classify_class c);   /* "cold", "notcold", "hot", "unknown" */
/* A 95% interval of the density: with n = access_samples > 0, density * (1 -+ 1.96 /
 * sqrt(n)) (Poisson, normal approximation; lo at least 0); with none, [0, the density at
 * which CLASSIFY_MIN_EXPECTED_SAMPLES would have been expected], hi INFINITY without
 * evidence. */
void classify_density_interval(const struct mib *m, const struct classify_evidence *ev,
			       double *lo, double *hi);

/* A static data symbol (MemProf's default
 * thresholds): density = est_accesses / size (0 counts as 1) / observed seconds (at least
 * 1 ms), store_data_density(); cold if never sampled or density < CLASSIFY_COLD_DENSITY
 * (no lifetime minimum: a symbol lives as long as its process), hot if density >
 * CLASSIFY_HOT_DENSITY, else notcold. `memprofd query data` passes as observed_ns the
 * summed duration (runs.ended_ns - started_ns; up to now for a run still recording) of the
 * runs that have rows for the symbol (store_data_row.observed_ns). */
enum classify_class classify_data(uint64_t est_accesses, uint64_t size, uint64_t observed_ns);
