// End-to-end PGO workload (tests/integration/check_pgo.py builds it with clang++-19): one
// cold context (a 1 MiB buffer made once, never touched, alive for the whole run) and one
// hot context (4 KiB buffers, each hammered then freed), both through alloc_buf, the shared
// allocation wrapper that context disambiguation must clone. Prints a checksum that does
// not depend on the allocator, then libmemprofd_hotcold's arena stats when linked with it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" void memprofd_hotcold_print_stats(FILE *out) __attribute__((weak));

static const size_t kColdSize = 1 << 20;
static const size_t kHotSize = 4096;

__attribute__((noinline)) char *alloc_buf(size_t n) { return new char[n]; }
__attribute__((noinline)) char *make_cold() { return alloc_buf(kColdSize); }
__attribute__((noinline)) char *make_hot() { return alloc_buf(kHotSize); }

__attribute__((noinline)) static unsigned long hammer(volatile char *p, size_t n, int reps)
{
	unsigned long sum = 0;

	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < n; i += 8) {
			p[i] = (char)(i + r);
			sum += (unsigned char)p[i];
		}
	return sum;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0;
	char *cold = make_cold();
	unsigned long sum = 0;
	auto start = std::chrono::steady_clock::now();
	long rounds = 0;

	while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
	       seconds) {
		for (int k = 0; k < 50; k++) {
			char *hot = make_hot();

			sum += hammer(hot, kHotSize, 200);
			delete[] hot;
		}
		rounds++;
	}
	printf("checksum %lu\n", sum / (unsigned long)rounds);
	if (memprofd_hotcold_print_stats)
		memprofd_hotcold_print_stats(stdout);
	delete[] cold;
	return 0;
}
