/* The interval around an access estimate: a context's or symbol's est_accesses is its
 * samples times a weight, and the samples are a Poisson count, so the 95% interval of
 * the count (Wilson-Hilferty) scaled by est/samples bounds the sampling error. The
 * instruction-rate model behind the weight (daemon/access/src_soft.h) is not in it. */
#pragma once
#include <stdint.h>

#define EST_Z 1.96                 /* two-sided 95% */

/* lo/hi of est given the samples behind it; 0 samples: both 0 (nothing was seen). */
void est_interval(uint64_t est, uint64_t samples, uint64_t *lo, uint64_t *hi);
