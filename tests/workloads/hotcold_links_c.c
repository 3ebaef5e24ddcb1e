/* The C side of hotcold_links: malloc/calloc/realloc/free from glibc (never from
 * libmemprofd_hotcold), interleaved with the C++ side's hinted allocations. */
#include <stdlib.h>
#include <string.h>

unsigned long c_side_churn(unsigned rounds)
{
	unsigned long sum = 0;

	for (unsigned i = 0; i < rounds; i++) {
		char *a = malloc(48 + i), *b = calloc(3, 1000);
		if (!a || !b)
			abort();
		memset(a, 'a', 48 + i);
		a = realloc(a, 5000);
		if (!a)
			abort();
		sum += (unsigned char)a[0] + (unsigned char)b[2999];
		free(a);
		free(b);
	}
	return sum;
}
