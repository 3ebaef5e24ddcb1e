/* access_cost: the user-space cost of one soft access sample in the recorder, on
 * synthetic ring records of this process itself: decode (src_soft_handle, instruction
 * bytes from the mapped file, then the decode cache) and attribution (attrib_sample with
 * the recorder's own region and data-symbol resolver, daemon/attrib/addrspace.c, over 10,000
 * live tracked objects and the allocation watermark of the sampled mode). The records
 * mix heap-object loads, heap misses, static data, stack, TLS and a register-only IP
 * whose access is the instruction before it (timer skid), in the proportions below.
 * --phase picks what the measured loop does per record:
 *   copy    copy the record only (the baseline: what reading it from the ring costs)
 *   decode  decode it, the access callback does nothing
 *   attrib  attribution of the already decoded accesses only
 *   all     decode + attribution, as the recorder does
 * Under valgrind --tool=callgrind --instr-atstart=no only the measured loop is counted
 * (bench/access_cost.py divides by --samples); natively it prints ns/sample. Exits 1 if
 * the accesses were not attributed to the classes the records were built for. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>
#include "daemon/attrib/addrspace.h"
#include "daemon/attrib/attrib.h"
#include "daemon/alloc/intern.h"
#include "daemon/access/src_soft.h"

#define NRECORDS 4096            /* distinct records, replayed in a cycle */
#define NOBJECTS 10000           /* live tracked heap objects */
#define ADVANCE_EVERY 64         /* samples between watermark updates (a ring drain) */

/* The sampled instructions: a load through rdi, a TLS load, a stack load, and a
 * register-only instruction right after a load (its access is the load's). */
void bench_load(void);
void bench_tls(void);
void bench_stack(void);
void bench_skid(void);
void bench_skid_ip(void);
__asm__(".text\n"
	".globl bench_load\n.type bench_load,@function\nbench_load:\n"
	"movl (%rdi), %eax\nret\n.size bench_load, .-bench_load\n"
	".globl bench_tls\n.type bench_tls,@function\nbench_tls:\n"
	"movq %fs:16, %rax\nret\n.size bench_tls, .-bench_tls\n"
	".globl bench_stack\n.type bench_stack,@function\nbench_stack:\n"
	"movq 8(%rsp), %rax\nret\n.size bench_stack, .-bench_stack\n"
	".globl bench_skid\n.type bench_skid,@function\nbench_skid:\n"
	"movq (%rdi), %rax\n.globl bench_skid_ip\nbench_skid_ip:\n"
	"imul $3, %rax, %rax\nret\n.size bench_skid, .-bench_skid\n");

uint64_t bench_global[8192];

enum kind { K_HEAP, K_HEAP_MISS, K_STATIC, K_STACK, K_TLS, K_SKID, K_MAX };
static const unsigned mix[K_MAX] = { 40, 15, 15, 10, 10, 10 };   /* percent */
static const char *const kind_name[K_MAX] = { "heap", "heap miss", "static", "stack", "tls",
					       "skid" };

struct bench {
	struct interner in;
	struct proctab procs;
	struct addrspace *as;
	struct attrib *attrib;
	struct src_soft *soft;
	struct access_sample *decoded;   /* phase attrib: the accesses, decoded beforehand */
	size_t ndecoded, decoded_cap;
	bool collect, attribute;
	uint64_t settled, delivered;
};

static void on_object(void *arg, const struct attrib_object *o)
{
	(void)o;
	((struct bench *)arg)->settled++;
}

static void on_access(void *arg, const struct access_sample *s)
{
	struct bench *b = arg;

	b->delivered++;
	if (b->collect) {
		if (b->ndecoded == b->decoded_cap) {
			size_t nc = b->decoded_cap ? b->decoded_cap * 2 : 1024;
			struct access_sample *nv = realloc(b->decoded, nc * sizeof(*nv));
			if (!nv)
				abort();
			b->decoded = nv;
			b->decoded_cap = nc;
		}
		b->decoded[b->ndecoded++] = *s;
	}
	if (b->attribute)
		attrib_sample(b->attrib, s);
}

/* As daemon/access/access.c's: the recorder's resolver behind attrib's callbacks. */
static void op_region(void *arg, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t sp,
		      struct attrib_region *out)
{
	addrspace_region(((struct bench *)arg)->as, tgid, start_ns, addr, sp, out);
}

static int op_datasym(void *arg, const struct attrib_region *r, uint64_t addr,
		      struct attrib_datasym *out)
{
	return addrspace_datasym(((struct bench *)arg)->as, r, addr, out);
}

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

#define REG(e, r) (e)->regs[offsetof(struct insn_regs, r) / 8]

int main(int argc, char **argv)
{
	static struct soft_event rec[NRECORDS], copy;
	static enum kind kinds[NRECORDS];
	static void *objs[NOBJECTS], *misses[NOBJECTS];
	struct bench b = { 0 };
	const char *phase = "all";
	unsigned long samples = 200000;
	uint32_t pid = (uint32_t)getpid();
	uint64_t t, sink = 0;
	int local[64];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--phase"))
			phase = argv[i + 1];
		else if (!strcmp(argv[i], "--samples"))
			samples = strtoul(argv[i + 1], NULL, 10);
	}
	bool ph_copy = !strcmp(phase, "copy"), ph_decode = !strcmp(phase, "decode");
	bool ph_attrib = !strcmp(phase, "attrib"), ph_all = !strcmp(phase, "all");
	if (!(ph_copy || ph_decode || ph_attrib || ph_all) || !samples) {
		fprintf(stderr, "usage: access_cost [--phase copy|decode|attrib|all] [--samples N]\n");
		return 2;
	}

	b.procs.in = &b.in;
	if (!proc_get(&b.procs, pid, 1) || addrspace_open(&b.as, &b.procs) ||
	    src_soft_open_offline(&b.soft, on_access, &b)) {
		fprintf(stderr, "access_cost: set-up failed\n");
		return 1;
	}
	struct attrib_ops ops = { .region = op_region, .datasym = op_datasym, .object = on_object,
				  .arg = &b, .objects_sampled = true };
	if (attrib_open(&b.attrib, &ops)) {
		fprintf(stderr, "access_cost: set-up failed\n");
		return 1;
	}
	attrib_alloc_watermark(b.attrib, 0);
	for (size_t i = 0; i < NOBJECTS; i++) {
		size_t size = 16 + rnd() % 4080;
		objs[i] = malloc(size);
		misses[i] = malloc(64);          /* heap, but in no tracked object */
		if (!objs[i] || !misses[i])
			return 1;
		if (attrib_alloc(b.attrib, pid, 1, (uintptr_t)objs[i], size, &b, 1, 0,
				 ATTRIB_WEIGHT_ONE))
			return 1;
	}

	for (size_t i = 0; i < NRECORDS; i++) {
		struct soft_event *e = &rec[i];
		unsigned r = (unsigned)(rnd() % 100), acc = 0;
		enum kind k = K_HEAP;
		for (k = 0; k < K_MAX - 1; k++) {
			acc += mix[k];
			if (r < acc)
				break;
		}
		kinds[i] = k;
		e->tgid = e->tid = pid;
		e->start_ns = 1;
		e->period = 1000000;
		e->flags = SOFT_F_FSBASE;
		e->fs_base = (uintptr_t)&local[32];
		REG(e, rsp) = (uintptr_t)&local[0];
		REG(e, rip) = (uintptr_t)bench_load;
		switch (k) {
		case K_HEAP:
			REG(e, rdi) = (uintptr_t)objs[rnd() % NOBJECTS] + 8;
			break;
		case K_HEAP_MISS:
			REG(e, rdi) = (uintptr_t)misses[rnd() % NOBJECTS] + 8;
			break;
		case K_STATIC:
			REG(e, rdi) = (uintptr_t)&bench_global[rnd() % 8192];
			break;
		case K_STACK:
			REG(e, rip) = (uintptr_t)bench_stack;
			break;
		case K_TLS:
			REG(e, rip) = (uintptr_t)bench_tls;
			break;
		default:
			REG(e, rip) = (uintptr_t)bench_skid_ip;
			REG(e, rdi) = (uintptr_t)objs[rnd() % NOBJECTS];
			break;
		}
	}

	/* Warm-up pass (fills the decode cache, the maps, the binary and symbol caches),
	 * which also checks where each kind of record was attributed. */
	uint64_t by_kind_class[K_MAX][ATTRIB_CLASS_MAX] = { { 0 } };
	t = 2;
	b.attribute = true;
	b.collect = ph_attrib;
	for (size_t i = 0; i < NRECORDS; i++) {
		struct attrib_counts before = *attrib_counts(b.attrib);
		rec[i].time_ns = t++;
		src_soft_handle(b.soft, &rec[i], sizeof(rec[i]));
		attrib_alloc_watermark(b.attrib, t);
		const struct attrib_counts *after = attrib_counts(b.attrib);
		for (int c = 0; c < ATTRIB_CLASS_MAX; c++)
			by_kind_class[kinds[i]][c] += after->by_class[c] - before.by_class[c];
	}
	b.collect = false;
	static const enum attrib_class want[K_MAX] = { ATTRIB_HEAP, ATTRIB_HEAP_UNSAMPLED,
		ATTRIB_STATIC, ATTRIB_STACK, ATTRIB_TLS, ATTRIB_HEAP };
	int bad = 0;
	for (int k = 0; k < K_MAX; k++) {
		uint64_t n = 0;
		for (int c = 0; c < ATTRIB_CLASS_MAX; c++)
			n += by_kind_class[k][c];
		if (!n || by_kind_class[k][want[k]] * 10 < n * 9) {
			/* Under valgrind the brk heap is no [heap] mapping: it follows the
			 * executable's .bss, so a miss there resolves as static data. */
			bool valgrind_heap = RUNNING_ON_VALGRIND && k == K_HEAP_MISS;
			if (!valgrind_heap) {
				fprintf(stderr, "access_cost: %s records: %llu of %llu in class %s\n",
					kind_name[k], (unsigned long long)by_kind_class[k][want[k]],
					(unsigned long long)n, attrib_class_name(want[k]));
				bad = 1;
			}
		}
	}

	/* The measured loop. */
	b.attribute = ph_all;
	size_t nd = b.ndecoded;
	uint64_t t0 = now_ns();
	CALLGRIND_START_INSTRUMENTATION;
	for (unsigned long i = 0; i < samples; i++) {
		if (ph_attrib) {
			struct access_sample *s = &b.decoded[i % nd];
			s->time_ns = t++;
			attrib_sample(b.attrib, s);
		} else {
			struct soft_event *e = &rec[i % NRECORDS];
			e->time_ns = t++;
			if (ph_copy) {
				memcpy(&copy, e, sizeof(copy));
				__asm__ volatile("" : : "r"(&copy) : "memory");
				sink += copy.regs[0];
			} else {
				src_soft_handle(b.soft, e, sizeof(*e));
			}
		}
		if (i % ADVANCE_EVERY == ADVANCE_EVERY - 1 && (ph_attrib || ph_all)) {
			attrib_advance(b.attrib, t);
			attrib_alloc_watermark(b.attrib, t);
		}
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	uint64_t t1 = now_ns();

	const struct attrib_counts *c = attrib_counts(b.attrib);
	printf("access_cost: phase %s, %lu samples, %.1f ns/sample (wall, this run), "
	       "attributed: heap %llu heap_unsampled %llu static %llu stack %llu tls %llu "
	       "anon %llu unknown %llu\n", phase, samples, (double)(t1 - t0) / (double)samples,
	       (unsigned long long)c->by_class[ATTRIB_HEAP],
	       (unsigned long long)c->by_class[ATTRIB_HEAP_UNSAMPLED],
	       (unsigned long long)c->by_class[ATTRIB_STATIC],
	       (unsigned long long)c->by_class[ATTRIB_STACK],
	       (unsigned long long)c->by_class[ATTRIB_TLS],
	       (unsigned long long)c->by_class[ATTRIB_ANON],
	       (unsigned long long)c->by_class[ATTRIB_UNKNOWN]);
	attrib_finish(b.attrib, t);
	attrib_close(b.attrib);
	src_soft_close(b.soft);
	addrspace_close(b.as);
	for (size_t i = 0; i < NOBJECTS; i++) {
		free(objs[i]);
		free(misses[i]);
	}
	free(b.decoded);
	proctab_free(&b.procs);
	interner_free(&b.in);
	return bad || sink == 42;
}
