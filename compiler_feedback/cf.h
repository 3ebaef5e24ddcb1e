/* Shared by the compiler-feedback exports: one binary's allocation contexts copied out
 * of the store (the store's row memory only lives during its callback), and a frame's
 * MemProf frames (GUID, LineOffset = line - decl_line, Column, IsInlineFrame) exactly as
 * llvm-profdata derives them from DWARF. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "store/store.h"
#include "reporter/classify.h"
#include "reporter/export.h"

/* Hint bytes clang passes to the __hot_cold_t operator new (MemProf defaults). */
#define CF_HINT_COLD 1
#define CF_HINT_NOTCOLD 128
#define CF_HINT_AMBIGUOUS 222
#define CF_HINT_HOT 254

struct cf_line {
	char *function, *mangled, *file;
	uint32_t line, column, decl_line;
	bool inlined;
};

struct cf_frame {
	char *build_id;
	uint64_t offset;          /* file offset of the return address */
	char *function, *mangled; /* ELF symbol; may be NULL */
	struct cf_line *lines;    /* inline chain, leaf first */
	unsigned nlines;
};

struct cf_ctx {
	int64_t id;
	struct mib mib;
	struct mib_hist hist;     /* AccessHistogram, combined over the context's rows */
	enum classify_class cls;  /* classify_mib() with the store's evidence */
	struct cf_frame *frames;  /* leaf first */
	unsigned nframes;
};

struct cf_ctxs {
	struct cf_ctx *v;
	size_t n, cap;
	struct classify_evidence ev;   /* the store's (classify_evidence_load()) */
};

/* Every context of o->binary, largest total_size first (ties: context id), classified. */
int cf_load_contexts(struct store *s, const struct export_opts *o, struct cf_ctxs *out);
void cf_free_contexts(struct cf_ctxs *c);

/* One MemProf frame. */
struct cf_mpframe {
	uint64_t guid;
	uint32_t line_offset, column;
	bool inlined;
	const char *name;         /* mangled name the GUID was computed from */
};
/* Expands f into up to max MemProf frames (leaf first; only the last is not inline) and
 * returns how many; a frame without DWARF lines gives one frame from its ELF symbol with
 * LineOffset 0, and 0 frames when nothing is known. */
unsigned cf_frame_mpframes(const struct cf_frame *f, struct cf_mpframe *out, unsigned max);
