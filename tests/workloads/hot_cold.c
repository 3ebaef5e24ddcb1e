/* hot_cold: known data-access behaviour for the access sources. A hot and a cold global
 * array (.bss), a hot and a cold heap buffer from two allocation contexts (alloc_hot,
 * alloc_cold), and a hot TLS counter. The hot objects are read and written in a loop
 * for --seconds; the cold ones are touched once at start. --pieces N allocates each heap
 * buffer as N separate objects of the same context (for the sampled allocation mode:
 * with a sampling mean near a piece's size, some pieces are sampled and stand for the
 * others). Prints the addresses as JSON on stdout so a checker can match them.
 * --wait-file PATH: allocates nothing until PATH exists (a daemon that discovers the
 * process at its exec attaches first). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORDS (64 * 1024)              /* 512 KiB per array and buffer */

uint64_t hot_global[WORDS];
uint64_t cold_global[WORDS];
__thread uint64_t hot_tls;

#define PIECES_MAX 64

__attribute__((noinline)) uint64_t *alloc_hot(size_t words)
{
	uint64_t *p = malloc(words * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) uint64_t *alloc_cold(size_t words)
{
	uint64_t *p = malloc(words * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t hot_pass(volatile uint64_t *g, volatile uint64_t *h,
						   size_t words)
{
	uint64_t sum = 0;

	/* A load of each hot object, each followed by register-only work: a timer sample
	 * lands just after the instruction that stalled (loads stall, buffered stores
	 * rarely do), and the soft source charges a register-only IP to the instruction
	 * before it, so each load gets its own share instead of the next load's. */
	for (size_t i = 0; i < words; i += 8) {
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
	uint64_t *hot[PIECES_MAX], *cold[PIECES_MAX], sum = 0;
	size_t pieces = 1, words;
	const char *wait_file = NULL;

	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--pieces"))
			pieces = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--wait-file"))
			wait_file = argv[++i];
	}
	for (int n = 0; wait_file && access(wait_file, F_OK) && n < 6000; n++)
		usleep(10000);
	if (pieces < 1 || pieces > PIECES_MAX || WORDS % (pieces * 8)) {
		fprintf(stderr, "hot_cold: --pieces: 1..%d dividing %d\n", PIECES_MAX, WORDS / 8);
		return 1;
	}
	words = WORDS / pieces;
	for (size_t k = 0; k < pieces; k++) {
		hot[k] = alloc_hot(words);
		cold[k] = alloc_cold(words);
		if (!hot[k] || !cold[k])
			return 1;
		memset(hot[k], 1, words * sizeof(uint64_t));
		memset(cold[k], 2, words * sizeof(uint64_t));   /* the only touches of the cold buffer */
	}
	cold_global[0] = 3;
	printf("{\"hot_heap\": \"%p\", \"cold_heap\": \"%p\", \"hot_global\": \"%p\", "
	       "\"cold_global\": \"%p\", \"hot_tls\": \"%p\", \"size\": %zu, \"pieces\": %zu}\n",
	       (void *)hot[0], (void *)cold[0], (void *)hot_global, (void *)cold_global,
	       (void *)&hot_tls, words * sizeof(uint64_t), pieces);
	fflush(stdout);
	end = now_s() + seconds;
	while (now_s() < end)
		for (int k = 0; k < 16; k++)
			for (size_t j = 0; j < pieces; j++)
				sum += hot_pass(hot_global + j * words, hot[j], words);
	for (size_t k = 0; k < pieces; k++) {
		free(hot[k]);
		free(cold[k]);
	}
	return sum == 42 ? 2 : 0;
}
