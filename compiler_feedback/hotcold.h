/* libmemprofd_hotcold: the __hot_cold_t operator new overloads clang emits with
 * -mllvm -optimize-hot-cold-new (and -supports-hot-cold-new at the LTO link), and every
 * other global operator new/delete form, on jemalloc; malloc/free stay the process's.
 * Link it any way (`pkg-config --libs memprofd-hotcold`, the .so, -lmemprofd_hotcold,
 * with or without -ljemalloc in either order, or the static archive with
 * `pkg-config --static`): hinted memory is always freed by the allocator that gave it.
 * If another object's operator delete wins symbol lookup (libstdc++ linked ahead, a
 * preloaded allocator), hints are ignored and memprofd_hotcold_stats() says why. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Hints below this go to the cold arena (clang passes 1 for cold). */
#define HOTCOLD_COLD_BELOW 128
/* Hints at or above this go to the hot arena (clang passes 254 for hot; 222, ambiguous,
 * and 128, notcold, stay in jemalloc's automatic arenas). */
#define HOTCOLD_HOT_FROM 240

struct memprofd_hotcold_stats {
	unsigned hints_active;                /* 1: hints place objects in the arenas */
	const char *reason;                   /* why not ("" when active) */
	const char *delete_owner;             /* object whose operator delete the process uses */
	unsigned cold_arena, hot_arena;       /* jemalloc arena indexes */
	uint64_t cold_calls, cold_bytes;      /* requested through cold hints */
	uint64_t hot_calls, hot_bytes;
	uint64_t other_calls, other_bytes;
	uint64_t cold_allocated, hot_allocated; /* jemalloc stats.arenas.<i>.{small,large}
						 * .allocated now (0 without stats) */
};
/* Fills st (creating the arenas if no hinted allocation did yet); 0, or -ENOTSUP when
 * hints are ignored (st->reason). */
int memprofd_hotcold_stats(struct memprofd_hotcold_stats *st);
/* One line per arena, "memprofd_hotcold: cold arena 3: ...", to out. */
void memprofd_hotcold_print_stats(FILE *out);

#ifdef __cplusplus
}
#endif
