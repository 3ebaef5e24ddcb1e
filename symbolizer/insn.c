/* Instruction decode for the soft access source (capstone, x86-64). A decode is reduced
 * to address-independent operand descriptions (register slots, scale, displacement, size,
 * read/write) so one cache entry serves every process that maps the same build-id; the
 * effective address is computed per sample from the registers. Implicit accesses (stack
 * forms) are added as ordinary operands with INSN_F_STACK. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <capstone/capstone.h>
#include "symbolizer/insn.h"
#include "symbolizer/insn_priv.h"
#include "base/hash.h"


/* Capstone register -> register slot and width; R_VEC for vector registers (VSIB). */
uint8_t insn__reg_slot(unsigned r, uint8_t *w)
{
	*w = 64;
	switch (r) {
	case X86_REG_INVALID: return R_NONE;
	case X86_REG_RIP: return R_RIP;
	case X86_REG_EIP: *w = 32; return R_RIP;
#define G(q, d, x, sl) case X86_REG_##q: return SLOT(sl); \
		case X86_REG_##d: *w = 32; return SLOT(sl); \
		case X86_REG_##x: *w = 16; return SLOT(sl);
	G(RAX, EAX, AX, rax) G(RBX, EBX, BX, rbx) G(RCX, ECX, CX, rcx) G(RDX, EDX, DX, rdx)
	G(RSI, ESI, SI, rsi) G(RDI, EDI, DI, rdi) G(RBP, EBP, BP, rbp) G(RSP, ESP, SP, rsp)
	G(R8, R8D, R8W, r8) G(R9, R9D, R9W, r9) G(R10, R10D, R10W, r10) G(R11, R11D, R11W, r11)
	G(R12, R12D, R12W, r12) G(R13, R13D, R13W, r13) G(R14, R14D, R14W, r14)
	G(R15, R15D, R15W, r15)
#undef G
	}
	if ((r >= X86_REG_XMM0 && r <= X86_REG_XMM31) || (r >= X86_REG_YMM0 && r <= X86_REG_YMM31) ||
	    (r >= X86_REG_ZMM0 && r <= X86_REG_ZMM31))
		return R_VEC;
	return R_BAD;
}

uint64_t insn__hash_bid(const char *s)
{
	return fnv1a(s, strlen(s)) | 1;   /* 0 marks an uncached decode */
}

/* Every key bit reaches the low bits (murmur3's finalizer): PREV_KEY is bit 63, and a
 * weaker mix put an IP's decode and its predecessor's in one slot, so a skid sample
 * evicted itself twice (two file reads and decodes per sample). */
uint64_t insn__mix(uint64_t bh, uint64_t off)
{
	uint64_t h = bh ^ (off * 0x9e3779b97f4a7c15ULL);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static size_t slot_of(const struct insn_decoder *d, uint64_t bh, uint64_t off)
{
	return (size_t)(insn__mix(bh, off) & d->mask);
}

int insn_decoder_open(struct insn_decoder **out, size_t cache_slots)
{
	struct insn_decoder *d;
	size_t n = 1;

	if (!cache_slots)
		cache_slots = INSN_CACHE_DEFAULT;
	if (cache_slots > ((size_t)1 << 24))
		return -EINVAL;
	while (n < cache_slots)
		n <<= 1;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->slots = calloc(n, sizeof(*d->slots));
	if (!d->slots) {
		free(d);
		return -ENOMEM;
	}
	d->mask = n - 1;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &d->cs) != CS_ERR_OK) {
		free(d->slots);
		free(d);
		return -EIO;
	}
	cs_option(d->cs, CS_OPT_DETAIL, CS_OPT_ON);
	*out = d;
	return 0;
}

void insn_decoder_close(struct insn_decoder *d)
{
	if (!d)
		return;
	cs_close(&d->cs);
	free(d->slots);
	free(d->wins);
	free(d);
}

const struct insn_decoded *insn_lookup(struct insn_decoder *d, const char *build_id,
				       uint64_t file_off)
{
	uint64_t bh;
	struct insn_decoded *e;

	if (!build_id || !*build_id)
		return NULL;
	bh = insn__hash_bid(build_id);
	e = &d->slots[slot_of(d, bh, file_off)];
	if (e->used && e->bid_hash == bh && e->off == file_off) {
		d->st.cache_hits++;
		return e;
	}
	return NULL;
}

static void add_mem(struct insn_decoded *e, uint8_t base, int64_t disp, uint32_t size,
		    uint8_t rw, uint8_t flags)
{
	if (e->n >= INSN_MAX_ACCESSES)
		return;
	e->m[e->n++] = (struct dmem){ .disp = disp, .size = size, .base = base, .base_w = 64,
				      .scale = 1, .rw = rw, .flags = flags };
}

static bool is_string_insn(unsigned id)
{
	switch (id) {
	case X86_INS_MOVSB: case X86_INS_MOVSW: case X86_INS_MOVSD: case X86_INS_MOVSQ:
	case X86_INS_STOSB: case X86_INS_STOSW: case X86_INS_STOSD: case X86_INS_STOSQ:
	case X86_INS_LODSB: case X86_INS_LODSW: case X86_INS_LODSD: case X86_INS_LODSQ:
	case X86_INS_CMPSB: case X86_INS_CMPSW: case X86_INS_CMPSD: case X86_INS_CMPSQ:
	case X86_INS_SCASB: case X86_INS_SCASW: case X86_INS_SCASD: case X86_INS_SCASQ:
		return true;
	}
	return false;
}

/* Memory operands that do not access memory. */
static bool is_no_access(unsigned id)
{
	switch (id) {
	case X86_INS_LEA: case X86_INS_NOP:
	case X86_INS_PREFETCH: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
	case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_PREFETCHW:
	case X86_INS_CLFLUSH: case X86_INS_CLFLUSHOPT:
	case X86_INS_CLWB:
		return true;
	}
	return false;
}

/* Pointer chasing, `mov disp(%r),%r`: the load replaced its own base, so its address is
 * lost, but r now holds the pointer just loaded and the next step of the chase reads
 * disp(%r) again. The operand is kept as that next access (same field, next node):
 * only a plain 64-bit move whose one written register is the base, with no index. */
static bool chase_load(const cs_insn *ci, const struct dmem *m, unsigned nwritten)
{
	const cs_x86 *x = &ci->detail->x86;
	uint8_t w;

	if (strcmp(ci->mnemonic, "mov") || x->op_count != 2 || nwritten != 1 ||
	    x->operands[0].type != X86_OP_REG || m->rw != INSN_READ || m->index != R_NONE ||
	    m->base_w != 64 || m->seg != SEG_NONE)
		return false;
	return insn__reg_slot(x->operands[0].reg, &w) == m->base && w == 64;
}

/* Fills e from the decoded ci. post: the registers will be those AFTER ci executed (the
 * instruction that retired just before a sampled IP), so implicit rsp/rsi/rdi forms are
 * rebased and an operand whose address registers ci itself writes is dropped. */
void insn__fill(struct insn_decoder *d, struct insn_decoded *e, const cs_insn *ci, bool post)
{
	uint32_t stack_sz = 8;
	bool any_mem = false;
	unsigned clobbered = 0;
	cs_regs rr, rw;
	uint8_t nrr = 0, nrw = 0;
	uint8_t wslots[64];
	unsigned nws = 0;

	if (post && cs_regs_access(d->cs, ci, rr, &nrr, rw, &nrw) == CS_ERR_OK) {
		for (unsigned i = 0; i < nrw; i++) {
			uint8_t w, sl = insn__reg_slot(rw[i], &w);
			if (sl != R_NONE && sl != R_BAD && sl != R_VEC && sl != R_RIP)
				wslots[nws++] = sl;
		}
	}

	const cs_x86 *x = &ci->detail->x86;
	unsigned id = ci->id;

	e->len = (uint8_t)ci->size;
	e->addr32 = x->addr_size == 4;
	snprintf(e->mnem, sizeof(e->mnem), "%.*s", (int)sizeof(e->mnem) - 1, ci->mnemonic);
	e->status = INSN_OK;
	/* Plain moves (mov, movdqu, vmovaps, movnt*, ...): destination first, never both. */
	bool mov_like = (!strncmp(ci->mnemonic, "mov", 3) || !strncmp(ci->mnemonic, "vmov", 4)) &&
			!is_string_insn(id);

	for (unsigned i = 0; i < x->op_count; i++) {
		const cs_x86_op *op = &x->operands[i];
		if (op->type == X86_OP_REG && x->op_count == 1 && op->size == 2)
			stack_sz = 2;      /* push/pop of a 16-bit register */
		if (op->type != X86_OP_MEM)
			continue;
		any_mem = true;
		if (is_no_access(id))
			continue;
		struct dmem m = { .disp = op->mem.disp, .size = op->size, .scale = 1 };
		uint8_t w;
		m.base = insn__reg_slot(op->mem.base, &w);
		m.base_w = w;
		m.index = insn__reg_slot(op->mem.index, &w);
		m.index_w = w;
		m.scale = op->mem.scale > 0 ? (uint8_t)op->mem.scale : 1;
		if (m.base == R_BAD || m.index == R_BAD || m.base == R_VEC) {
			e->status = INSN_UNSUPPORTED;
			continue;
		}
		if (m.index == R_VEC) {
			m.index = R_NONE;
			m.flags |= INSN_F_BASE_ONLY;
		}
		if (m.base == R_RIP)
			m.flags |= INSN_F_RIP;
		if (op->mem.segment == X86_REG_FS)
			m.seg = SEG_FS;
		else if (op->mem.segment == X86_REG_GS)
			m.seg = SEG_GS;
		m.rw = op->access & (CS_AC_READ | CS_AC_WRITE);
		if (mov_like && x->op_count >= 2)
			m.rw = i == 0 ? INSN_WRITE : INSN_READ;   /* capstone 4 misreports some */
		if (id == X86_INS_CMPXCHG || id == X86_INS_CMPXCHG8B || id == X86_INS_CMPXCHG16B ||
		    id == X86_INS_XADD || id == X86_INS_XCHG || x->prefix[0] == X86_PREFIX_LOCK)
			m.rw = INSN_READ | INSN_WRITE;   /* atomics always write (locked cycle) */
		if (!m.rw) {
			m.rw = INSN_READ;
			d->st.rw_guessed++;
		}
		/* pop to memory: the address uses rsp after the increment. */
		if (id == X86_INS_POP && m.base == SLOT(rsp))
			m.disp += stack_sz;
		if (is_string_insn(id) && (m.base == SLOT(rsi) || m.base == SLOT(rdi)) &&
		    m.index == R_NONE && m.disp == 0) {
			m.flags |= INSN_F_STRING;
			if (x->prefix[0] == X86_PREFIX_REP || x->prefix[0] == X86_PREFIX_REPNE)
				m.flags |= INSN_F_REP;
		}
		if (post) {
			bool hit = false;
			for (unsigned k = 0; k < nws; k++)
				hit |= wslots[k] == m.base || wslots[k] == m.index;
			if (m.flags & INSN_F_STRING) {
				m.disp -= m.size;    /* rsi/rdi already advanced (DF=0) */
			} else if (hit && chase_load(ci, &m, nws)) {
				m.flags |= INSN_F_CHASED;
			} else if (hit) {
				clobbered++;
				continue;
			}
		}
		if (e->n < INSN_MAX_ACCESSES)
			e->m[e->n++] = m;
	}
	/* After the fact, rsp has moved by the implicit access's size. */
	int64_t adj = post ? (int64_t)stack_sz : 0;
	/* Implicit stack accesses. */
	switch (id) {
	case X86_INS_PUSH: case X86_INS_PUSHFQ: case X86_INS_PUSHF: case X86_INS_CALL:
	case X86_INS_ENTER:
		if (!(post && id == X86_INS_ENTER))   /* enter's rsp change is not just 8 */
			add_mem(e, SLOT(rsp), -(int64_t)stack_sz + adj, stack_sz, INSN_WRITE, INSN_F_STACK);
		break;
	case X86_INS_POP: case X86_INS_POPFQ: case X86_INS_POPF: case X86_INS_RET:
		add_mem(e, SLOT(rsp), -adj, stack_sz, INSN_READ, INSN_F_STACK);
		break;
	case X86_INS_LEAVE:
		/* before: read [rbp]; after: rsp = old rbp + 8 */
		add_mem(e, post ? SLOT(rsp) : SLOT(rbp), post ? -8 : 0, 8, INSN_READ, INSN_F_STACK);
		break;
	}
	if (e->n == 0 && e->status == INSN_OK)
		e->status = clobbered ? INSN_CLOBBERED : any_mem ? INSN_NO_ACCESS : INSN_NO_MEM;
}

static void fill(struct insn_decoder *d, struct insn_decoded *e, const uint8_t *bytes,
		 size_t len, uint64_t ip)
{
	cs_insn *ci = NULL;
	size_t cnt;

	memset(e->m, 0, sizeof(e->m));
	e->n = 0;
	e->len = 0;
	e->addr32 = 0;
	e->mnem[0] = '\0';
	if (len > INSN_MAX_BYTES)
		len = INSN_MAX_BYTES;
	cnt = len ? cs_disasm(d->cs, bytes, len, ip, 1, &ci) : 0;
	if (cnt != 1 || !ci->detail) {
		if (cnt)
			cs_free(ci, cnt);
		e->status = INSN_UNDECODABLE;
		return;
	}
	insn__fill(d, e, ci, false);
	cs_free(ci, cnt);
}

/* Cache slot for key (build_id, off), marking a miss; the scratch entry if uncached. */
static struct insn_decoded *slot_for(struct insn_decoder *d, const char *build_id, uint64_t off,
				     bool *hit)
{
	struct insn_decoded *e = &d->scratch;

	*hit = false;
	if (build_id && *build_id) {
		uint64_t bh = insn__hash_bid(build_id);
		e = &d->slots[slot_of(d, bh, off)];
		if (e->used && e->bid_hash == bh && e->off == off) {
			d->st.cache_hits++;
			*hit = true;
			return e;
		}
		d->st.cache_misses++;
		if (e->used)
			d->st.cache_evictions++;
		e->used = true;
		e->bid_hash = bh;
		e->off = off;
	}
	return e;
}

#define PREV_KEY (1ULL << 63)   /* cache keys of predecessor decodes */

const struct insn_decoded *insn_lookup_prev(struct insn_decoder *d, const char *build_id,
					    uint64_t file_off)
{
	return insn_lookup(d, build_id, file_off | PREV_KEY);
}

const struct insn_decoded *insn_decode_prev(struct insn_decoder *d, const uint8_t *code,
					    size_t len, uint64_t code_ip, uint64_t ip,
					    const char *build_id, uint64_t file_off)
{
	bool hit;
	struct insn_decoded *e = slot_for(d, build_id, file_off | PREV_KEY, &hit);
	const uint8_t *p = code;
	size_t left = len;
	uint64_t at = code_ip;
	cs_insn *ci;

	if (hit)
		return e;
	memset(e->m, 0, sizeof(e->m));
	e->n = 0;
	e->len = 0;
	e->addr32 = 0;
	e->mnem[0] = '\0';
	e->status = INSN_UNDECODABLE;
	if (ip < code_ip || ip - code_ip > len || !(ci = cs_malloc(d->cs)))
		return e;
	/* Walk from a known boundary; the predecessor is the instruction ending at ip. */
	while (left && at < ip && cs_disasm_iter(d->cs, &p, &left, &at, ci)) {
		if (at == ip) {
			insn__fill(d, e, ci, true);
			break;
		}
	}
	cs_free(ci, 1);
	return e;
}

const struct insn_decoded *insn_decode(struct insn_decoder *d, const uint8_t *bytes,
				       size_t len, uint64_t ip, const char *build_id,
				       uint64_t file_off)
{
	bool hit;
	struct insn_decoded *e = slot_for(d, build_id, file_off, &hit);

	if (!hit)
		fill(d, e, bytes, len, ip);
	return e;
}

static enum insn_status eval_at(struct insn_decoder *d, const struct insn_decoded *dec,
				uint64_t next, const struct insn_ctx *ctx, struct insn_result *res);

static uint64_t reg_val(const struct insn_ctx *c, uint8_t slot, uint8_t w, uint64_t next_ip)
{
	uint64_t v;

	if (slot == R_NONE)
		return 0;
	if (slot == R_RIP)
		v = next_ip;
	else
		v = ((const uint64_t *)&c->regs)[slot - 1];
	if (w == 32)
		v &= 0xffffffffULL;
	else if (w == 16)
		v &= 0xffffULL;
	return v;
}

bool insn__eval_mem(const struct dmem *m, bool addr32, uint64_t next, const struct insn_ctx *ctx,
		    struct insn_access *out)
{
	uint64_t a = reg_val(ctx, m->base, m->base_w, next) +
		     reg_val(ctx, m->index, m->index_w, next) * m->scale + (uint64_t)m->disp;
	uint8_t fl = m->flags;

	if (addr32)
		a &= 0xffffffffULL;
	if (m->seg == SEG_FS || m->seg == SEG_GS) {
		bool known = m->seg == SEG_FS ? ctx->fs_known : ctx->gs_known;
		if (!known)
			return false;
		a += m->seg == SEG_FS ? ctx->fs_base : ctx->gs_base;
		fl |= INSN_F_TLS;
	}
	*out = (struct insn_access){ .addr = a, .size = m->size, .rw = m->rw, .flags = fl };
	return true;
}

enum insn_status insn_eval(struct insn_decoder *d, const struct insn_decoded *dec,
			   uint64_t ip, const struct insn_ctx *ctx, struct insn_result *res)
{
	uint64_t next = ip + dec->len;

	return eval_at(d, dec, next, ctx, res);
}

enum insn_status insn_eval_prev(struct insn_decoder *d, const struct insn_decoded *dec,
				uint64_t ip, const struct insn_ctx *ctx, struct insn_result *res)
{
	return eval_at(d, dec, ip, ctx, res);   /* the predecessor's next instruction is ip */
}

static enum insn_status eval_at(struct insn_decoder *d, const struct insn_decoded *dec,
				uint64_t next, const struct insn_ctx *ctx, struct insn_result *res)
{
	memset(res, 0, sizeof(*res));
	res->len = dec->len;
	res->status = (enum insn_status)dec->status;
	d->st.samples++;
	if (dec->status == INSN_OK || dec->status == INSN_UNSUPPORTED) {
		unsigned dropped = 0;
		for (unsigned i = 0; i < dec->n; i++) {
			struct insn_access acc;
			if (!insn__eval_mem(&dec->m[i], dec->addr32, next, ctx, &acc)) {
				dropped++;
				continue;
			}
			res->acc[res->n++] = acc;
			if (acc.flags & INSN_F_BASE_ONLY)
				res->base_only++;
		}
		d->st.seg_dropped += dropped;
		if (res->n)
			res->status = INSN_OK;
		else if (dropped)
			res->status = INSN_SEG_UNKNOWN;
	}
	d->st.by_status[res->status]++;
	d->st.accesses += res->n;
	d->st.base_only += res->base_only;
	return res->status;
}

enum insn_status insn_access_at(struct insn_decoder *d, const uint8_t *bytes, size_t len,
				uint64_t ip, const char *build_id, uint64_t file_off,
				const struct insn_ctx *ctx, struct insn_result *res)
{
	const struct insn_decoded *dec = insn_lookup(d, build_id, file_off);

	if (!dec)
		dec = insn_decode(d, bytes, len, ip, build_id, file_off);
	return insn_eval(d, dec, ip, ctx, res);
}

const struct insn_stats *insn_stats(const struct insn_decoder *d)
{
	return &d->st;
}

const char *insn_status_name(enum insn_status s)
{
	static const char *const names[INSN_STATUS_MAX] = {
		[INSN_OK] = "ok", [INSN_NO_MEM] = "no_mem_operand",
		[INSN_NO_ACCESS] = "no_access", [INSN_SEG_UNKNOWN] = "segment_base_unknown",
		[INSN_UNSUPPORTED] = "unsupported_register", [INSN_UNDECODABLE] = "undecodable",
		[INSN_CLOBBERED] = "address_registers_overwritten",
	};
	return (unsigned)s < INSN_STATUS_MAX ? names[s] : "?";
}

const char *insn_decoded_mnemonic(const struct insn_decoded *dec)
{
	return dec->mnem;
}
