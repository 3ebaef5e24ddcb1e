// The eight __hot_cold_t operator new forms clang-19 can emit (TargetLibraryInfo.def: new
// and new[], each plain, nothrow, aligned, aligned+nothrow): a cold hint allocates from a
// dedicated jemalloc arena, a hot hint from another, the rest as plain new does. The
// arenas are created once, at the first hinted call, bypassing the tcache so that objects
// really come from them. At that call the runtime also checks which object's operator
// delete forms the process binds to: only when every one is this library's
// (hotcold_global.cc) or jemalloc's can they free arena memory; otherwise (libstdc++ or a
// preloaded allocator loaded ahead of this library) hints are ignored and each hinted
// form calls the process's own unhinted form, so memory never crosses allocators.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <new>

#include "compiler_feedback/hotcold.h"
#include "compiler_feedback/hotcold_alloc.h"

enum class __hot_cold_t : uint8_t {};

namespace {

using memprofd_hotcold::align_flags;
using memprofd_hotcold::alloc_loop;

// The 12 delete forms (Itanium mangling, size_t = unsigned long).
const char *const delete_syms[] = {
	"_ZdlPv", "_ZdaPv", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvm", "_ZdaPvm",
	"_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
	"_ZdaPvSt11align_val_tRKSt9nothrow_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
};

// The unhinted new forms, in the order of enum form, called when hints are ignored.
enum form { NEW, NEW_ARR, NEW_NT, NEW_ARR_NT, NEW_AL, NEW_ARR_AL, NEW_AL_NT, NEW_ARR_AL_NT, N_FORMS };
const char *const new_syms[N_FORMS] = {
	"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
	"_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
	"_ZnamSt11align_val_tRKSt9nothrow_t",
};

struct state {
	unsigned cold_arena, hot_arena;
	bool hints;                    // arenas made and every delete form can free them
	const char *reason;            // why not, for the stats
	const char *delete_owner;      // path of the object whose delete forms win
	void *winner[N_FORMS];         // the process's unhinted new forms
};
std::once_flag once;
state st;
std::atomic<uint64_t> n_cold, b_cold, n_hot, b_hot, n_other, b_other;

const void *object_of(const void *addr, const char **path)
{
	Dl_info info;

	if (!addr || !dladdr(addr, &info))
		return nullptr;
	if (path)
		*path = info.dli_fname;
	return info.dli_fbase;
}

// Whether every delete form the process binds to is this library's or jemalloc's.
bool deletes_free_jemalloc()
{
	const void *self = object_of(reinterpret_cast<const void *>(&memprofd_hotcold_stats), nullptr);
	const void *je = object_of(reinterpret_cast<const void *>(&mallocx), nullptr);

	for (const char *name : delete_syms) {
		const char *path = "(not found)";
		const void *obj = object_of(dlsym(RTLD_DEFAULT, name), &path);

		if (!obj || (obj != self && obj != je)) {
			st.delete_owner = path;
			return false;
		}
		st.delete_owner = path;
	}
	return true;
}

void init()
{
	size_t sz = sizeof(unsigned);

	for (int f = 0; f < N_FORMS; f++)
		st.winner[f] = dlsym(RTLD_DEFAULT, new_syms[f]);
	if (!deletes_free_jemalloc()) {
		st.reason = "operator delete is not libmemprofd_hotcold's or jemalloc's "
			    "(an object that defines it is loaded ahead of libmemprofd_hotcold)";
		return;
	}
	if (mallctl("arenas.create", &st.cold_arena, &sz, nullptr, 0) ||
	    (sz = sizeof(unsigned), mallctl("arenas.create", &st.hot_arena, &sz, nullptr, 0))) {
		st.reason = "jemalloc could not create the arenas";
		return;
	}
	st.hints = true;
	st.reason = "";
}

// mallocx flags for hint h; counts the call.
int hint_flags(uint8_t h, size_t size)
{
	if (h < HOTCOLD_COLD_BELOW) {
		n_cold.fetch_add(1, std::memory_order_relaxed);
		b_cold.fetch_add(size, std::memory_order_relaxed);
		return MALLOCX_ARENA(st.cold_arena) | MALLOCX_TCACHE_NONE;
	}
	if (h >= HOTCOLD_HOT_FROM) {
		n_hot.fetch_add(1, std::memory_order_relaxed);
		b_hot.fetch_add(size, std::memory_order_relaxed);
		return MALLOCX_ARENA(st.hot_arena) | MALLOCX_TCACHE_NONE;
	}
	n_other.fetch_add(1, std::memory_order_relaxed);
	b_other.fetch_add(size, std::memory_order_relaxed);
	return 0;
}

void *hinted(form f, size_t n, size_t align, __hot_cold_t h, bool nothrow)
{
	std::call_once(once, init);
	if (st.hints)
		return alloc_loop(n, hint_flags(static_cast<uint8_t>(h), n) | align_flags(align), nothrow);
	n_other.fetch_add(1, std::memory_order_relaxed);
	b_other.fetch_add(n, std::memory_order_relaxed);
	void *w = st.winner[f];
	std::align_val_t a = static_cast<std::align_val_t>(align);
	switch (f) {
	case NEW:
	case NEW_ARR:
		return reinterpret_cast<void *(*)(size_t)>(w)(n);
	case NEW_NT:
	case NEW_ARR_NT:
		return reinterpret_cast<void *(*)(size_t, const std::nothrow_t &)>(w)(n, std::nothrow);
	case NEW_AL:
	case NEW_ARR_AL:
		return reinterpret_cast<void *(*)(size_t, std::align_val_t)>(w)(n, a);
	default:
		return reinterpret_cast<void *(*)(size_t, std::align_val_t, const std::nothrow_t &)>(w)(
			n, a, std::nothrow);
	}
}

uint64_t arena_allocated(unsigned a)
{
	uint64_t epoch = 1, total = 0;
	size_t sz = sizeof(epoch);
	char name[64];

	mallctl("epoch", &epoch, &sz, &epoch, sz);
	for (const char *kind : { "small", "large" }) {
		size_t v = 0;

		sz = sizeof(v);
		snprintf(name, sizeof(name), "stats.arenas.%u.%s.allocated", a, kind);
		if (mallctl(name, &v, &sz, nullptr, 0) == 0)
			total += v;
	}
	return total;
}

} // namespace

void *operator new(size_t n, __hot_cold_t h) { return hinted(NEW, n, 0, h, false); }
void *operator new[](size_t n, __hot_cold_t h) { return hinted(NEW_ARR, n, 0, h, false); }
void *operator new(size_t n, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return hinted(NEW_NT, n, 0, h, true);
}
void *operator new[](size_t n, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return hinted(NEW_ARR_NT, n, 0, h, true);
}
void *operator new(size_t n, std::align_val_t a, __hot_cold_t h)
{
	return hinted(NEW_AL, n, static_cast<size_t>(a), h, false);
}
void *operator new[](size_t n, std::align_val_t a, __hot_cold_t h)
{
	return hinted(NEW_ARR_AL, n, static_cast<size_t>(a), h, false);
}
void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &, __hot_cold_t h) noexcept
{
	return hinted(NEW_AL_NT, n, static_cast<size_t>(a), h, true);
}
void *operator new[](size_t n, std::align_val_t a, const std::nothrow_t &,
		     __hot_cold_t h) noexcept
{
	return hinted(NEW_ARR_AL_NT, n, static_cast<size_t>(a), h, true);
}

extern "C" int memprofd_hotcold_stats(struct memprofd_hotcold_stats *out)
{
	std::call_once(once, init);
	*out = {};
	out->hints_active = st.hints;
	out->reason = st.reason;
	out->delete_owner = st.delete_owner;
	out->cold_arena = st.cold_arena;
	out->hot_arena = st.hot_arena;
	out->cold_calls = n_cold.load();
	out->cold_bytes = b_cold.load();
	out->hot_calls = n_hot.load();
	out->hot_bytes = b_hot.load();
	out->other_calls = n_other.load();
	out->other_bytes = b_other.load();
	if (st.hints) {
		out->cold_allocated = arena_allocated(st.cold_arena);
		out->hot_allocated = arena_allocated(st.hot_arena);
	}
	return st.hints ? 0 : -ENOTSUP;
}

extern "C" void memprofd_hotcold_print_stats(FILE *out)
{
	struct memprofd_hotcold_stats s;

	if (memprofd_hotcold_stats(&s) < 0)
		fprintf(out, "memprofd_hotcold: hints ignored: %s (operator delete from %s)\n",
			s.reason, s.delete_owner ? s.delete_owner : "?");
	else
		fprintf(out, "memprofd_hotcold: cold arena %u: calls=%llu requested=%llu allocated=%llu\n"
			"memprofd_hotcold: hot arena %u: calls=%llu requested=%llu allocated=%llu\n",
			s.cold_arena, (unsigned long long)s.cold_calls, (unsigned long long)s.cold_bytes,
			(unsigned long long)s.cold_allocated, s.hot_arena, (unsigned long long)s.hot_calls,
			(unsigned long long)s.hot_bytes, (unsigned long long)s.hot_allocated);
	fprintf(out, "memprofd_hotcold: other: calls=%llu requested=%llu\n",
		(unsigned long long)s.other_calls, (unsigned long long)s.other_bytes);
}
