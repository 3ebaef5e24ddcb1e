/* inline_sites: an allocation reached through an always_inline helper, so its context's
 * leaf address expands into an inline chain: helper (inlined into) site, then main.
 * The checker finds the expected lines by the markers in the comments. */
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) void *inl_helper(size_t n)
{
	return malloc(n);   /* MARK:helper-call */
}

__attribute__((noinline)) void *inl_site(size_t n)
{
	void *p = inl_helper(n);   /* MARK:site-call */
	return p;
}

int main(void)
{
	for (int i = 0; i < 25; i++)
		free(inl_site(96));   /* MARK:main-call */
	puts("inline_sites: done");
	return 0;
}
