/* Poisson intervals for sampled totals (see estimate.h). Exact bounds by bisection on the
 * Poisson CDF, summed in log space (n + 1 terms, ESTIMATE_BISECT steps), for counts up to
 * ESTIMATE_EXACT_MAX; above, Wilson-Hilferty's chi-square quantile (relative error well
 * under 1e-3 there). Pure functions of their arguments. */
#include <math.h>

#include "reporter/estimate.h"

#define ESTIMATE_BISECT 80          /* bisection steps: far below a count's resolution */
#define ESTIMATE_Z 1.959963984540054 /* standard normal quantile at 0.975 */

/* P(X <= n) for X ~ Poisson(lambda). */
static double poisson_cdf(uint64_t n, double lambda)
{
	double term = -lambda, sum = exp(term);

	for (uint64_t k = 1; k <= n; k++) {
		term += log(lambda) - log((double)k);
		sum += exp(term);
	}
	return sum > 1 ? 1 : sum;
}

/* Wilson-Hilferty: the p-quantile of chi-square with k degrees of freedom, z its normal
 * quantile. */
static double chi2_wh(double k, double z)
{
	double c = 2.0 / (9.0 * k), t = 1 - c + z * sqrt(c);

	return k * t * t * t;
}

/* lambda with poisson_cdf(n, lambda) == p (decreasing in lambda), in [lo, hi]. */
static double solve(uint64_t n, double p, double lo, double hi)
{
	for (int i = 0; i < ESTIMATE_BISECT; i++) {
		double mid = (lo + hi) / 2;

		if (poisson_cdf(n, mid) > p)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

void estimate_poisson(uint64_t n, double *lo, double *hi)
{
	double a = (1 - ESTIMATE_CONFIDENCE) / 2, x = (double)n;

	if (n > ESTIMATE_EXACT_MAX) {
		*lo = chi2_wh(2 * x, -ESTIMATE_Z) / 2;
		*hi = chi2_wh(2 * x + 2, ESTIMATE_Z) / 2;
		return;
	}
	double top = x + 20 * sqrt(x + 1) + 20;

	/* P(X >= n | lo) = a  <=>  P(X <= n - 1 | lo) = 1 - a. */
	*lo = n ? solve(n - 1, 1 - a, 0, top) : 0;
	*hi = solve(n, a, 0, top);
}

void estimate_of(struct estimate *e, uint64_t value, uint64_t samples, uint64_t objects)
{
	*e = (struct estimate){ .value = value, .samples = samples };
	if (!samples && objects) {
		e->kind = ESTIMATE_UNKNOWN;
		return;
	}
	if (samples >= objects) {
		e->kind = ESTIMATE_EXACT;
		e->lo = e->hi = value;
		e->hi_known = true;
		return;
	}
	double lo, hi;

	e->kind = ESTIMATE_SAMPLED;
	estimate_poisson(samples, &lo, &hi);
	if (!samples)
		return;   /* nothing to scale the interval by */
	e->lo = (uint64_t)floor((double)value * lo / (double)samples);
	e->hi = (uint64_t)ceil((double)value * hi / (double)samples);
	e->hi_known = true;
}

void estimate_mib(const struct mib *m, struct estimate *count, struct estimate *bytes,
		  struct estimate *accesses)
{
	estimate_of(count, m->alloc_count, m->alloc_samples, m->alloc_count);
	estimate_of(bytes, m->total_size, m->alloc_samples, m->alloc_count);
	/* Access samples are always a sample: est_accesses > samples unless 1 per access. */
	estimate_of(accesses, m->total_access_count, m->access_samples,
		    m->total_access_count > m->access_samples ? m->total_access_count :
		    m->access_samples + 1);
	if (!m->access_samples && !m->total_access_count)
		*accesses = (struct estimate){ .kind = ESTIMATE_SAMPLED, .hi_known = false };
	else if (m->access_est_err && accesses->kind == ESTIMATE_SAMPLED)
		estimate_widen(accesses, (double)m->access_est_err);
}

void estimate_widen(struct estimate *e, double err)
{
	double z = ESTIMATE_Z * err, v = (double)e->value;
	double lo = v - (double)e->lo, hi = (double)e->hi - v;

	lo = v - sqrt(lo * lo + z * z);
	hi = v + sqrt(hi * hi + z * z);
	e->lo = lo > 0 ? (uint64_t)lo : 0;
	e->hi = (uint64_t)(hi + 0.5);
}

bool estimate_weak(const struct estimate *count, const struct estimate *accesses)
{
	return (count->kind == ESTIMATE_SAMPLED && count->samples < ESTIMATE_FEW_SAMPLES) ||
	       (accesses->kind == ESTIMATE_SAMPLED && accesses->samples &&
		accesses->samples < ESTIMATE_FEW_SAMPLES);
}

double estimate_rel_pct(const struct estimate *e)
{
	if (e->kind != ESTIMATE_SAMPLED || !e->hi_known || !e->value)
		return -1;
	return 100.0 * (double)(e->hi - e->lo) / 2.0 / (double)e->value;
}

void est_interval(uint64_t est, uint64_t samples, uint64_t *lo, uint64_t *hi)
{
	double l, h, per;

	if (!samples || !est) {
		*lo = *hi = 0;
		return;
	}
	estimate_poisson(samples, &l, &h);
	per = (double)est / (double)samples;
	*lo = (uint64_t)(l * per);
	*hi = (uint64_t)(h * per + 0.5);
}
