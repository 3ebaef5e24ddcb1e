/* libFuzzer target: the /proc/PID/maps parser and lookups on its result. */
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct maps m = { 0 };
	unsigned bad = 0;

	if (maps_parse(&m, (const char *)data, size, &bad) == 0) {
		for (size_t i = 0; i < m.n; i++) {
			maps_find(&m, m.v[i].start);
			maps_find(&m, m.v[i].end - 1);
		}
		maps_find(&m, 0);
		maps_find(&m, UINT64_MAX);
		maps_free(&m);
	}
	return 0;
}
