// Link-style workload for libmemprofd_hotcold (tests/integration/check_hotcold_link.py
// links it every way a user might): every __hot_cold_t new form with the hints clang
// emits, freed with plain, sized, aligned, sized+aligned and nothrow delete, interleaved
// with the C side's malloc/free and libstdc++ containers. Prints the runtime's stats and
// "hotcold_links: ok hints=H cold_live=B"; exits 1 on any wrong byte or alignment.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <hotcold.h>

enum class __hot_cold_t : uint8_t {};
void *operator new(size_t, __hot_cold_t);
void *operator new[](size_t, __hot_cold_t);
void *operator new(size_t, const std::nothrow_t &, __hot_cold_t) noexcept;
void *operator new[](size_t, const std::nothrow_t &, __hot_cold_t) noexcept;
void *operator new(size_t, std::align_val_t, __hot_cold_t);
void *operator new[](size_t, std::align_val_t, __hot_cold_t);
void *operator new(size_t, std::align_val_t, const std::nothrow_t &, __hot_cold_t) noexcept;
void *operator new[](size_t, std::align_val_t, const std::nothrow_t &, __hot_cold_t) noexcept;

extern "C" unsigned long c_side_churn(unsigned rounds);   // hotcold_links_c.c

static const uint8_t kHints[] = { 1, 128, 222, 254 };     // cold, notcold, ambiguous, hot
static const size_t kSizes[] = { 0, 8, 24, 100, 4096, 70000, 1 << 20 };
static int errors;

static void *fill(void *p, size_t n, size_t align, int tag)
{
	if (!p || (align && reinterpret_cast<uintptr_t>(p) % align)) {
		fprintf(stderr, "hotcold_links: bad pointer %p (size %zu align %zu)\n", p, n, align);
		errors++;
		return p;
	}
	memset(p, tag, n);
	return p;
}

static void check(const void *p, size_t n, int tag)
{
	const unsigned char *c = static_cast<const unsigned char *>(p);

	for (size_t i = 0; i < n; i += 511)
		if (c[i] != static_cast<unsigned char>(tag)) {
			fprintf(stderr, "hotcold_links: byte %zu of %p changed\n", i, p);
			errors++;
			return;
		}
}

// One round: each hinted form once per size, freed by the matching delete forms.
static void round_trip(__hot_cold_t h, size_t n, int tag)
{
	const std::align_val_t a64 = std::align_val_t(64), a16 = std::align_val_t(16);
	void *p[8];

	p[0] = fill(operator new(n, h), n, 0, tag);
	p[1] = fill(operator new[](n, h), n, 0, tag);
	p[2] = fill(operator new(n, std::nothrow, h), n, 0, tag);
	p[3] = fill(operator new[](n, std::nothrow, h), n, 0, tag);
	p[4] = fill(operator new(n, a64, h), n, 64, tag);
	p[5] = fill(operator new[](n, a16, h), n, 16, tag);
	p[6] = fill(operator new(n, a64, std::nothrow, h), n, 64, tag);
	p[7] = fill(operator new[](n, a64, std::nothrow, h), n, 64, tag);
	std::string s(n % 300 + 20, 'x');                    // libstdc++ allocates beside them
	char *c = static_cast<char *>(malloc(n + 1));       // and C code too
	memset(c, tag, n + 1);
	for (void *q : p)
		check(q, n, tag);
	operator delete(p[0]);                              // plain
	operator delete[](p[1], n);                         // sized
	operator delete(p[2], std::nothrow);                // nothrow
	operator delete[](p[3]);
	operator delete(p[4], n, a64);                      // sized + aligned
	operator delete[](p[5], a16);                       // aligned
	operator delete(p[6], a64, std::nothrow);           // aligned + nothrow
	operator delete[](p[7], n, a64);
	free(c);
}

int main(int argc, char **argv)
{
	unsigned rounds = argc > 1 ? static_cast<unsigned>(atoi(argv[1])) : 20;
	unsigned long csum = 0;
	std::vector<std::string> keep;

	// First what a -fmemory-profile-use build does: a cold new[] freed by a delete[]
	// expression (glibc's free aborted here, "free(): invalid pointer", before the runtime
	// defined every delete form).
	char *first = static_cast<char *>(fill(operator new[](1 << 20, __hot_cold_t(1)), 1 << 20, 0, 3));
	delete[] first;
	for (unsigned r = 0; r < rounds; r++)
		for (uint8_t h : kHints)
			for (size_t n : kSizes) {
				round_trip(static_cast<__hot_cold_t>(h), n, (r + h + n) & 0xff);
				keep.emplace_back(std::to_string(n) + std::string(40, 'k'));
				csum += c_side_churn(4);
			}
	// One cold MiB alive while the stats are read: it must sit in the cold arena.
	const size_t live = 1 << 20;
	char *cold = static_cast<char *>(fill(operator new[](live, __hot_cold_t(1)), live, 0, 7));
	struct memprofd_hotcold_stats st;
	int active = memprofd_hotcold_stats(&st) == 0;
	memprofd_hotcold_print_stats(stdout);
	check(cold, live, 7);
	delete[] cold;                                      // a delete expression, as compiled code does
	if (active && st.cold_allocated < live) {
		fprintf(stderr, "hotcold_links: cold arena holds %llu bytes, not the live MiB\n",
			(unsigned long long)st.cold_allocated);
		errors++;
	}
	printf("hotcold_links: %s hints=%d cold_live=%llu strings=%zu c=%lu\n",
	       errors ? "FAILED" : "ok", active, (unsigned long long)st.cold_allocated,
	       keep.size(), csum);
	return errors ? 1 : 0;
}
