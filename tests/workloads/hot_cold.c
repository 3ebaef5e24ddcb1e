/* hot_cold: known data-access behaviour for the access sources. A hot and a cold global
 * array (.bss), a hot and a cold heap buffer from two allocation contexts (alloc_hot,
 * alloc_cold), and a hot TLS counter. The hot objects are read and written in a loop
 * for --seconds; the cold ones are touched once at start. Prints the addresses as JSON
 * on stdout so a checker can match them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORDS (64 * 1024)              /* 512 KiB per array and buffer */

uint64_t hot_global[WORDS];
uint64_t cold_global[WORDS];
__thread uint64_t hot_tls;

__attribute__((noinline)) uint64_t *alloc_hot(void)
{
	uint64_t *p = malloc(WORDS * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) uint64_t *alloc_cold(void)
{
	uint64_t *p = malloc(WORDS * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t hot_pass(volatile uint64_t *g, volatile uint64_t *h)
{
	uint64_t sum = 0;

	/* A load of each hot object, each followed by register-only work: a timer sample
	 * lands just after the instruction that stalled (loads stall, buffered stores
	 * rarely do), and the soft source charges a register-only IP to the instruction
	 * before it, so each load gets its own share instead of the next load's. */
	for (size_t i = 0; i < WORDS; i += 8) {
		uint64_t a = g[i], b;
		__asm__ volatile("imul $3, %0, %0\n\tadd $1, %0" : "+r"(a));
		b = h[i];
		__asm__ volatile("imul $5, %0, %0\n\tadd $7, %0" : "+r"(b));
		sum += a ^ b;
		h[i] = sum;
		hot_tls++;
	}
	return sum;
}

int main(int argc, char **argv)
{
	double seconds = 3.0, end;
	uint64_t *hot, *cold, sum = 0;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
	hot = alloc_hot();
	cold = alloc_cold();
	if (!hot || !cold)
		return 1;
	memset(hot, 1, WORDS * sizeof(uint64_t));
	memset(cold, 2, WORDS * sizeof(uint64_t));   /* the only touches of the cold buffer */
	cold_global[0] = 3;
	printf("{\"hot_heap\": \"%p\", \"cold_heap\": \"%p\", \"hot_global\": \"%p\", "
	       "\"cold_global\": \"%p\", \"hot_tls\": \"%p\", \"size\": %zu}\n", (void *)hot,
	       (void *)cold, (void *)hot_global, (void *)cold_global, (void *)&hot_tls,
	       WORDS * sizeof(uint64_t));
	fflush(stdout);
	end = now_s() + seconds;
	while (now_s() < end)
		for (int k = 0; k < 16; k++)
			sum += hot_pass(hot_global, hot);
	free(hot);
	free(cold);
	return sum == 42 ? 2 : 0;
}
