/* Order statistics of small samples (calibrations' rounds): sorted in place. */
#pragma once
#include <stddef.h>
#include <stdlib.h>

static inline int stats_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) (n > 0), which it leaves sorted ascending. */
static inline double stats_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), stats_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
