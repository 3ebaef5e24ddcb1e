/* libmemprofd_hotcold: the __hot_cold_t operator new overloads clang emits with
 * -mllvm -optimize-hot-cold-new (and -supports-hot-cold-new at the LTO link), on
 * jemalloc. Link the program with -lmemprofd_hotcold -ljemalloc so that jemalloc's
 * malloc/free replace glibc's for the whole process: frees need no change. */
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
	unsigned cold_arena, hot_arena;       /* jemalloc arena indexes */
	uint64_t cold_calls, cold_bytes;      /* requested through cold hints */
	uint64_t hot_calls, hot_bytes;
	uint64_t other_calls, other_bytes;
	uint64_t cold_allocated, hot_allocated; /* jemalloc stats.arenas.<i>.{small,large}
						 * .allocated now (0 without stats) */
};
/* Fills st (creating the arenas if no hinted allocation did yet); 0 or -errno. */
int memprofd_hotcold_stats(struct memprofd_hotcold_stats *st);
/* One line per arena, "memprofd_hotcold: cold arena 3: ...", to out. */
void memprofd_hotcold_print_stats(FILE *out);

#ifdef __cplusplus
}
#endif
