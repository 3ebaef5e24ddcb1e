/* Symbolizer-internal: an Elf handle ended when its variable goes out of scope. */
#pragma once
#include <libelf.h>
#include "base/cleanup.h"

static inline void elf_endp(Elf **e) { if (*e) elf_end(*e); }
#define _cleanup_elf_ _cleanup_(elf_endp)
