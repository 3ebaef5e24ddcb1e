/* soft_stall (soft_stall.h): per block, the samples of each of its instructions. Invariant:
 * a slot holds one block's counts (another block hashing there starts it afresh), and
 * total is the sum of cnt[0..ninsns). Memory: SOFT_STALL_BLOCKS slots of ~110 bytes. */
#include <errno.h>
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
 * in after_read, or of all of them when fewer than SOFT_STALL_MIN_REF are not. */
static double median(const struct slot *s, unsigned n, uint64_t after_read)
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
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2.0;
}

double soft_stall_note(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns,
		       uint64_t after_read)
{
	struct slot *s;
	double f;

	if (!st || !block || ninsns < 2 || ninsns > SOFT_STALL_INSNS || pos >= ninsns)
		return 1.0;
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
	if (s->total < SOFT_STALL_MIN_SAMPLES || s->total < SOFT_STALL_MIN_PER_INSN * ninsns)
		return 1.0;
	f = ninsns * median(s, ninsns, after_read) / s->total;
	return f < SOFT_STALL_MIN_FACTOR ? SOFT_STALL_MIN_FACTOR : f > 1.0 ? 1.0 : f;
}
