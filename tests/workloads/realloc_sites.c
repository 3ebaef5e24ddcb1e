/* One buffer allocated in alloc_site(), grown in grow_site(), shrunk in shrink_site() and
 * written after each: for tests/integration/check_realloc_split.py, which checks that
 * bench/realloc_split.c makes valgrind DHAT file each realloc's result under its own
 * stack, as memprofd and MemProf do. */
#include <stdlib.h>
#include <string.h>

#define FIRST_BYTES 100
#define GROWN_BYTES 4000
#define SHRUNK_BYTES 1000

__attribute__((noinline)) static char *alloc_site(size_t n) { return malloc(n); }
__attribute__((noinline)) static char *grow_site(char *p, size_t n) { return realloc(p, n); }
__attribute__((noinline)) static char *shrink_site(char *p, size_t n) { return realloc(p, n); }

int main(void)
{
	char *p = alloc_site(FIRST_BYTES);

	if (!p)
		return 1;
	memset(p, 1, FIRST_BYTES);
	if (!(p = grow_site(p, GROWN_BYTES)))
		return 1;
	memset(p, 2, GROWN_BYTES);
	if (!(p = shrink_site(p, SHRUNK_BYTES)))
		return 1;
	for (int i = 0; i < 10; i++) {         /* the shrunk block: the most written */
		memset(p, 3 + i, SHRUNK_BYTES);
		__asm__ volatile("" : : "r"(p) : "memory");   /* each pass is kept */
	}
	free(p);
	return 0;
}
