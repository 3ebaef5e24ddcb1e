/* Effective addresses of an x86-64 instruction's memory accesses, for the soft access
 * source: decode once with capstone into an address-independent form (cached per
 * build-id + file offset in a bounded, direct-mapped cache), then evaluate against the
 * sampled user registers. Every sample ends in exactly one counted outcome: accesses
 * reported, or a reason why none were (no memory operand, unknown segment base, ...). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INSN_MAX_BYTES 15          /* longest x86 instruction */
#define INSN_MAX_ACCESSES 4        /* memory accesses kept per instruction (movs: 2) */
#define INSN_CACHE_DEFAULT 8192    /* decoded instructions cached (power of two) */

/* User registers in the x86-64 struct pt_regs order, as BPF's bpf_perf_event_data sends
 * them (bpf_user_pt_regs_t). */
struct insn_regs {
	uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	uint64_t rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, flags, rsp, ss;
};

struct insn_ctx {
	struct insn_regs regs;
	uint64_t fs_base, gs_base;     /* user segment bases (task->thread.fsbase/gsbase) */
	bool fs_known, gs_known;
};

enum insn_rw { INSN_READ = 1, INSN_WRITE = 2 };

enum insn_op_flag {
	INSN_F_STACK = 1,         /* implicit stack access (push/pop/call/ret/leave/enter) */
	INSN_F_TLS = 2,           /* through fs: or gs: with a known base */
	INSN_F_BASE_ONLY = 4,     /* gather/scatter: the vector index is ignored, base + disp */
	INSN_F_STRING = 8,        /* string instruction through rsi/rdi (incl. rep) */
	INSN_F_RIP = 16,          /* RIP-relative: static data or constants of the binary */
	INSN_F_CHASED = 32,       /* pointer chase: the next node's field, not this load's */
	INSN_F_REP = 64,          /* string instruction with a rep prefix: many accesses */
	INSN_F_AT_IP = 128,       /* a window's access of the sampled instruction itself */
};

struct insn_access {
	uint64_t addr;
	uint32_t size;            /* bytes (0 if capstone does not know) */
	uint8_t rw;               /* INSN_READ | INSN_WRITE */
	uint8_t flags;            /* enum insn_op_flag */
};

/* Outcome of one instruction sample; the counters in struct insn_stats use these. */
enum insn_status {
	INSN_OK = 0,              /* at least one access reported */
	INSN_NO_MEM,              /* no memory operand (register/immediate forms, jumps) */
	INSN_NO_ACCESS,           /* a memory operand that is not an access: lea, nop, prefetch */
	INSN_SEG_UNKNOWN,         /* fs:/gs: access whose segment base is not known */
	INSN_UNSUPPORTED,         /* an address register we cannot evaluate */
	INSN_UNDECODABLE,         /* capstone could not decode the bytes */
	INSN_CLOBBERED,           /* predecessor decode: it overwrote its own address registers */
	INSN_STATUS_MAX,
};

struct insn_result {
	enum insn_status status;
	unsigned n;                        /* accesses in acc[] */
	struct insn_access acc[INSN_MAX_ACCESSES];
	unsigned len;                      /* instruction length in bytes (0 if undecodable) */
	unsigned base_only;                /* accesses flagged INSN_F_BASE_ONLY */
};

struct insn_stats {
	uint64_t samples;                  /* insn_eval calls */
	uint64_t by_status[INSN_STATUS_MAX];
	uint64_t accesses;                 /* accesses reported */
	uint64_t base_only;                /* gathers/scatters reported as base + disp */
	uint64_t seg_dropped;              /* operands dropped for an unknown segment base */
	uint64_t rw_guessed;               /* capstone gave no access type: assumed read */
	uint64_t cache_hits, cache_misses, cache_evictions;
};

struct insn_decoder;
struct insn_decoded;   /* address-independent decode of one instruction (cache entry) */

/* cache_slots is rounded up to a power of two; 0 means INSN_CACHE_DEFAULT. */
int insn_decoder_open(struct insn_decoder **out, size_t cache_slots);
void insn_decoder_close(struct insn_decoder *d);

/* Cached decode of (build_id, file_off), or NULL: lets a caller skip reading bytes. */
const struct insn_decoded *insn_lookup(struct insn_decoder *d, const char *build_id,
				       uint64_t file_off);
/* Decodes bytes (the instruction at runtime address ip) and caches the result under
 * (build_id, file_off) when build_id is non-NULL and non-empty. Never fails: an
 * undecodable instruction is a decoded entry whose status says so. NULL only on ENOMEM. */
const struct insn_decoded *insn_decode(struct insn_decoder *d, const uint8_t *bytes,
				       size_t len, uint64_t ip, const char *build_id,
				       uint64_t file_off);
/* Effective addresses of dec at ip with the registers in ctx; updates d's counters.
 * Returns res->status. */
enum insn_status insn_eval(struct insn_decoder *d, const struct insn_decoded *dec,
			   uint64_t ip, const struct insn_ctx *ctx, struct insn_result *res);
/* insn_lookup/insn_decode + insn_eval in one call. */
enum insn_status insn_access_at(struct insn_decoder *d, const uint8_t *bytes, size_t len,
				uint64_t ip, const char *build_id, uint64_t file_off,
				const struct insn_ctx *ctx, struct insn_result *res);

/* Skid: a timer sample's IP is the next instruction to run, while the cycles went to the
 * one that just retired. insn_decode_prev decodes the instruction ending exactly at ip,
 * walking code[] (bytes of [code_ip, code_ip + len), code_ip a known instruction boundary
 * such as the function's start); cached under (build_id, file_off of ip) apart from the
 * IP's own decode. insn_eval_prev evaluates it with the registers as they are AFTER it
 * ran: implicit rsp/rsi/rdi forms are rebased, operands whose address registers the
 * instruction itself wrote are dropped (INSN_CLOBBERED). Not found: INSN_UNDECODABLE. */
const struct insn_decoded *insn_lookup_prev(struct insn_decoder *d, const char *build_id,
					    uint64_t file_off);
const struct insn_decoded *insn_decode_prev(struct insn_decoder *d, const uint8_t *code,
					    size_t len, uint64_t code_ip, uint64_t ip,
					    const char *build_id, uint64_t file_off);
enum insn_status insn_eval_prev(struct insn_decoder *d, const struct insn_decoded *dec,
				uint64_t ip, const struct insn_ctx *ctx, struct insn_result *res);

const struct insn_stats *insn_stats(const struct insn_decoder *d);
const char *insn_status_name(enum insn_status s);
/* Capstone mnemonic of a decoded instruction ("" if undecodable); for diagnostics. */
const char *insn_decoded_mnemonic(const struct insn_decoded *dec);
