/* Code address -> source frames through libdw: function (linkage name kept for MemProf,
 * demangled for display), file, line, column, the function's declaration line, and the
 * whole inline chain, leaf first. The DWARF may live in the binary or in a separate debug
 * file; both are read into memory at open, so later changes to the files cannot change
 * an answer, and a debug file whose build-id differs from the binary's is refused. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DWSYM_MAX_DEPTH 64          /* inline frames per address; deeper chains are cut */
#define DWSYM_MAX_RANGES (1u << 22) /* CU address ranges indexed; more is -E2BIG */
#define DWSYM_MAX_CUS (1u << 20)    /* compilation units walked per file; more is -E2BIG */

struct dwsym;   /* one binary (+ its debug file), opened */

struct dwsym_frame {
	char *function;     /* demangled name for people; never NULL in a returned frame */
	char *mangled;      /* DW_AT_linkage_name, else DW_AT_name, else the ELF symbol */
	char *file;         /* source file, NULL if unknown */
	uint32_t line, column;  /* 0 if unknown */
	uint32_t decl_line; /* DW_AT_decl_line of the function (MemProf LineOffset base), 0 if unknown */
	bool inlined;       /* this frame was inlined into the next one (its caller) */
};

struct dwsym_frames {
	struct dwsym_frame *v;  /* leaf first */
	unsigned n;
};

/* Opens the binary at path (a /proc/PID/map_files or /proc/PID/root path works) and the
 * DWARF in debug_path if given, else in the binary itself. -ESTALE if the debug file's
 * build-id is not the binary's. A binary without DWARF opens too: lookups then give one
 * frame with the ELF symbol's name and no file/line. */
int dwsym_open(struct dwsym **out, const char *path, const char *debug_path);
/* Same on an in-memory image holding both code and DWARF (the fuzzer); buf must outlive it. */
int dwsym_open_mem(struct dwsym **out, const void *buf, size_t len);
void dwsym_close(struct dwsym *d);

/* The binary's build-id, lowercase hex; -ENOENT if it has none. */
int dwsym_build_id(const struct dwsym *d, char *hex, size_t hexsz);
/* 1 if DWARF line/scope data is available, 0 if only ELF symbols are. */
int dwsym_has_dwarf(const struct dwsym *d);
/* Rough bytes held in memory by d (for the cache's budget). */
size_t dwsym_bytes(const struct dwsym *d);

/* Frames at link-time virtual address pc (the instruction's own address: for a return
 * address pass ra - 1). 0 and out->n >= 1, or -ENOENT if nothing covers pc. out is
 * always safe to pass to dwsym_frames_free. */
int dwsym_lookup_vaddr(struct dwsym *d, uint64_t pc, struct dwsym_frames *out);
/* Same for a file offset (what the daemon's frames carry), through the PT_LOADs. */
int dwsym_lookup_offset(struct dwsym *d, uint64_t off, struct dwsym_frames *out);
void dwsym_frames_free(struct dwsym_frames *f);
