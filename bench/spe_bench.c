/* User-space cost of the spe source per record: N SPE records shaped like a Neoverse
 * load's (op, PC, VA, PA, three latencies, events, data source, timestamp: 58 bytes)
 * with a context switch every 64 records, in an in-memory AUX area + data ring, drained
 * through src_spe (ring read, decode, task lookup, clock conversion) into a callback
 * that only counts. Run it under `valgrind --tool=callgrind` for instructions per record,
 * or alone for ns per record. Usage: spe_bench [--records N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "daemon/access/src_spe.h"

#define SWITCH_EVERY 64
#define REC_BYTES 58

static uint64_t delivered;

static void on_sample(void *arg, const struct access_sample *a)
{
	(void)arg;
	delivered += a->addr != 0;
}

static uint8_t *put(uint8_t *p, uint8_t hdr, uint64_t v, unsigned n)
{
	*p++ = hdr;
	for (unsigned i = 0; i < n; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 1;

	while (p < n)
		p *= 2;
	return p;
}

int main(int argc, char **argv)
{
	size_t n = 200000, psz = (size_t)sysconf(_SC_PAGESIZE);
	struct src_events ev;
	struct src_spe *s;
	struct perf_ring ring;
	struct timespec t0, t1;

	if (argc == 3 && !strcmp(argv[1], "--records"))
		n = strtoul(argv[2], NULL, 10);
	memset(&ev, 0, sizeof(ev));
	ev.n = 1;
	ev.ev[0].attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	ev.ev[0].est_per_sample = 4096;
	struct src_spe_opts o = { .events = &ev };
	if (src_spe_open_offline(&s, &o, on_sample, NULL) < 0)
		return 1;

	size_t aux_size = pow2_at_least(n * REC_BYTES), nsw = n / SWITCH_EVERY + 1;
	size_t dsz = pow2_at_least((nsw + 1) * 48 + 64);
	size_t len = (psz + dsz + psz - 1) / psz * psz;
	uint8_t *aux = calloc(1, aux_size), *mem = aligned_alloc(psz, len);
	if (!aux || !mem)
		return 1;
	memset(mem, 0, len);
	struct perf_event_mmap_page *pg = (void *)mem;
	pg->data_offset = psz;
	pg->cap_user_time_zero = 1;
	pg->time_mult = 1;
	uint8_t *a = aux, *d = mem + psz;
	for (size_t i = 0; i < n; i++) {
		uint64_t t = 1000 + i * 100;
		if (i % SWITCH_EVERY == 0) {        /* switch-in of task (1000 + k) at t - 1 */
			struct perf_event_header h = { PERF_RECORD_SWITCH_CPU_WIDE, 0, 8 + 8 + 24 };
			uint32_t pid = 1000 + (uint32_t)(i / SWITCH_EVERY), w[2] = { 1, 1 };
			uint64_t tt = t - 1;
			uint32_t id[2] = { pid, pid }, cpu[2] = { 0, 0 };
			memcpy(d, &h, 8); memcpy(d + 8, w, 8); memcpy(d + 16, id, 8);
			memcpy(d + 24, &tt, 8); memcpy(d + 32, cpu, 8);
			d += h.size;
		}
		a = put(a, 0x49, 0x00, 1);                             /* LD GP */
		a = put(a, 0xb0, (1ULL << 63) | (0x400000 + i * 4), 8); /* PC, EL0 */
		a = put(a, 0xb2, 0x7f0000000000ULL + i * 64, 8);        /* VA */
		a = put(a, 0xb3, 0x80000000ULL + i * 64, 8);            /* PA */
		a = put(a, 0x99, 5, 2);                                 /* issue latency */
		a = put(a, 0x9a, 9, 2);                                 /* translation latency */
		a = put(a, 0x42, 0x16, 1);                              /* events */
		a = put(a, 0x43, 0x00, 1);                              /* data source */
		a = put(a, 0x98, 40, 2);                                /* total latency */
		a = put(a, 0x71, t, 8);                                 /* timestamp */
	}
	size_t used = (size_t)(a - aux);
	struct perf_event_header h = { PERF_RECORD_AUX, 0, 8 + 24 + 24 };
	uint64_t b[3] = { 0, used, 0 };
	uint32_t id[2] = { 0, 0 }, cpu[2] = { 0, 0 };
	uint64_t tt = 1000 + n * 100;
	memcpy(d, &h, 8); memcpy(d + 8, b, 24); memcpy(d + 32, id, 8); memcpy(d + 40, &tt, 8);
	memcpy(d + 48, cpu, 8);
	d += h.size;
	pg->data_head = (uint64_t)(d - (mem + psz));
	pg->aux_head = used;
	if (perf_ring_init(&ring, mem, dsz, aux, aux_size) < 0 || src_spe_add_ring(s, 0, &ring) < 0)
		return 1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	src_spe_drain(s, true);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	char line[512];
	src_spe_summary(s, line, sizeof(line));
	printf("%s\n%zu records (%zu AUX bytes): %.1f ns per record\n", line, n, used, ns / (double)n);
	src_spe_close(s);
	free(aux);
	free(mem);
	return delivered == n ? 0 : 1;
}
