/* watch_known: sampled heap objects of known access rates, for the watch source. N hot
 * objects (alloc_dense_hot) have every 8-byte granule read and written in a loop for
 * --seconds; N cold ones (alloc_idle_cold) are written once at start and never again.
 * Both are 64 KiB, live until exit, and come from two contexts, so with the sampler's
 * mean at or below 64 KiB they are sampled; at the default 512 KiB mean, N objects
 * give each context about N/8 samples. Prints the objects' first addresses as JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORDS (8 * 1024)              /* 64 KiB per object */
#define OBJECTS_MAX 64

__attribute__((noinline)) uint64_t *alloc_dense_hot(void)
{
	uint64_t *p = malloc(WORDS * sizeof(uint64_t));
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) uint64_t *alloc_idle_cold(void)
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

int main(int argc, char **argv)
{
	double seconds = 3.0;
	size_t n = 4;
	uint64_t *hot[OBJECTS_MAX], *cold[OBJECTS_MAX], sum = 0;

	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--objects"))
			n = strtoul(argv[++i], NULL, 10);
	}
	if (n < 1 || n > OBJECTS_MAX) {
		fprintf(stderr, "watch_known: --objects: 1..%d\n", OBJECTS_MAX);
		return 1;
	}
	for (size_t k = 0; k < n; k++) {
		hot[k] = alloc_dense_hot();
		cold[k] = alloc_idle_cold();
		if (!hot[k] || !cold[k])
			return 1;
		memset(hot[k], 1, WORDS * sizeof(uint64_t));
		memset(cold[k], 2, WORDS * sizeof(uint64_t));   /* the only touches of the cold */
	}
	printf("{\"hot\": \"%p\", \"cold\": \"%p\", \"size\": %zu, \"objects\": %zu}\n",
	       (void *)hot[0], (void *)cold[0], (size_t)WORDS * sizeof(uint64_t), n);
	fflush(stdout);
	double end = now_s() + seconds;

	while (now_s() < end)
		for (size_t k = 0; k < n; k++) {
			volatile uint64_t *h = hot[k];

			for (size_t i = 0; i < WORDS; i++)
				h[i] = h[i] + i;     /* every granule: a load and a store */
			sum += h[k];
		}
	for (size_t k = 0; k < n; k++) {
		free(hot[k]);
		free(cold[k]);
	}
	return sum == 42 ? 2 : 0;
}
