/* The window decoder (insn_window.h): decodes from the function's start to find the
 * straight-line run around the IP, then does the register data-flow once and caches
 * the recoverable operands with their displacements adjusted. Invariant: a cached
 * operand's address, evaluated with the sample's registers, is the address the
 * instruction used (or, for INSN_F_CHASED, the next step of its chase), provided the
 * window really ran straight through (no branch into it from code past
 * INSN_WIN_FWD_BYTES, no indirect jump to its middle). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "symbolizer/insn_priv.h"

#define NSLOTS 22                  /* register slots 1..21 (struct insn_regs) */
#define ALL_REGS 0xffffffffu

struct wacc {
	struct dmem m;
	int32_t next_off;          /* address after the instruction, minus the IP */
	uint8_t addr32, fwd;
};

struct insn_window {
	uint64_t bid_hash, off;
	bool used, ok;             /* ok: the IP was an instruction boundary */
	uint8_t n, ninsns, nmem, lost, pos;
	bool dep_load, ip_rep;
	uint64_t block, after_read, after_unstrided;
	struct wacc a[INSN_WIN_ACC_MAX];
};

/* What an instruction does to the address registers: slots it sets to unknown values,
 * and at most one slot it moves by a constant (add/sub/inc/dec/lea on itself, push/pop
 * on rsp). */
struct reff {
	uint32_t unknown;
	uint8_t dslot;
	int64_t dval;
};

struct winsn {
	struct insn_decoded d;
	struct reff ef;
	uint64_t next;
};

static bool is_branch(struct insn_decoder *d, const cs_insn *ci)
{
	return cs_insn_group(d->cs, ci, CS_GRP_JUMP) || cs_insn_group(d->cs, ci, CS_GRP_CALL) ||
	       cs_insn_group(d->cs, ci, CS_GRP_RET) || cs_insn_group(d->cs, ci, CS_GRP_IRET) ||
	       cs_insn_group(d->cs, ci, CS_GRP_INT);
}

static uint64_t direct_target(const cs_insn *ci)
{
	const cs_x86 *x = &ci->detail->x86;

	return x->op_count == 1 && x->operands[0].type == X86_OP_IMM ? (uint64_t)x->operands[0].imm : 0;
}

/* The constant ci adds to a 64-bit register, if that is all it does to it. */
static bool const_delta(const cs_insn *ci, uint8_t *slot, int64_t *val)
{
	const cs_x86 *x = &ci->detail->x86;
	const cs_x86_op *o = x->operands;
	uint8_t w, w2;

	switch (ci->id) {
	case X86_INS_ADD: case X86_INS_SUB:
		if (x->op_count != 2 || o[0].type != X86_OP_REG || o[1].type != X86_OP_IMM)
			return false;
		*slot = insn__reg_slot(o[0].reg, &w);
		*val = ci->id == X86_INS_ADD ? o[1].imm : -o[1].imm;
		return w == 64;
	case X86_INS_INC: case X86_INS_DEC:
		if (x->op_count != 1 || o[0].type != X86_OP_REG)
			return false;
		*slot = insn__reg_slot(o[0].reg, &w);
		*val = ci->id == X86_INS_INC ? 1 : -1;
		return w == 64;
	case X86_INS_LEA:
		if (x->op_count != 2 || o[0].type != X86_OP_REG || o[1].type != X86_OP_MEM ||
		    o[1].mem.index != X86_REG_INVALID || o[1].mem.segment != X86_REG_INVALID)
			return false;
		*slot = insn__reg_slot(o[0].reg, &w);
		*val = o[1].mem.disp;
		return w == 64 && insn__reg_slot(o[1].mem.base, &w2) == *slot && w2 == 64;
	case X86_INS_PUSH: case X86_INS_POP:
		if (x->op_count == 1 && o[0].size != 8)
			return false;
		*slot = SLOT(rsp);
		*val = ci->id == X86_INS_PUSH ? -8 : 8;
		return true;
	}
	return false;
}

static void effects(struct insn_decoder *d, const cs_insn *ci, struct reff *e)
{
	cs_regs rr, rw;
	uint8_t nrr = 0, nrw = 0;

	memset(e, 0, sizeof(*e));
	if (!const_delta(ci, &e->dslot, &e->dval) || e->dslot == R_BAD || e->dslot >= NSLOTS)
		e->dslot = R_NONE;
	if (cs_regs_access(d->cs, ci, rr, &nrr, rw, &nrw) != CS_ERR_OK) {
		e->unknown = ALL_REGS;
		e->dslot = R_NONE;
		return;
	}
	for (unsigned i = 0; i < nrw; i++) {
		uint8_t w, sl = insn__reg_slot(rw[i], &w);
		if (sl != R_NONE && sl < NSLOTS && sl != e->dslot)
			e->unknown |= 1u << sl;
	}
}

/* Adds wi's operands to win if their registers are known at the IP: value = now + delta.
 * at_ip: wi is the sampled instruction (its operands flagged INSN_F_AT_IP). */
static void add_ops(struct insn_window *win, const struct winsn *wi, uint64_t ip,
		    const int64_t *delta, uint32_t unknown, bool fwd, bool at_ip)
{
	for (unsigned k = 0; k < wi->d.n; k++) {
		struct dmem m = wi->d.m[k];
		bool b = m.base != R_NONE && m.base < NSLOTS, x = m.index != R_NONE && m.index < NSLOTS;

		win->nmem++;
		if ((b && (unknown >> m.base & 1)) || (x && (unknown >> m.index & 1)) ||
		    (b && delta[m.base] && m.base_w != 64) || (x && delta[m.index] && m.index_w != 64) ||
		    win->n >= INSN_WIN_ACC_MAX) {
			win->lost++;
			continue;
		}
		m.disp += (b ? delta[m.base] : 0) + (x ? delta[m.index] * m.scale : 0);
		if (at_ip)
			m.flags |= INSN_F_AT_IP;
		win->a[win->n++] = (struct wacc){ .m = m, .next_off = (int32_t)(wi->next - ip),
						  .addr32 = wi->d.addr32, .fwd = fwd };
	}
}

/* Backward over the instructions before the IP (operands as after each ran), then
 * forward from it (operands as before each runs). */
static void dataflow(struct insn_window *win, const struct winsn *v, unsigned nb, unsigned nf,
		     uint64_t ip)
{
	int64_t delta[NSLOTS] = { 0 };
	uint32_t unknown = 0;

	for (unsigned i = nb; i-- > 0;) {
		add_ops(win, &v[i], ip, delta, unknown, false, false);
		unknown |= v[i].ef.unknown;
		if (v[i].ef.dslot)
			delta[v[i].ef.dslot] -= v[i].ef.dval;
	}
	memset(delta, 0, sizeof(delta));
	unknown = 0;
	for (unsigned j = nb; j < nb + nf; j++) {
		add_ops(win, &v[j], ip, delta, unknown, true, j == nb);
		unknown |= v[j].ef.unknown;
		if (v[j].ef.dslot)
			delta[v[j].ef.dslot] += v[j].ef.dval;
	}
}

/* A heap-like read: not the stack (rsp-based, or a frame slot: rbp minus a constant, a
 * spilled variable's reload at -O1, always in L1), not the binary's own data
 * (RIP-relative). */
static bool chase_read(const struct dmem *m)
{
	return (m->rw & INSN_READ) && !(m->flags & (INSN_F_STACK | INSN_F_RIP)) &&
	       m->base != SLOT(rsp) &&
	       !(m->base == SLOT(rbp) && m->index == R_NONE && m->disp < 0);
}

/* Whether a read of the window takes its address from what a read of the window loaded
 * (itself included, a loop's next pass too: mov (%rax),%rax): a pointer chase, whose
 * time goes to waiting on the load before. Two passes over the run for the loop's wrap. */
static bool dependent_load(const struct winsn *v, unsigned n)
{
	uint32_t loaded = 0;

	for (unsigned pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < n; i++) {
			bool reads = false;
			for (unsigned k = 0; k < v[i].d.n; k++) {
				const struct dmem *m = &v[i].d.m[k];
				if (!chase_read(m))
					continue;
				reads = true;
				if ((m->base < NSLOTS && (loaded >> m->base & 1)) ||
				    (m->index < NSLOTS && (loaded >> m->index & 1)))
					return true;
			}
			if (reads)
				loaded |= v[i].ef.unknown;
			else
				loaded &= ~v[i].ef.unknown;
		}
	return false;
}

/* Bit i: instruction i of the run follows a heap-like read (bits past 63 dropped); with
 * unstrided, only reads whose base and index registers no instruction of the run moves by
 * a constant (add $8, inc, lea 8(%r),%r: an array walked in order). */
static uint64_t after_reads(const struct winsn *v, unsigned n, bool unstrided)
{
	uint64_t mask = 0;
	uint32_t stepped = 0;

	for (unsigned i = 0; i < n; i++)
		if (v[i].ef.dslot && v[i].ef.dslot < NSLOTS && v[i].ef.dval)
			stepped |= 1u << v[i].ef.dslot;
	for (unsigned i = 1; i < n && i < 64; i++)
		for (unsigned k = 0; k < v[i - 1].d.n; k++) {
			const struct dmem *m = &v[i - 1].d.m[k];
			if (!chase_read(m))
				continue;
			if (unstrided && ((m->base < NSLOTS && (stepped >> m->base & 1)) ||
					  (m->index < NSLOTS && (stepped >> m->index & 1))))
				continue;
			mask |= 1ull << i;
		}
	return mask;
}

/* First pass: the window's first instruction (after the last branch before ip, at or
 * after the last direct branch target <= ip, at most INSN_WIN_BACK_MAX back); 0 when ip
 * is not an instruction boundary. */
static uint64_t window_start(struct insn_decoder *d, cs_insn *ci, const uint8_t *code, size_t len,
			     uint64_t code_ip, uint64_t ip)
{
	uint64_t ring[INSN_WIN_BACK_MAX], bound = code_ip, at = code_ip;
	const uint8_t *p = code;
	size_t left = len, nring = 0;
	bool aligned = false;

	while (left && cs_disasm_iter(d->cs, &p, &left, &at, ci)) {
		uint64_t a = ci->address, t;
		bool br = is_branch(d, ci);
		if (a == ip)
			aligned = true;
		else if (a > ip && !aligned)
			break;
		if (a < ip) {
			ring[nring++ % INSN_WIN_BACK_MAX] = a;
			if (br)
				bound = at;
		}
		if (br && (t = direct_target(ci)) && t > bound && t <= ip)
			bound = t;
	}
	if (!aligned)
		return 0;
	/* The first boundary at or after bound among the last INSN_WIN_BACK_MAX before ip. */
	uint64_t start = ip;
	size_t first = nring > INSN_WIN_BACK_MAX ? nring - INSN_WIN_BACK_MAX : 0;
	for (size_t i = first; i < nring; i++) {
		uint64_t a = ring[i % INSN_WIN_BACK_MAX];
		if (a >= bound && a < start)
			start = a;
	}
	return start;
}

static struct insn_window *win_slot(struct insn_decoder *d, uint64_t bh, uint64_t off)
{
	if (!d->wins) {
		d->wins = calloc(INSN_WIN_CACHE, sizeof(*d->wins));
		if (!d->wins)
			return NULL;
		d->wmask = INSN_WIN_CACHE - 1;
	}
	return &d->wins[insn__mix(bh, off) & d->wmask];
}

const struct insn_window *insn_win_lookup(struct insn_decoder *d, const char *build_id,
					  uint64_t off)
{
	struct insn_window *w;
	uint64_t bh;

	if (!build_id || !*build_id || !d->wins)
		return NULL;
	bh = insn__hash_bid(build_id);
	w = &d->wins[insn__mix(bh, off) & d->wmask];
	return w->used && w->bid_hash == bh && w->off == off ? w : NULL;
}

const struct insn_window *insn_win_decode(struct insn_decoder *d, const uint8_t *code,
					  size_t len, uint64_t code_ip, uint64_t ip,
					  const char *build_id, uint64_t off)
{
	struct winsn v[INSN_WIN_BACK_MAX + INSN_WIN_FWD_MAX];
	unsigned nb = 0, nf = 0;
	struct insn_window *win;
	uint64_t bh, start, at;
	cs_insn *ci;

	if (!build_id || !*build_id || ip < code_ip || ip - code_ip >= len)
		return NULL;
	bh = insn__hash_bid(build_id);
	if (!(win = win_slot(d, bh, off)) || !(ci = cs_malloc(d->cs)))
		return NULL;
	memset(win, 0, sizeof(*win));
	win->used = true;
	win->bid_hash = bh;
	win->off = off;
	d->wst.decoded++;
	start = window_start(d, ci, code, len, code_ip, ip);
	if (!start) {
		d->wst.misaligned++;      /* cached as an empty window: ninsns 0 */
		cs_free(ci, 1);
		return win;
	}
	const uint8_t *p = code + (start - code_ip);
	size_t left = len - (start - code_ip);
	at = start;
	while (left && cs_disasm_iter(d->cs, &p, &left, &at, ci)) {
		bool before = ci->address < ip;
		if ((before && nb >= INSN_WIN_BACK_MAX) || (!before && nf >= INSN_WIN_FWD_MAX))
			break;
		struct winsn *wi = &v[nb + nf];
		memset(&wi->d, 0, sizeof(wi->d));
		insn__fill(d, &wi->d, ci, before);
		effects(d, ci, &wi->ef);
		wi->next = at;
		if (before) {
			nb++;
		} else {
			nf++;
			if (is_branch(d, ci))
				break;
		}
	}
	cs_free(ci, 1);
	dataflow(win, v, nb, nf, ip);
	win->ninsns = (uint8_t)(nb + nf ? nb + nf : 1);
	win->pos = (uint8_t)nb;
	win->dep_load = dependent_load(v, nb + nf);
	win->after_read = after_reads(v, nb + nf, false);
	win->after_unstrided = after_reads(v, nb + nf, true);
	for (unsigned k = 0; nf && k < v[nb].d.n; k++)
		win->ip_rep |= (v[nb].d.m[k].flags & INSN_F_REP) != 0;
	win->block = insn__mix(bh ^ win->ninsns, off - (ip - start)) | 1;
	win->ok = true;
	return win;
}

unsigned insn_win_eval(struct insn_decoder *d, const struct insn_window *w, uint64_t ip,
		       const struct insn_ctx *ctx, struct insn_win_result *res)
{
	res->n = 0;
	res->ninsns = w->ok ? w->ninsns : 0;
	res->nmem = w->nmem;
	res->block = w->block;
	res->pos = w->pos;
	res->dep_load = w->dep_load;
	res->after_read = w->after_read;
	res->after_unstrided = w->after_unstrided;
	res->ip_rep = w->ip_rep;
	if (!w->ok)
		return 0;
	d->wst.samples++;
	d->wst.insns += w->ninsns;
	d->wst.lost += w->lost;
	for (unsigned i = 0; i < w->n; i++) {
		const struct wacc *a = &w->a[i];
		struct insn_access acc;
		if (!insn__eval_mem(&a->m, a->addr32, ip + (uint64_t)(int64_t)a->next_off, ctx, &acc))
			continue;
		res->acc[res->n++] = acc;
		d->wst.accesses++;
		if (a->fwd)
			d->wst.fwd++;
		else
			d->wst.back++;
		if (acc.flags & INSN_F_CHASED)
			d->wst.chased++;
	}
	return res->n;
}

const struct insn_win_stats *insn_win_stats(const struct insn_decoder *d)
{
	return &d->wst;
}
