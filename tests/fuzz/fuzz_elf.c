/* libFuzzer target: ELF symbols, build-ids, data symbols and FDE starts (cfi_func) of an
 * arbitrary image. */
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/cfi_func.h"
#include "symbolizer/datasym.h"
#include "symbolizer/elfsym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elfsym *e = NULL;
	struct datasym *ds = NULL;
	char hex[2 * ELFSYM_BUILD_ID_MAX + 1];
	uint64_t off, delta, va;

	if (elfsym_open_mem(&e, data, size) == 0) {
		elfsym_build_id(e, hex, sizeof(hex));
		elfsym_func_offset(e, "main", &off);
		for (uint64_t a = 0; a < 0x4000; a += 0x33) {
			elfsym_lookup_offset(e, a, &delta);
			elfsym_offset_to_vaddr(e, a, &va);
		}
		elfsym_close(e);
	}
	struct cfi_func *cf = NULL;
	if (cfi_func_open_mem(&cf, data, size) == 0) {
		for (uint64_t a = 0; a < 0x8000; a += 0x37)
			cfi_func_start(cf, a, &off);
		cfi_func_close(cf);
	}
	if (datasym_open_mem(&ds, data, size) == 0) {
		struct datasym_hit h;
		for (uint64_t a = 0; a < 0x8000; a += 0x41) {
			datasym_lookup(ds, a, &h);
			datasym_lookup_tls(ds, a & 0xff, &h);
		}
		datasym_runtime_to_vaddr(ds, 0x1000, 0, 0x1234, &va);
		datasym_close(ds);
	}
	return 0;
}
