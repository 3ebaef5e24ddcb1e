/* hist_lines: a known AccessHistogram. alloc_lines() makes OBJECTS objects of
 * OBJ_BYTES (64 granules of 64 bytes each) that live for --seconds; only the first 64
 * bytes of each are read and written in the loop, the rest is never touched after
 * malloc. tests/integration/check_histogram.py builds it with clang-19 and the MemProf
 * seed's flags, records it with --alloc exact --access soft and expects nearly all of
 * the context's histogram in entry 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OBJECTS 8
#define OBJ_BYTES 4096
#define LINE_WORDS (64 / sizeof(uint64_t))

__attribute__((noinline)) uint64_t *alloc_lines(void)
{
	uint64_t *p = malloc(OBJ_BYTES);

	__asm__ volatile("" ::: "memory");
	return p;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each load is followed by register-only work, so a timer sample that lands after it
 * is charged to the load (the soft source's skid rule), never to a neighbour. */
__attribute__((noinline)) static uint64_t hammer_first_line(uint64_t **objs)
{
	uint64_t sum = 0;

	for (int o = 0; o < OBJECTS; o++) {
		volatile uint64_t *q = objs[o];

		for (unsigned i = 0; i < LINE_WORDS; i++) {
			uint64_t a = q[i];
			__asm__ volatile("imul $3, %0, %0\n\tadd $1, %0" : "+r"(a));
			q[i] = a;
			sum += a;
		}
	}
	return sum;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0, end;
	uint64_t *objs[OBJECTS], sum = 0;

	/* One call site, so one allocation context for all of them. */
#ifdef __clang__
#pragma clang loop unroll(disable)
#endif
	for (int o = 0; o < OBJECTS; o++) {
		objs[o] = alloc_lines();
		for (unsigned i = 0; i < LINE_WORDS; i++)
			objs[o][i] = i;
	}
	end = now_s() + seconds;
	while (now_s() < end)
		for (int k = 0; k < 1000; k++)
			sum += hammer_first_line(objs);
	for (int o = 0; o < OBJECTS; o++)
		free(objs[o]);
	printf("sum %llu\n", (unsigned long long)sum);
	return 0;
}
