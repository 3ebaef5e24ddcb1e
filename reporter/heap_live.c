/* Bytes live over time, spread from the store's per-bucket aggregates (see heap_live.h).
 * Cost: O(rows x buckets each row's mean lifetime spans), the span bounded by
 * HEAP_LIVE_MAX_BUCKETS bars; memory O(rows + bars x (columns + top contexts)). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "reporter/heap_live.h"
#include "base/array.h"

int heap_live_add(struct heap_live *hl, int64_t bucket_start, uint64_t bytes, uint64_t count,
		  uint64_t total_lifetime_ns, unsigned col, int top)
{
	if (!count || !bytes)
		return 0;
	if (ARRAY_GROW(hl->v, hl->cap, hl->n, 1024) < 0)
		return -ENOMEM;
	hl->v[hl->n++] = (struct heap_live_row){ .end_ns = bucket_start + hl->bucket_ns / 2,
		.bytes = bytes, .life_ns = total_lifetime_ns / count, .col = col, .top = top };
	return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

/* Bytes x ns of one row over bar k, divided by the bar's width: its average there. */
static void spread(const struct heap_live_row *r, int64_t t0, int64_t w, size_t nb,
		   double *cols, double *top)
{
	int64_t s = r->end_ns - (int64_t)r->life_ns, e = r->end_ns;

	if (e <= s)
		return;
	for (int64_t k = floor_div(s - t0, w); k <= floor_div(e - 1 - t0, w); k++) {
		int64_t lo = t0 + k * w, hi = lo + w;
		double v = (double)r->bytes * (double)((e < hi ? e : hi) - (s > lo ? s : lo)) /
			   (double)w;

		if (k < 0 || (size_t)k >= nb)
			continue;
		cols[(size_t)k * HEAP_LIVE_COLUMNS + r->col] += v;
		if (r->top >= 0)
			top[(size_t)r->top * nb + (size_t)k] += v;
	}
}

int heap_live_write(const struct heap_live *hl, FILE *bars, FILE *const top[HEAP_LIVE_TOP],
		    int64_t *width_ns)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN, b = hl->bucket_ns, w, t0;
	size_t nb;

	*width_ns = b;
	if (!hl->n || b <= 0)
		return 0;
	for (size_t i = 0; i < hl->n; i++) {
		const struct heap_live_row *r = &hl->v[i];
		int64_t s = r->end_ns - (int64_t)r->life_ns;

		lo = s < lo ? s : lo;
		hi = r->end_ns + b / 2 > hi ? r->end_ns + b / 2 : hi;
	}
	/* Bars line up with the store's buckets; wider ones (a whole number of buckets) when
	 * the lifetimes reach back further than HEAP_LIVE_MAX_BUCKETS of them. */
	uint64_t span = (uint64_t)(hi - lo) / (uint64_t)b + 2;

	w = b * (int64_t)((span + HEAP_LIVE_MAX_BUCKETS - 1) / HEAP_LIVE_MAX_BUCKETS);
	t0 = hi - w * floor_div(hi - lo + w - 1, w);
	nb = (size_t)((hi - t0) / w);
	*width_ns = w;

	double *cols = calloc(nb * HEAP_LIVE_COLUMNS, sizeof(*cols));
	double *tv = calloc(nb * HEAP_LIVE_TOP, sizeof(*tv));

	if (!cols || !tv) {
		free(cols);
		free(tv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < hl->n; i++)
		spread(&hl->v[i], t0, w, nb, cols, tv);
	bool first = true;

	for (size_t k = 0; k < nb; k++) {
		const double *c = &cols[k * HEAP_LIVE_COLUMNS];

		if (c[0] + c[1] + c[2] < 0.5)
			continue;
		fprintf(bars, "%s[%" PRId64 ",%.0f,%.0f,%.0f]", first ? "" : ",\n",
			t0 + (int64_t)k * w, c[0], c[1], c[2]);
		first = false;
	}
	for (int i = 0; i < HEAP_LIVE_TOP; i++) {
		const double *v = &tv[(size_t)i * nb];
		size_t a = 0, z = nb;

		while (a < nb && v[a] < 0.5)
			a++;
		while (z > a && v[z - 1] < 0.5)
			z--;
		for (size_t k = a; top[i] && k < z; k++)
			fprintf(top[i], "%s[%" PRId64 ",%.0f]", k == a ? "" : ",",
				t0 + (int64_t)k * w, v[k]);
	}
	free(cols);
	free(tv);
	return 0;
}

void heap_live_free(struct heap_live *hl)
{
	free(hl->v);
	*hl = (struct heap_live){ 0 };
}
