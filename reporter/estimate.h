/* Estimates with their evidence: a sampled total (objects, bytes, accesses) and the
 * samples behind it give a 95% Poisson (Garwood) confidence interval, the total scaled
 * by the interval of the sample count. A total observed object by object (exact mode,
 * or every sample of weight 1) has no sampling error; 0 samples on record (stores older
 * than schema 9) is "unknown". */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "store/mib.h"

#define ESTIMATE_CONFIDENCE 0.95      /* two-sided */
#define ESTIMATE_FEW_SAMPLES 10       /* fewer samples than this: marked as weak evidence */
#define ESTIMATE_EXACT_MAX 2000       /* above this many samples the interval's bounds come
				       * from the Wilson-Hilferty approximation */

enum estimate_kind { ESTIMATE_UNKNOWN, ESTIMATE_EXACT, ESTIMATE_SAMPLED };

struct estimate {
	enum estimate_kind kind;
	uint64_t value, samples;
	uint64_t lo, hi;           /* the interval (value, value when exact; 0, 0 unknown) */
	bool hi_known;             /* false: 0 samples of a sampled total, no scale */
};

/* The Garwood interval of a Poisson count n: *lo, *hi with P(X >= n | lo) = P(X <= n | hi)
 * = (1 - ESTIMATE_CONFIDENCE) / 2; lo = 0 for n = 0. */
void estimate_poisson(uint64_t n, double *lo, double *hi);
/* value resting on samples; exact when every object was seen (samples >= objects). */
void estimate_of(struct estimate *e, uint64_t value, uint64_t samples, uint64_t objects);
/* A context's alloc_count, total_size and est_accesses with their evidence; the accesses'
 * interval is widened by the stall factor's error (mib.access_est_err, a standard error
 * in accesses) in quadrature with the Poisson half-widths: value -/+ sqrt(half^2 +
 * (z x err)^2), z the normal quantile of ESTIMATE_CONFIDENCE, lo at least 0. */
void estimate_mib(const struct mib *m, struct estimate *count, struct estimate *bytes,
		  struct estimate *accesses);
/* Widens e's interval by a standard error err of its value (see estimate_mib). */
void estimate_widen(struct estimate *e, double err);
/* Whether one of a context's estimates rests on fewer than ESTIMATE_FEW_SAMPLES samples. */
bool estimate_weak(const struct estimate *count, const struct estimate *accesses);
/* The interval's half-width relative to the value, in percent ("±12%" in tables); < 0
 * when there is none to show (exact, unknown, or a zero value). */
double estimate_rel_pct(const struct estimate *e);
/* A data row's est_accesses with the samples behind it: lo/hi are the Poisson interval of
 * the sample count scaled by est/samples (the instruction-rate model behind the weight,
 * daemon/access/src_soft.h, is not in it); 0 samples: both 0, nothing was seen. */
void est_interval(uint64_t est, uint64_t samples, uint64_t *lo, uint64_t *hi);
