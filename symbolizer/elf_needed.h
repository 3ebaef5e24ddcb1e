/* Which libraries a binary names in its dynamic section (DT_NEEDED), read with libelf;
 * the file is hostile input: sizes are bounded, errors are negative errno. Costs one
 * ELF header and dynamic section read; no symbols are loaded. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ELF_NEEDED_MAX 1024    /* dynamic entries read at most */

/* Sets bit i of *mask when a DT_NEEDED entry starts with prefixes[i] (n <= 32). 0 (mask 0:
 * none, or a static binary), or -errno. */
int elf_needs(const char *path, const char *const *prefixes, size_t n, uint32_t *mask);
