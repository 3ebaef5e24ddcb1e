/* Poisson interval of a sample count applied to an estimate (estimate.h). */
#include <math.h>
#include "reporter/estimate.h"

/* Wilson-Hilferty: the 95% bounds of a Poisson mean given n observed events. */
static double pois_lo(double n)
{
	double t = 1 - 1 / (9 * n) - EST_Z / (3 * sqrt(n));

	return n * t * t * t;
}

static double pois_hi(double n)
{
	double m = n + 1, t = 1 - 1 / (9 * m) + EST_Z / (3 * sqrt(m));

	return m * t * t * t;
}

void est_interval(uint64_t est, uint64_t samples, uint64_t *lo, uint64_t *hi)
{
	if (!samples || !est) {
		*lo = *hi = 0;
		return;
	}
	double per = (double)est / (double)samples, l = pois_lo((double)samples);
	*lo = l > 0 ? (uint64_t)(l * per) : 0;
	*hi = (uint64_t)(pois_hi((double)samples) * per + 0.5);
}
