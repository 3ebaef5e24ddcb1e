/* Multi-access decode for the soft source: a timer sample stands for the straight-line
 * code around its IP, not one instruction. The window is the run of instructions from
 * the last branch or branch target before the IP to the first branch from the IP on
 * (at most INSN_WIN_BACK_MAX + INSN_WIN_FWD_MAX instructions); an operand of it is
 * recoverable when its address registers still hold, or differ by a known constant
 * from, what the sample's registers say (a backward/forward data-flow over the window,
 * done once per window and cached per build-id + IP offset). Cost per cached sample:
 * one address computation per recoverable operand. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/insn.h"

#define INSN_WIN_BACK_MAX 32       /* instructions before the IP */
#define INSN_WIN_FWD_MAX 16        /* instructions from the IP on */
#define INSN_WIN_FWD_BYTES 512     /* code read past the IP: the rest of a loop, its back edge */
#define INSN_WIN_ACC_MAX 24        /* recoverable accesses kept per window */
#define INSN_WIN_CACHE 4096        /* windows cached (direct-mapped, power of two) */
#define INSN_WIN_SCAN_MAX 65536    /* longest function prefix decoded to find the window */

struct insn_win_stats {
	uint64_t decoded;              /* windows decoded (cache misses) */
	uint64_t misaligned;           /* IP not on an instruction boundary from the function start */
	uint64_t samples;              /* insn_win_eval calls */
	uint64_t accesses;             /* accesses reported */
	uint64_t back, fwd, chased;    /* ... of which before the IP, from it on, pointer chases */
	uint64_t lost;                 /* window operands whose address registers were overwritten */
	uint64_t insns;                /* window sizes summed (mean = insns / samples) */
};

struct insn_win_result {
	unsigned n;                    /* accesses in acc[] */
	unsigned ninsns;               /* instructions in the window (>= 1): the weight divisor */
	unsigned nmem;                 /* memory operands in the window, recovered or not */
	uint64_t block;                /* the window's straight-line run (build-id, first
	                                * instruction, length): the same for every IP in it */
	unsigned pos;                  /* the IP's index in that run */
	bool dep_load;                 /* a read in it takes its address from a read in it */
	uint64_t after_read;           /* bit i: the run's instruction i follows a heap-like
	                                * read, where a timer sample lands while that read
	                                * misses (the IP is the next to retire) */
	uint64_t after_unstrided;      /* the bits of after_read whose read's address registers
	                                * the run does not step by a constant: a walk's next
	                                * node, not an array's next element (whose samples pile
	                                * after it from retirement skew, not from misses) */
	bool ip_rep;                   /* the IP is a rep string instruction: the sample's time
	                                * went to its iterations */
	struct insn_access acc[INSN_WIN_ACC_MAX];
};

struct insn_decoder;
struct insn_window;

/* Cached window of the instruction at file offset off, or NULL. */
const struct insn_window *insn_win_lookup(struct insn_decoder *d, const char *build_id,
					  uint64_t off);
/* Decodes the window of ip from code = bytes of [code_ip, code_ip + len), code_ip a known
 * instruction boundary (the function's start) and len reaching up to INSN_WIN_FWD_BYTES
 * past ip; cached under (build_id, off). A window whose ip is not an instruction
 * boundary from code_ip evaluates to ninsns 0. NULL without a build-id, or on ENOMEM. */
const struct insn_window *insn_win_decode(struct insn_decoder *d, const uint8_t *code,
					  size_t len, uint64_t code_ip, uint64_t ip,
					  const char *build_id, uint64_t off);
/* The window's recoverable accesses at ip with the sample's registers; returns res->n
 * (res->ninsns 0: no window, use the single-instruction decode). */
unsigned insn_win_eval(struct insn_decoder *d, const struct insn_window *w, uint64_t ip,
		       const struct insn_ctx *ctx, struct insn_win_result *res);
const struct insn_win_stats *insn_win_stats(const struct insn_decoder *d);
