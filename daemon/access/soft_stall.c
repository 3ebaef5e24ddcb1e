/* soft_stall (soft_stall.h): per block, the samples of each of its instructions. Invariant:
 * a slot holds one block's counts (another block hashing there starts it afresh), and
 * total is the sum of cnt[0..ninsns). Memory: SOFT_STALL_BLOCKS slots of ~110 bytes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "daemon/access/soft_stall.h"

struct slot {
	uint64_t block;
	uint32_t total;
	uint16_t cnt[SOFT_STALL_INSNS];
};

struct soft_stall {
	struct slot v[SOFT_STALL_BLOCKS];
};

int soft_stall_open(struct soft_stall **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void soft_stall_close(struct soft_stall *st)
{
	free(st);
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* The median count (the mean of the middle two) of the block's instructions that are not
 * in after_read, or of all of them when fewer than SOFT_STALL_MIN_REF are not; *nref: how
 * many instructions it was taken over. */
static double median(const struct slot *s, unsigned n, uint64_t after_read, unsigned *nref)
{
	uint16_t v[SOFT_STALL_INSNS];
	unsigned m = 0;

	for (unsigned i = 0; i < n; i++)
		if (!(after_read >> i & 1))
			v[m++] = s->cnt[i];
	if (m < SOFT_STALL_MIN_REF) {
		memcpy(v, s->cnt, n * sizeof(v[0]));
		m = n;
	}
	qsort(v, m, sizeof(v[0]), cmp_u16);
	*nref = m;
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2.0;
}

/* Counts a sample at pos of block; the block's slot, or NULL when out of range. */
static struct slot *note(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns)
{
	struct slot *s;

	if (!st || !block || ninsns < 2 || ninsns > SOFT_STALL_INSNS || pos >= ninsns)
		return NULL;
	s = &st->v[block & (SOFT_STALL_BLOCKS - 1)];
	if (s->block != block) {
		memset(s, 0, sizeof(*s));
		s->block = block;
	}
	if (s->total >= SOFT_STALL_AGE_AT) {
		s->total = 0;
		for (unsigned i = 0; i < ninsns; i++)
			s->total += s->cnt[i] /= 2;
	}
	s->cnt[pos]++;
	s->total++;
	return s;
}

static double clamp(double f)
{
	return f < SOFT_STALL_MIN_FACTOR ? SOFT_STALL_MIN_FACTOR : f > 1.0 ? 1.0 : f;
}

/* The relative standard error of a factor resting on ref samples (Poisson), 1 at most. */
static double ref_error(double ref)
{
	return ref > 1 ? 1 / sqrt(ref) : 1.0;
}

/* The median rule, or -1 while the block has too few samples for it. */
static double median_factor(const struct slot *s, unsigned ninsns, uint64_t after_read,
			    double *rel_err)
{
	unsigned nref;

	if (s->total < SOFT_STALL_MIN_SAMPLES || s->total < SOFT_STALL_MIN_PER_INSN * ninsns)
		return -1;
	double med = median(s, ninsns, after_read, &nref);
	if (rel_err)
		*rel_err = ref_error(med * nref);
	return clamp(ninsns * med / s->total);
}

double soft_stall_excess(const uint16_t *cnt, unsigned ninsns, uint64_t after_read,
			 double *rel_err)
{
	unsigned k = 0;
	double total = 0, after = 0;

	if (rel_err)
		*rel_err = 0;

	for (unsigned i = 0; i < ninsns; i++) {
		total += cnt[i];
		if (i < 64 && (after_read >> i & 1)) {
			after += cnt[i];
			k++;
		}
	}
	if (!k || k == ninsns)
		return 1.0;
	double other = total - after + SOFT_STALL_PRIOR * (ninsns - k);
	if (rel_err)
		*rel_err = ref_error(other);
	return clamp((double)ninsns / (ninsns - k) * other / (total + SOFT_STALL_PRIOR * ninsns));
}

double soft_stall_note(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns,
		       uint64_t after_read)
{
	struct slot *s = note(st, block, pos, ninsns);
	double f = s ? median_factor(s, ninsns, after_read, NULL) : -1;

	return f < 0 ? 1.0 : f;
}

double soft_stall_factor(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns,
			 uint64_t after_read, uint64_t after_unstrided, bool dep_load,
			 double *rel_err)
{
	struct slot *s = note(st, block, pos, ninsns);
	double f = s && dep_load ? median_factor(s, ninsns, after_read, rel_err) : -1;

	if (f < 0) {
		if (rel_err)
			*rel_err = 0;
		bool walk = ninsns < 64 ? after_unstrided & ((1ull << ninsns) - 1) : after_unstrided;
		f = s && walk ? soft_stall_excess(s->cnt, ninsns, after_read, rel_err) : 1.0;
	}
	if (rel_err && s)
		*rel_err *= sqrt((double)s->total);   /* one sample's share of the block's */
	return f;
}
