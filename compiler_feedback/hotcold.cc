// The eight __hot_cold_t operator new variants clang-19 can emit (TargetLibraryInfo.def:
// new and new[], each plain, nothrow, aligned, aligned+nothrow), on jemalloc: a cold hint
// allocates from a dedicated arena, a hot hint from another, anything else as usual.
// Both arenas are created once (arenas.create); the tcache is bypassed for them so that
// objects really come from their arena. Frees are jemalloc's ordinary free.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>

#include <jemalloc/jemalloc.h>

#include "compiler_feedback/hotcold.h"

enum class __hot_cold_t : uint8_t {};

namespace {

std::once_flag arenas_once;
unsigned cold_arena, hot_arena;
bool arenas_ok;
std::atomic<uint64_t> n_cold, b_cold, n_hot, b_hot, n_other, b_other;

void create_arenas()
{
	size_t sz = sizeof(unsigned);

	arenas_ok = mallctl("arenas.create", &cold_arena, &sz, nullptr, 0) == 0;
	sz = sizeof(unsigned);
	arenas_ok = arenas_ok && mallctl("arenas.create", &hot_arena, &sz, nullptr, 0) == 0;
}

// mallocx flags for hint h (0: jemalloc's automatic arena).
int hint_flags(uint8_t h, size_t size)
{
	std::call_once(arenas_once, create_arenas);
	if (h < HOTCOLD_COLD_BELOW && arenas_ok) {
		n_cold.fetch_add(1, std::memory_order_relaxed);
		b_cold.fetch_add(size, std::memory_order_relaxed);
		return MALLOCX_ARENA(cold_arena) | MALLOCX_TCACHE_NONE;
	}
	if (h >= HOTCOLD_HOT_FROM && arenas_ok) {
		n_hot.fetch_add(1, std::memory_order_relaxed);
		b_hot.fetch_add(size, std::memory_order_relaxed);
		return MALLOCX_ARENA(hot_arena) | MALLOCX_TCACHE_NONE;
	}
	n_other.fetch_add(1, std::memory_order_relaxed);
	b_other.fetch_add(size, std::memory_order_relaxed);
	return 0;
}

void *alloc(size_t size, size_t align, __hot_cold_t hint, bool nothrow)
{
	int flags = hint_flags(static_cast<uint8_t>(hint), size);

	if (align > alignof(std::max_align_t))
		flags |= MALLOCX_ALIGN(align);
	for (;;) {
		void *p = mallocx(size ? size : 1, flags);

		if (p)
			return p;
		std::new_handler h = std::get_new_handler();

		if (!h) {
			if (nothrow)
				return nullptr;
			throw std::bad_alloc();
		}
		if (nothrow) {
			try {
				h();
			} catch (...) {
				return nullptr;
			}
		} else {
			h();
		}
	}
}

uint64_t arena_allocated(unsigned a)
{
	uint64_t epoch = 1, small = 0, large = 0;
	size_t sz = sizeof(epoch);
	char name[64];

	mallctl("epoch", &epoch, &sz, &epoch, sz);
	snprintf(name, sizeof(name), "stats.arenas.%u.small.allocated", a);
	sz = sizeof(size_t);
	size_t v = 0;
	if (mallctl(name, &v, &sz, nullptr, 0) == 0)
		small = v;
	snprintf(name, sizeof(name), "stats.arenas.%u.large.allocated", a);
	sz = sizeof(size_t);
	v = 0;
	if (mallctl(name, &v, &sz, nullptr, 0) == 0)
		large = v;
	return small + large;
}

} // namespace

void *operator new(size_t n, __hot_cold_t h) { return alloc(n, 0, h, false); }
void *operator new[](size_t n, __hot_cold_t h) { return alloc(n, 0, h, false); }
void *operator new(size_t n, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return alloc(n, 0, h, true);
}
void *operator new[](size_t n, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return alloc(n, 0, h, true);
}
void *operator new(size_t n, std::align_val_t a, __hot_cold_t h)
{
	return alloc(n, static_cast<size_t>(a), h, false);
}
void *operator new[](size_t n, std::align_val_t a, __hot_cold_t h)
{
	return alloc(n, static_cast<size_t>(a), h, false);
}
void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return alloc(n, static_cast<size_t>(a), h, true);
}
void *operator new[](size_t n, std::align_val_t a, const std::nothrow_t &,
		     __hot_cold_t h) noexcept
{
	return alloc(n, static_cast<size_t>(a), h, true);
}

extern "C" int memprofd_hotcold_stats(struct memprofd_hotcold_stats *st)
{
	std::call_once(arenas_once, create_arenas);
	if (!arenas_ok)
		return -ENOMEM;
	*st = {};
	st->cold_arena = cold_arena;
	st->hot_arena = hot_arena;
	st->cold_calls = n_cold.load();
	st->cold_bytes = b_cold.load();
	st->hot_calls = n_hot.load();
	st->hot_bytes = b_hot.load();
	st->other_calls = n_other.load();
	st->other_bytes = b_other.load();
	st->cold_allocated = arena_allocated(cold_arena);
	st->hot_allocated = arena_allocated(hot_arena);
	return 0;
}

extern "C" void memprofd_hotcold_print_stats(FILE *out)
{
	struct memprofd_hotcold_stats st;

	if (memprofd_hotcold_stats(&st) < 0) {
		fprintf(out, "memprofd_hotcold: arenas could not be created\n");
		return;
	}
	fprintf(out, "memprofd_hotcold: cold arena %u: calls=%llu requested=%llu allocated=%llu\n",
		st.cold_arena, (unsigned long long)st.cold_calls,
		(unsigned long long)st.cold_bytes, (unsigned long long)st.cold_allocated);
	fprintf(out, "memprofd_hotcold: hot arena %u: calls=%llu requested=%llu allocated=%llu\n",
		st.hot_arena, (unsigned long long)st.hot_calls, (unsigned long long)st.hot_bytes,
		(unsigned long long)st.hot_allocated);
	fprintf(out, "memprofd_hotcold: other: calls=%llu requested=%llu\n",
		(unsigned long long)st.other_calls, (unsigned long long)st.other_bytes);
}
