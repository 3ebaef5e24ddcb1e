/* Allocator entry points inlined into a stack's leaf frame, dropped at read time (see
 * alloc_trim.h). Exact names only: a function that merely calls the allocator
 * (std::allocator<T>::allocate, xmalloc) is the program's own and stays. O(lines). */
#include <string.h>
#include "store/alloc_trim.h"

/* The C entry points the allocation probes trace (daemon/alloc/alloc_exact.c), with
 * glibc's internal prefixes stripped before the lookup. */
static const char *const alloc_trim_c_names[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc",
};
static const char *const alloc_trim_prefixes[] = { "__libc_", "__rtld_", "__GI___libc_", "__GI_" };

bool alloc_trim_is_entry(const char *name)
{
	if (!name || !*name)
		return false;
	/* operator new / new[] in every variant (nothrow, align_val_t): _Znwm..., _Znam... */
	if (!strncmp(name, "_Znwm", 5) || !strncmp(name, "_Znam", 5) ||
	    !strncmp(name, "_Znwj", 5) || !strncmp(name, "_Znaj", 5) ||
	    !strncmp(name, "operator new", 12))
		return true;
	for (size_t p = 0; p < sizeof(alloc_trim_prefixes) / sizeof(*alloc_trim_prefixes); p++) {
		size_t n = strlen(alloc_trim_prefixes[p]);

		if (!strncmp(name, alloc_trim_prefixes[p], n)) {
			name += n;
			break;
		}
	}
	for (size_t i = 0; i < sizeof(alloc_trim_c_names) / sizeof(*alloc_trim_c_names); i++)
		if (!strcmp(name, alloc_trim_c_names[i]))
			return true;
	return false;
}

void alloc_trim_leaf(struct store_frame *f)
{
	unsigned k = 0;

	while (k + 1 < f->nlines && f->lines[k].inlined &&
	       alloc_trim_is_entry(f->lines[k].mangled && *f->lines[k].mangled ?
				   f->lines[k].mangled : f->lines[k].function))
		k++;
	if (!k)
		return;   /* nothing trimmed (f->lines may be NULL: no offset on it) */
	f->lines += k;
	f->nlines -= k;
}
