/* PERF_RECORD_SAMPLE parser: walks the fields in the ABI order of linux/perf_event.h,
 * each read through a cursor that refuses to pass header.size. Values are copied with
 * memcpy so a record at any alignment is safe. */
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

static const void *skip(struct cur *c, uint64_t n)
{
	const void *at = c->p;

	if (c->bad || (uint64_t)(c->end - c->p) < n) {
		c->bad = true;
		return NULL;
	}
	c->p += n;
	return at;
}

static void get_regs(struct cur *c, uint64_t mask, uint64_t *abi, unsigned *n, uint64_t *regs)
{
	*abi = get64(c);
	*n = 0;
	if (c->bad || *abi == PERF_SAMPLE_REGS_ABI_NONE)
		return;
	for (unsigned i = 0; i < 64; i++)
		if (mask & (1ULL << i))
			regs[(*n)++] = get64(c);
}

int perf_sample_parse(const void *rec, size_t len, const struct perf_sample_layout *lay,
		      struct perf_sample *s)
{
	struct perf_event_header h;
	uint64_t t = lay->sample_type;
	struct cur c;

	memset(s, 0, sizeof(*s));
	if (t & ~(uint64_t)PERF_SAMPLE_PARSE_SUPPORTED)
		return -EOPNOTSUPP;
	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (h.type != PERF_RECORD_SAMPLE || h.size < sizeof(h) || h.size > len)
		return -EINVAL;
	c.p = (const unsigned char *)rec + sizeof(h);
	c.end = (const unsigned char *)rec + h.size;
	c.bad = false;
	s->misc = h.misc;

	if (t & PERF_SAMPLE_IDENTIFIER)
		s->id = get64(&c);
	if (t & PERF_SAMPLE_IP)
		s->ip = get64(&c);
	if (t & PERF_SAMPLE_TID)
		get32x2(&c, &s->pid, &s->tid);
	if (t & PERF_SAMPLE_TIME)
		s->time = get64(&c);
	if (t & PERF_SAMPLE_ADDR)
		s->addr = get64(&c);
	if (t & PERF_SAMPLE_ID)
		s->id = get64(&c);
	if (t & PERF_SAMPLE_STREAM_ID)
		s->stream_id = get64(&c);
	if (t & PERF_SAMPLE_CPU) {
		uint32_t res;
		get32x2(&c, &s->cpu, &res);
	}
	if (t & PERF_SAMPLE_PERIOD)
		s->period = get64(&c);
	if (t & PERF_SAMPLE_CALLCHAIN) {
		s->nr_callchain = get64(&c);
		if (s->nr_callchain > PERF_SAMPLE_MAX_CHAIN)
			return -EBADMSG;
		s->callchain = skip(&c, s->nr_callchain * 8);
	}
	if (t & PERF_SAMPLE_RAW) {
		uint32_t sz = 0;
		const void *p = skip(&c, 4);
		if (p)
			memcpy(&sz, p, 4);
		s->raw_size = sz;
		s->raw = skip(&c, sz);
	}
	if (t & PERF_SAMPLE_REGS_USER)
		get_regs(&c, lay->regs_user_mask, &s->regs_user_abi, &s->nregs_user, s->regs_user);
	if (t & PERF_SAMPLE_STACK_USER) {
		s->stack_size = get64(&c);
		s->stack = skip(&c, s->stack_size);
		if (s->stack_size)
			s->stack_dyn_size = get64(&c);
		if (s->stack_dyn_size > s->stack_size)
			return -EBADMSG;
	}
	if (t & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
		uint64_t w = get64(&c);
		if (t & PERF_SAMPLE_WEIGHT_STRUCT) {
			uint32_t v1;
			uint16_t v23[2];
			memcpy(&v1, &w, 4);
			memcpy(v23, (const char *)&w + 4, 4);
			s->weight = v1;
			s->weight_var2 = v23[0];
			s->weight_var3 = v23[1];
		} else {
			s->weight = w;
		}
	}
	if (t & PERF_SAMPLE_DATA_SRC)
		s->data_src = get64(&c);
	if (t & PERF_SAMPLE_TRANSACTION)
		s->transaction = get64(&c);
	if (t & PERF_SAMPLE_REGS_INTR)
		get_regs(&c, lay->regs_intr_mask, &s->regs_intr_abi, &s->nregs_intr, s->regs_intr);
	if (t & PERF_SAMPLE_PHYS_ADDR)
		s->phys_addr = get64(&c);
	if (t & PERF_SAMPLE_CGROUP)
		s->cgroup = get64(&c);
	if (t & PERF_SAMPLE_DATA_PAGE_SIZE)
		s->data_page_size = get64(&c);
	if (t & PERF_SAMPLE_CODE_PAGE_SIZE)
		s->code_page_size = get64(&c);
	if (t & PERF_SAMPLE_AUX) {
		s->aux_size = get64(&c);
		s->aux = skip(&c, s->aux_size);
	}
	if (c.bad || c.p != c.end)
		return -EBADMSG;   /* overran, or bytes the sample_type does not explain */
	return 0;
}

uint64_t perf_sample_chain(const struct perf_sample *s, uint64_t i)
{
	uint64_t v = 0;

	if (i < s->nr_callchain && s->callchain)
		memcpy(&v, s->callchain + i * 8, 8);
	return v;
}

unsigned perf_data_src_rw(uint64_t data_src)
{
	union perf_mem_data_src d = { .val = data_src };
	unsigned rw = 0;

	if (d.mem_op & PERF_MEM_OP_LOAD)
		rw |= 1;
	if (d.mem_op & PERF_MEM_OP_STORE)
		rw |= 2;
	return rw;
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
