/* Whether an executable is statically linked (no program interpreter): no library is
 * loaded into it, so neither libc's allocator probes nor a preloaded sampler reach it. */
#pragma once

/* 1 if path is an ELF file without a PT_INTERP program header (static, static-PIE),
 * 0 if it has one, -errno when it is no readable ELF. Reads the program headers only. */
int elfstatic_path(const char *path);
