/* short_copies: short-lived heap buffers filled by memcpy and freed within microseconds,
 * the hot and the cold site alternating so that each reuses the other's address (same
 * size, same malloc bin). Two patterns, each for --seconds / 2: "buf" (malloc, memcpy,
 * free from the program's own code) and "str" (std::string built by append, so the
 * allocation happens in libstdc++'s out-of-line _M_mutate, code without frame pointers
 * that uses %rbp as a plain register). A hot object is read HOT_PASSES times before it
 * dies; a cold one is only filled. Prints the exact accesses (8-byte words) per site. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <string>

#define OBJ_BYTES 4096        /* one object: a page, same tcache bin for both sites */
#define HOT_PASSES 64         /* reads of a hot object before its free */
#define CHECK_EVERY 16        /* iterations between clock reads */

static char src[OBJ_BYTES];
static volatile uint64_t sink;
static uint64_t words_hot_buf, words_cold_buf, words_hot_str, words_cold_str;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t read_words(const char *p, size_t n)
{
	uint64_t s = 0;

	for (int k = 0; k < HOT_PASSES; k++)
		for (size_t i = 0; i + 8 <= n; i += 8) {
			uint64_t w;
			memcpy(&w, p + i, 8);
			s += w;
		}
	return s;
}

__attribute__((noinline)) void hot_buf(void)
{
	char *b = (char *)malloc(OBJ_BYTES);

	memcpy(b, src, OBJ_BYTES);
	sink += read_words(b, OBJ_BYTES);
	free(b);
	words_hot_buf += OBJ_BYTES / 8 * (1 + HOT_PASSES);
}

__attribute__((noinline)) void cold_buf(void)
{
	char *b = (char *)malloc(OBJ_BYTES);

	memcpy(b, src, OBJ_BYTES);
	sink += (unsigned char)b[OBJ_BYTES / 2];
	free(b);
	words_cold_buf += OBJ_BYTES / 8 + 1;
}

/* append past the local buffer: libstdc++'s _M_mutate allocates and copies. */
__attribute__((noinline)) void hot_str(void)
{
	std::string s;

	s.append(src, OBJ_BYTES - 1);
	sink += read_words(s.data(), OBJ_BYTES - 1);
	words_hot_str += OBJ_BYTES / 8 * (1 + HOT_PASSES);
}

__attribute__((noinline)) void cold_str(void)
{
	std::string s;

	s.append(src, OBJ_BYTES - 1);
	sink += (unsigned char)s[OBJ_BYTES / 2];
	words_cold_str += OBJ_BYTES / 8 + 1;
}

static void run(void (*hot)(void), void (*cold)(void), double seconds)
{
	double end = now_s() + seconds;

	do {
		for (int i = 0; i < CHECK_EVERY; i++) {
			hot();
			cold();
		}
	} while (now_s() < end);
}

int main(int argc, char **argv)
{
	double seconds = 4;

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
	memset(src, 'x', sizeof(src));
	run(hot_buf, cold_buf, seconds / 2);
	run(hot_str, cold_str, seconds / 2);
	printf("hot_buf %llu cold_buf %llu hot_str %llu cold_str %llu\n",
	       (unsigned long long)words_hot_buf, (unsigned long long)words_cold_buf,
	       (unsigned long long)words_hot_str, (unsigned long long)words_cold_str);
	return 0;
}
