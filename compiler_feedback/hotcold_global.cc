// The 20 replaceable global operator new/delete forms of libmemprofd_hotcold, on jemalloc's
// non-standard entry points (mallocx, dallocx, sdallocx: names only jemalloc defines, so
// they bind to it whatever the link order), so that memory from the __hot_cold_t forms and
// from plain new is freed by the allocator that gave it. malloc/free stay whoever the
// process has (glibc's); C code is untouched. Where this library's forms do not win
// symbol lookup (libstdc++ or a preloaded allocator ahead of it), hotcold.cc sees it and
// routes hinted allocations to the winner instead: no C++ memory crosses allocators.
#include <new>

#include "compiler_feedback/hotcold_alloc.h"

namespace memprofd_hotcold {

void *alloc_loop(size_t size, int flags, bool nothrow)
{
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
		if (!nothrow) {
			h();
			continue;
		}
		try {
			h();
		} catch (...) {
			return nullptr;
		}
	}
}

} // namespace memprofd_hotcold

namespace {

using memprofd_hotcold::align_flags;
using memprofd_hotcold::alloc_loop;

inline void release(void *p, int flags)
{
	if (p)
		dallocx(p, flags);
}

// sdallocx wants the size asked for (or anything up to the usable size) and the alignment
// flags of the allocation; a 0-byte request was allocated as 1.
inline void release_sized(void *p, size_t n, int flags)
{
	if (p)
		sdallocx(p, n ? n : 1, flags);
}

} // namespace

void *operator new(size_t n) { return alloc_loop(n, 0, false); }
void *operator new[](size_t n) { return alloc_loop(n, 0, false); }
void *operator new(size_t n, const std::nothrow_t &) noexcept { return alloc_loop(n, 0, true); }
void *operator new[](size_t n, const std::nothrow_t &) noexcept { return alloc_loop(n, 0, true); }
void *operator new(size_t n, std::align_val_t a)
{
	return alloc_loop(n, align_flags(static_cast<size_t>(a)), false);
}
void *operator new[](size_t n, std::align_val_t a)
{
	return alloc_loop(n, align_flags(static_cast<size_t>(a)), false);
}
void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
	return alloc_loop(n, align_flags(static_cast<size_t>(a)), true);
}
void *operator new[](size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
	return alloc_loop(n, align_flags(static_cast<size_t>(a)), true);
}

void operator delete(void *p) noexcept { release(p, 0); }
void operator delete[](void *p) noexcept { release(p, 0); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p, 0); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { release(p, 0); }
void operator delete(void *p, size_t n) noexcept { release_sized(p, n, 0); }
void operator delete[](void *p, size_t n) noexcept { release_sized(p, n, 0); }
void operator delete(void *p, std::align_val_t) noexcept { release(p, 0); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p, 0); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { release(p, 0); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept
{
	release(p, 0);
}
void operator delete(void *p, size_t n, std::align_val_t a) noexcept
{
	release_sized(p, n, align_flags(static_cast<size_t>(a)));
}
void operator delete[](void *p, size_t n, std::align_val_t a) noexcept
{
	release_sized(p, n, align_flags(static_cast<size_t>(a)));
}
