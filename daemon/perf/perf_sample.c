/* The sample_id trailer parser: reads the fields in the ABI order of linux/perf_event.h,
 * each through a cursor that refuses to pass header.size. Values are copied with memcpy
 * so a record at any alignment is safe. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include "daemon/perf/perf_sample.h"

struct cur {
	const unsigned char *p, *end;
	bool bad;
};

static uint64_t get64(struct cur *c)
{
	uint64_t v = 0;

	if (c->bad || (size_t)(c->end - c->p) < 8) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, 8);
	c->p += 8;
	return v;
}

static void get32x2(struct cur *c, uint32_t *a, uint32_t *b)
{
	uint64_t v = get64(c);
	uint32_t w[2];

	memcpy(w, &v, 8);
	*a = w[0];
	*b = w[1];
}

int perf_sample_id_parse(const void *rec, size_t len, uint64_t t, struct perf_sample_id *out)
{
	static const uint64_t bits[] = { PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID,
					 PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU,
					 PERF_SAMPLE_IDENTIFIER };
	struct perf_event_header h;
	size_t n = 0;
	struct cur c;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (h.size < sizeof(h) || h.size > len)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		n += (t & bits[i]) ? 8 : 0;
	if (h.size - sizeof(h) < n)
		return -EBADMSG;
	c.p = (const unsigned char *)rec + h.size - n;
	c.end = (const unsigned char *)rec + h.size;
	c.bad = false;
	if (t & PERF_SAMPLE_TID)
		get32x2(&c, &out->pid, &out->tid);
	if (t & PERF_SAMPLE_TIME)
		out->time = get64(&c);
	if (t & PERF_SAMPLE_ID)
		out->id = get64(&c);
	if (t & PERF_SAMPLE_STREAM_ID)
		out->stream_id = get64(&c);
	if (t & PERF_SAMPLE_CPU) {
		uint32_t res;
		get32x2(&c, &out->cpu, &res);
	}
	if (t & PERF_SAMPLE_IDENTIFIER)
		out->id = get64(&c);
	return c.bad ? -EBADMSG : 0;
}
