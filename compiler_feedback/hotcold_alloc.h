/* Internal to libmemprofd_hotcold: the one allocation loop every operator new of the
 * runtime goes through (jemalloc's mallocx with the given flags, std::new_handler retried,
 * nothrow or bad_alloc), and the mallocx flags of a C++ alignment. Not installed. */
#pragma once
#include <cstddef>

#include <jemalloc/jemalloc.h>

namespace memprofd_hotcold {

/* mallocx(size or 1, flags) until it succeeds, the new_handler gives up (nullptr when
 * nothrow, else std::bad_alloc), or no handler is installed. */
[[gnu::visibility("hidden")]] void *alloc_loop(size_t size, int flags, bool nothrow);

/* MALLOCX_ALIGN for a C++ alignment: always passed for the aligned forms (jemalloc gives
 * an 8-byte object only 8-byte alignment unless asked), 0 for the plain ones. */
inline int align_flags(size_t align)
{
	return align ? MALLOCX_ALIGN(align) : 0;
}

} // namespace memprofd_hotcold
