/* libFuzzer target: the SPE record decoder on raw AUX bytes, and the perf ring reader on
 * a hostile mmap (page fields, data ring and AUX area all taken from the input) whose
 * AUX chunks go through the decoder, as src_spe.c drains a CPU's rings. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "daemon/perf/perf_aux.h"
#include "daemon/perf/perf_sample.h"
#include "daemon/access/spe_decode.h"

#define FUZZ_DATA 4096
#define FUZZ_AUX 1024

static void decode_all(const uint8_t *buf, size_t len, uint64_t off)
{
	struct spe_decoder d;
	struct spe_record r;

	spe_decoder_init(&d);
	spe_decoder_reset(&d, buf, len, off);
	while (spe_decoder_next(&d, &r) == 1)
		if (r.offset < off || r.offset >= off + len)
			abort();                  /* a record from outside its buffer */
}

static void on_record(void *arg, const struct perf_event_header *h, const void *rec)
{
	struct perf_sample_id id;

	(void)arg;
	perf_sample_id_parse(rec, h->size, PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			     PERF_SAMPLE_IDENTIFIER, &id);
}

static void on_aux(void *arg, const uint8_t *buf, size_t len, uint64_t off, uint64_t flags,
		   const struct perf_event_header *auxrec)
{
	(void)arg; (void)flags; (void)auxrec;
	if (len > FUZZ_AUX)
		abort();                          /* never more than the area */
	decode_all(buf, len, off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *mem;
	static uint8_t aux[FUZZ_AUX];
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_ring r;
	struct perf_ring_ops ops = { .record = on_record, .aux = on_aux };
	struct perf_event_mmap_page *pg;
	uint64_t v[4];

	decode_all(data, size, 0);
	if (size < sizeof(v))
		return 0;
	if (!mem && !(mem = aligned_alloc(psz, (psz + FUZZ_DATA + psz - 1) / psz * psz)))
		return 0;
	/* data_head, data_tail, aux_head, aux_tail from the input; then the data ring
	 * and the AUX area. */
	memcpy(v, data, sizeof(v));
	data += sizeof(v);
	size -= sizeof(v);
	memset(mem, 0, psz + FUZZ_DATA);
	memset(aux, 0, sizeof(aux));
	size_t n = size < FUZZ_DATA ? size : FUZZ_DATA;
	memcpy(mem + psz, data, n);
	if (size > n)
		memcpy(aux, data + n, size - n < FUZZ_AUX ? size - n : FUZZ_AUX);
	pg = (struct perf_event_mmap_page *)mem;
	pg->data_offset = psz;
	pg->data_size = FUZZ_DATA;
	pg->data_tail = v[1];
	pg->aux_tail = v[3];
	if (perf_ring_init(&r, mem, FUZZ_DATA, aux, FUZZ_AUX) < 0)
		return 0;
	pg->data_head = v[0];
	pg->aux_head = v[2];
	perf_ring_drain(&r, &ops);
	pg->aux_head = v[2] + (v[0] & 0xfff);      /* more AUX bytes without records */
	perf_ring_drain(&r, &ops);
	perf_ring_drain_final(&r, &ops);
	perf_ring_free(&r);
	return 0;
}
