/* access_patterns: the access patterns a timer-sampled profiler misattributes, one after
 * the other, each for --seconds / PATTERNS: a static and a heap load in one loop, a
 * pointer chase over a heap array of nodes, SIMD loads, libc string functions, rep
 * movs/stos, and pointers spilled to the stack. Every pattern has its own hot heap
 * buffer (allocated by hot_<pattern>) and a cold one (cold_<pattern>) written once at
 * allocation and never again, both live for the whole run. Built at -O1 and -O2.
 * --passes N runs each pattern N x CHECK_EVERY passes instead (a fixed amount of work,
 * for comparing estimates with valgrind's counts of the same run); --rep-passes N sets
 * rep's alone (a CPU with fast string ops copies 60 x 64 passes in ~15 ms). */
#include <emmintrin.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (256 * 1024)     /* each buffer: past L2, so its loads stall */
#define NODE_BYTES 64              /* one node per cache line */
#define PATTERNS 6
#define CHECK_EVERY 64             /* passes between clock reads */

uint64_t table[BUF_BYTES / 8];     /* the static half of pattern static_heap */

#define SITES(p) \
	__attribute__((noinline)) void *hot_##p(void) \
	{ void *b = malloc(BUF_BYTES); __asm__ volatile("" ::: "memory"); return b; } \
	__attribute__((noinline)) void *cold_##p(void) \
	{ void *b = malloc(BUF_BYTES); __asm__ volatile("" ::: "memory"); return b; }
SITES(static_heap)
SITES(chase)
SITES(simd)
SITES(string)
SITES(rep)
SITES(spill)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t pass_static_heap(const uint64_t *heap)
{
	uint64_t s = 0;

	for (size_t i = 0; i < BUF_BYTES / 8; i++)
		s += table[i] + heap[i];
	return s;
}

struct node { struct node *next; uint64_t pad[NODE_BYTES / 8 - 1]; };

/* A random cycle through the nodes, so the hardware prefetcher cannot follow it. */
static struct node *link_nodes(struct node *v, size_t n)
{
	size_t *perm = malloc(n * sizeof(*perm));

	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		v[perm[i]].next = &v[perm[(i + 1) % n]];
	free(perm);
	return v;
}

__attribute__((noinline)) static struct node *pass_chase(struct node *p)
{
	for (size_t i = 0; i < BUF_BYTES / NODE_BYTES; i++)
		p = p->next;
	return p;
}

__attribute__((noinline)) static uint64_t pass_simd(const __m128i *v)
{
	__m128i acc = _mm_setzero_si128();

	for (size_t i = 0; i < BUF_BYTES / 16; i++)
		acc = _mm_add_epi64(acc, _mm_loadu_si128(v + i));
	return (uint64_t)_mm_cvtsi128_si64(acc);
}

/* memcpy half the buffer onto the other half, compare them, measure a string in it. */
__attribute__((noinline)) static uint64_t pass_string(char *b)
{
	memcpy(b + BUF_BYTES / 2, b, BUF_BYTES / 2 - 1);
	b[BUF_BYTES - 1] = 0;
	return (uint64_t)memcmp(b, b + BUF_BYTES / 2, BUF_BYTES / 2 - 1) +
	       strlen(b + BUF_BYTES / 2);
}

__attribute__((noinline)) static uint64_t pass_rep(char *b)
{
	void *d = b + BUF_BYTES / 2, *s = b;
	size_t n = BUF_BYTES / 2;

	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	d = b;
	n = BUF_BYTES / 16;
	__asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0x0101010101010101ULL) : "memory");
	return (uint64_t)b[7];
}

/* The buffer's address lives in a stack slot and is reloaded for every load. */
__attribute__((noinline)) static uint64_t pass_spill(uint64_t *heap)
{
	uint64_t *volatile slot = heap;
	uint64_t s = 0;

	for (size_t i = 0; i < BUF_BYTES / 8; i++)
		s += slot[i];
	return s;
}

int main(int argc, char **argv)
{
	double seconds = 4.0;
	void *hot[PATTERNS], *cold[PATTERNS];
	void *(*const hot_site[PATTERNS])(void) = { hot_static_heap, hot_chase, hot_simd,
						     hot_string, hot_rep, hot_spill };
	void *(*const cold_site[PATTERNS])(void) = { cold_static_heap, cold_chase, cold_simd,
						      cold_string, cold_rep, cold_spill };
	uint64_t sum = 0;
	long passes = 0, rep_passes = -1;

	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--passes"))
			passes = atol(argv[++i]);
		else if (!strcmp(argv[i], "--rep-passes"))
			rep_passes = atol(argv[++i]);
	}
	/* The buffers come from heap pages faulted in beforehand (a block written and freed,
	 * below the mmap threshold and kept by the trim threshold), so a cold buffer's one
	 * write is that and no page faults: under this project's hypervisor a first-touch
	 * fault costs ~12 us outside the guest kernel, which a cpu-clock sample charges to
	 * the faulting store when the thread is back in user mode: a 256 KiB memset took
	 * ~780 us on fresh pages, ~16 us on these, and cold buffers got a sample of their
	 * memset in 5 of 8 runs, weighed as 1 ms of it: 1.4M accesses for 32768. Sanitizer
	 * allocators ignore mallopt and fault as before. */
	mallopt(M_MMAP_THRESHOLD, 4 * PATTERNS * BUF_BYTES);
	mallopt(M_TRIM_THRESHOLD, 8 * PATTERNS * BUF_BYTES);
	void *pre = malloc(3 * PATTERNS * BUF_BYTES);
	if (pre)   /* not 0, and kept: malloc + memset 0 + free folds into nothing */
		memset(pre, 4, 3 * PATTERNS * BUF_BYTES);
	__asm__ volatile("" : : "r"(pre) : "memory");
	free(pre);
	for (int k = 0; k < PATTERNS; k++) {
		hot[k] = hot_site[k]();
		cold[k] = cold_site[k]();
		if (!hot[k] || !cold[k])
			return 1;
		memset(hot[k], 1, BUF_BYTES);
		memset(cold[k], 2, BUF_BYTES);   /* the only touches of a cold buffer */
	}
	memset(table, 3, sizeof(table));
	struct node *p = link_nodes(hot[1], BUF_BYTES / NODE_BYTES);
	for (int k = 0; k < PATTERNS; k++) {
		double end = now_s() + seconds / PATTERNS;
		long left = k == 4 && rep_passes >= 0 ? rep_passes : passes;
		do {
			for (int r = 0; r < CHECK_EVERY; r++) {
				switch (k) {
				case 0: sum += pass_static_heap(hot[0]); break;
				case 1: p = pass_chase(p); break;
				case 2: sum += pass_simd(hot[2]); break;
				case 3: sum += pass_string(hot[3]); break;
				case 4: sum += pass_rep(hot[4]); break;
				case 5: sum += pass_spill(hot[5]); break;
				}
			}
		} while (passes ? --left > 0 : now_s() < end);   /* (--passes 0: timed) */
	}
	for (int k = 0; k < PATTERNS; k++) {
		free(hot[k]);
		free(cold[k]);
	}
	return sum == 42 && p ? 2 : 0;
}
