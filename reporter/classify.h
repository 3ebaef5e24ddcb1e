/* Hot/cold classification of an allocation context, with MemProf's default thresholds
 * (llvm/lib/Analysis/MemoryProfileInfo.cpp). Density is accesses per byte per second of
 * average lifetime (store_lifetime_access_density()); lifetimes are in ns here. */
#pragma once
#include <stdint.h>
#include "store/mib.h"

/* -memprof-lifetime-access-density-cold-threshold: cold below this density... */
#define CLASSIFY_COLD_DENSITY 0.05
/* ...and only with an average lifetime of at least -memprof-ave-lifetime-cold-threshold
 * (200 s), so short-lived objects are never put on cold pages. */
#define CLASSIFY_COLD_MIN_AVG_LIFETIME_NS 200000000000ull
/* -memprof-min-ave-lifetime-access-density-hot-threshold: hot above this density. */
#define CLASSIFY_HOT_DENSITY 1000.0

enum classify_class { CLASSIFY_NOTCOLD, CLASSIFY_COLD, CLASSIFY_HOT };

/* Average object lifetime in ns (0 for an empty MIB). */
uint64_t classify_avg_lifetime_ns(const struct mib *m);
double classify_density(const struct mib *m);
enum classify_class classify_mib(const struct mib *m);
const char *classify_name(enum classify_class c);   /* "cold", "notcold", "hot" */

/* A static data symbol (MemProf's default
 * thresholds): density = est_accesses / size (0 counts as 1) / observed seconds (at least
 * 1 ms), store_data_density(); cold if never sampled or density < CLASSIFY_COLD_DENSITY
 * (no lifetime minimum: a symbol lives as long as its process), hot if density >
 * CLASSIFY_HOT_DENSITY, else notcold. `memprofd query data` passes as observed_ns the
 * summed duration (runs.ended_ns - started_ns; up to now for a run still recording) of the
 * runs that have rows for the symbol (store_data_row.observed_ns). */
enum classify_class classify_data(uint64_t est_accesses, uint64_t size, uint64_t observed_ns);
