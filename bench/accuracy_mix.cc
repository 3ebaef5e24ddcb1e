// accuracy_mix: allocation contexts of known kinds for bench/accuracy.py, which profiles it
// with memprofd and with clang-19's own -fmemory-profile and compares the two:
//  - cold long-lived: alloc_cold_block (256 KiB blocks, one word per page written once,
//    kept to the end);
//  - hot short-lived: alloc_scratch (1 KiB arrays, each summed many times, then freed);
//  - ambiguous at a shared site: make_node, reached from node_for_cache (header written
//    once, kept: cold) and from node_for_work (hot, freed at once);
//  - heavy access to a few objects: alloc_heavy (four 4 KiB tables, long-lived, swept
//    four times every round);
//  - warm: alloc_msg (small strings built and read once per round, kept a few rounds).
// The work is fixed by the argument (rounds), not by time, so an instrumented build makes
// the same allocations and accesses as the normal one. Prints a checksum.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static const size_t kColdBytes = 256 << 10, kColdCount = 8;
static const size_t kScratchWords = 128;             // 1 KiB
static const size_t kNodeBytes = 2048, kCacheNodes = 64;
static const size_t kHeavyWords = 512, kHeavyCount = 4, kHeavySweeps = 4;   // 4 KiB each
static const size_t kMsgBytes = 96, kMsgKeep = 16;

#define NOINLINE __attribute__((noinline))

NOINLINE char *alloc_cold_block() { return static_cast<char *>(malloc(kColdBytes)); }
NOINLINE uint64_t *alloc_scratch() { return new uint64_t[kScratchWords]; }
NOINLINE char *make_node(size_t n) { return new char[n]; }
NOINLINE char *node_for_cache() { return make_node(kNodeBytes); }
NOINLINE char *node_for_work() { return make_node(kNodeBytes); }
NOINLINE uint64_t *alloc_heavy() { return static_cast<uint64_t *>(calloc(kHeavyWords, 8)); }
NOINLINE char *alloc_msg() { return static_cast<char *>(malloc(kMsgBytes)); }

NOINLINE static uint64_t use_scratch(uint64_t *p, int reps)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < kScratchWords; i++)
		p[i] = i * 7;
	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < kScratchWords; i++)
			sum += static_cast<volatile uint64_t *>(p)[i];
	return sum;
}

NOINLINE static uint64_t use_node(char *p, int reps)
{
	volatile char *q = p;
	uint64_t sum = 0;

	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < kNodeBytes; i += 16) {
			q[i] = static_cast<char>(i + r);
			sum += static_cast<unsigned char>(q[i]);
		}
	return sum;
}

NOINLINE static uint64_t sweep_heavy(uint64_t *t)
{
	volatile uint64_t *q = t;
	uint64_t sum = 0;

	for (size_t i = 0; i < kHeavyWords; i++) {
		q[i] = q[i] + i;
		sum += q[i];
	}
	return sum;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000;
	char *cold[kColdCount], *cache[kCacheNodes], *msgs[kMsgKeep] = {};
	uint64_t *heavy[kHeavyCount], sum = 0;

	// Cold objects are written once, sparsely (as a cache's or a pool's rarely used
	// parts are): their lifetime access density stays far below 0.05/byte/s either way.
	for (size_t i = 0; i < kColdCount; i++) {
		cold[i] = alloc_cold_block();
		for (size_t off = 0; off < kColdBytes; off += 4096)
			cold[i][off] = static_cast<char>(i + off);
	}
	for (size_t i = 0; i < kCacheNodes; i++) {
		cache[i] = node_for_cache();
		memset(cache[i], 1, 64);
	}
	for (size_t i = 0; i < kHeavyCount; i++)
		heavy[i] = alloc_heavy();

	for (long r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			uint64_t *s = alloc_scratch();

			sum += use_scratch(s, 200);
			delete[] s;
		}
		char *w = node_for_work();

		sum += use_node(w, 100);
		delete[] w;
		for (size_t i = 0; i < kHeavyCount; i++)
			for (size_t k = 0; k < kHeavySweeps; k++)
				sum += sweep_heavy(heavy[i]);
		char *&m = msgs[r % kMsgKeep];

		free(m);
		m = alloc_msg();
		snprintf(m, kMsgBytes, "round %ld sum %llu", r, static_cast<unsigned long long>(sum));
		sum += strlen(m);
	}
	for (size_t i = 0; i < kColdCount; i++)
		sum += static_cast<unsigned char>(cold[i][i * 4096]);
	printf("checksum %llu\n", static_cast<unsigned long long>(sum));
	for (char *m : msgs)
		free(m);
	for (uint64_t *h : heavy)
		free(h);
	for (char *c : cache)
		delete[] c;
	for (char *c : cold)
		free(c);
	return 0;
}
