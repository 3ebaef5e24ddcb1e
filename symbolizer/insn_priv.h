/* Internals shared by the instruction decoder (insn.c) and the window decoder
 * (insn_window.c): the address-independent operand form, the decoder with its caches,
 * and the helpers both use. Nothing outside symbolizer/ includes this. */
#pragma once
#include <capstone/capstone.h>
#include "symbolizer/insn.h"
#include "symbolizer/insn_window.h"

enum { R_NONE = 0, R_RIP = 0xfe, R_VEC = 0xfd, R_BAD = 0xff };
enum { SEG_NONE = 0, SEG_FS, SEG_GS };

struct dmem {
	int64_t disp;
	uint32_t size;
	uint8_t base, base_w;      /* register slot (index into insn_regs + 1), width in bits */
	uint8_t index, index_w;
	uint8_t scale, seg, rw, flags;
};

struct insn_decoded {
	uint64_t bid_hash, off;
	bool used;
	uint8_t status;            /* decode-time status: OK, NO_MEM, NO_ACCESS, UNSUPPORTED, UNDECODABLE */
	uint8_t len, n, addr32;
	struct dmem m[INSN_MAX_ACCESSES];
	char mnem[16];
};

struct insn_window;           /* insn_window.c */

struct insn_decoder {
	csh cs;
	struct insn_decoded *slots;
	size_t mask;
	struct insn_decoded scratch;   /* uncached decodes (no build-id) */
	struct insn_stats st;
	struct insn_window *wins;      /* window cache, allocated on first use */
	size_t wmask;
	struct insn_win_stats wst;
};

#define SLOT(field) ((uint8_t)(offsetof(struct insn_regs, field) / sizeof(uint64_t) + 1))

/* Capstone register -> register slot and width (bits). */
uint8_t insn__reg_slot(unsigned r, uint8_t *w);
/* Fills e from ci; post: operands in terms of the registers AFTER ci ran (see insn.c). */
void insn__fill(struct insn_decoder *d, struct insn_decoded *e, const cs_insn *ci, bool post);
/* Effective address of m with ctx's registers, next = the address after the instruction
 * (RIP-relative); false when its segment base is unknown. */
bool insn__eval_mem(const struct dmem *m, bool addr32, uint64_t next, const struct insn_ctx *ctx,
		    struct insn_access *out);
/* Hash of a build-id string, never 0. */
uint64_t insn__hash_bid(const char *s);
/* Mixes a build-id hash and an offset into a cache index (every key bit reaches the low bits). */
uint64_t insn__mix(uint64_t bh, uint64_t off);
