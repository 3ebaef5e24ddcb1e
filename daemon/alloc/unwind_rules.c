/* Per-address unwind rules (see unwind_rules.h). Invariant: a walk here reads the same
 * words of the copy, in the same order, and yields the same frames and end as libdwfl's
 * (elfutils frame_unwind.c handle_cfi) would: every register's rule is applied, not only
 * the ones the next frame needs. Cost: an open-addressing lookup and up to 17 register
 * rules per frame; libdw's CFI interpretation once per address, at most
 * RULES_MAX addresses per process image (~110 bytes each). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <dwarf.h>
#include "daemon/alloc/unwind_rules.h"

#define RULES_MIN 256            /* first table size (addresses) */
#define RULES_MAX 4096           /* table size at which it is emptied instead of grown */
#define NREGS ALLOC_NREGS        /* x86-64 DWARF registers rax..r15, rip */
#define RA_REG 16                /* rip: the return address column */

enum how { H_UNDEF, H_SAME, H_AT_CFA, H_VAL_CFA, H_REG };

struct rule {
	uint64_t pc;                 /* the address looked up (pc, or pc - 1); 0: free slot */
	int32_t cfa_off;
	uint8_t cfa_reg;
	bool slow;                   /* libdwfl must walk from this address */
	uint8_t how[NREGS];          /* enum how */
	int32_t arg[NREGS];          /* H_AT_CFA, H_VAL_CFA: offset; H_REG: register */
};

struct unwind_rules {
	struct rule *v;
	size_t cap, used;            /* cap: a power of two */
	uint64_t decoded, lookups;
};

bool ustack_read_word(const struct ev_ustack *u, size_t len, uint64_t addr, uint64_t *out)
{
	uint64_t lo = u->sp;

	if (addr < lo || addr - lo > len || len - (addr - lo) < sizeof(*out))
		return false;
	memcpy(out, u->data + (addr - lo), sizeof(*out));
	return true;
}

static bool fits32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* One register's rule from libdw's expression for it (dwarf_frame_register's forms). */
static bool decode_reg(Dwarf_Frame *fr, int regno, struct rule *r)
{
	Dwarf_Op mem[3], *ops;
	size_t nops, i = 1;

	if (dwarf_frame_register(fr, regno, mem, &ops, &nops))
		return false;
	if (nops == 0) {
		if (ops != NULL && ops != mem)
			return false;
		r->how[regno] = ops ? H_UNDEF : H_SAME;
		return true;
	}
	if (nops == 1 && ops[0].atom == DW_OP_regx && ops[0].number < NREGS) {
		r->how[regno] = H_REG;
		r->arg[regno] = (int32_t)ops[0].number;
		return true;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	int64_t off = 0;
	if (i < nops && ops[i].atom == DW_OP_plus_uconst)
		off = (int64_t)ops[i++].number;
	r->how[regno] = H_AT_CFA;
	if (i < nops && ops[i].atom == DW_OP_stack_value) {
		r->how[regno] = H_VAL_CFA;
		i++;
	}
	r->arg[regno] = (int32_t)off;
	return i == nops && fits32(off);
}

/* The rule of fr's row; false when only libdwfl can apply it. */
static bool decode(Dwarf_Frame *fr, struct rule *r)
{
	Dwarf_Addr start, end;
	Dwarf_Op *ops;
	size_t nops;
	bool signal;
	int64_t off;
	uint64_t reg;

	if (dwarf_frame_info(fr, &start, &end, &signal) != RA_REG || signal)
		return false;   /* a signal frame's caller is unwound from its own pc */
	if (dwarf_frame_cfa(fr, &ops, &nops) || nops != 1)
		return false;
	if (ops[0].atom == DW_OP_bregx) {
		reg = ops[0].number;
		off = (int64_t)ops[0].number2;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		reg = ops[0].atom - DW_OP_breg0;
		off = (int64_t)ops[0].number;
	} else {
		return false;
	}
	if (reg >= NREGS || !fits32(off))
		return false;
	r->cfa_reg = (uint8_t)reg;
	r->cfa_off = (int32_t)off;
	for (int i = 0; i < NREGS; i++)
		if (!decode_reg(fr, i, r))
			return false;
	return true;
}

/* As libdwfl finds a row: the module's .eh_frame, then its .debug_frame. */
static void build(Dwfl *dwfl, uint64_t pc, struct rule *r)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
	Dwarf_Frame *fr = NULL;
	Dwarf_CFI *cfi;
	Dwarf_Addr bias;

	r->slow = true;
	if (!mod)
		return;
	cfi = dwfl_module_eh_cfi(mod, &bias);
	if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &fr)) {
		fr = NULL;
		cfi = dwfl_module_dwarf_cfi(mod, &bias);
		if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &fr))
			return;
	}
	r->slow = !decode(fr, r);
	free(fr);
}

static size_t slot_of(uint64_t pc, size_t cap)
{
	return (size_t)((pc * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
}

static int grow(struct unwind_rules *t)
{
	size_t cap = t->cap ? t->cap * 2 : RULES_MIN;

	if (cap > RULES_MAX) {   /* full: start over rather than grow without bound */
		rules_clear(t);
		cap = RULES_MIN;
	}
	struct rule *v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->v[i].pc)
			continue;
		size_t s = slot_of(t->v[i].pc, cap);
		while (v[s].pc)
			s = (s + 1) & (cap - 1);
		v[s] = t->v[i];
	}
	free(t->v);
	t->v = v;
	t->cap = cap;
	return 0;
}

static const struct rule *lookup(struct unwind_rules *t, Dwfl *dwfl, uint64_t pc)
{
	size_t s;

	t->lookups++;
	if (!pc || (!t->cap && grow(t)))
		return NULL;
	for (s = slot_of(pc, t->cap); t->v[s].pc; s = (s + 1) & (t->cap - 1))
		if (t->v[s].pc == pc)
			return &t->v[s];
	if (4 * (t->used + 1) > 3 * t->cap) {
		if (grow(t))
			return NULL;
		for (s = slot_of(pc, t->cap); t->v[s].pc; s = (s + 1) & (t->cap - 1))
			;
	}
	struct rule *r = &t->v[s];
	memset(r, 0, sizeof(*r));
	build(dwfl, pc, r);
	r->pc = pc;
	t->used++;
	t->decoded++;
	return r;
}

/* Registers of the caller of the frame whose registers are regs/set (bit i: register
 * i is known), by rule r; false when its return address is undefined or unreadable
 * (libdwfl's outermost frame). */
static bool step(const struct rule *r, const struct ev_ustack *u, size_t len, uint64_t *regs,
		 uint32_t *set, bool *read_failed, uint64_t *top)
{
	uint64_t out[NREGS], cfa = regs[r->cfa_reg] + (uint64_t)(int64_t)r->cfa_off;
	bool cfa_ok = *set >> r->cfa_reg & 1;
	uint32_t got = 0;
	bool ra_undefined = false;

	for (int i = 0; i < NREGS; i++) {
		uint64_t at = cfa + (uint64_t)(int64_t)r->arg[i];
		switch (r->how[i]) {
		case H_UNDEF:
			ra_undefined |= i == RA_REG;
			continue;
		case H_SAME:
			if (!(*set >> i & 1))
				continue;
			out[i] = regs[i];
			break;
		case H_AT_CFA:
			if (!cfa_ok)
				continue;
			if (!ustack_read_word(u, len, at, &out[i])) {
				*read_failed = true;
				continue;
			}
			if (at + sizeof(out[i]) > *top)
				*top = at + sizeof(out[i]);
			break;
		case H_VAL_CFA:
			if (!cfa_ok)
				continue;
			out[i] = at;
			break;
		case H_REG:
			if (!(*set >> r->arg[i] & 1))
				continue;
			out[i] = regs[r->arg[i]];
			break;
		}
		got |= 1u << i;
	}
	if (ra_undefined || !(got >> RA_REG & 1) || !out[RA_REG])
		return false;
	memcpy(regs, out, sizeof(out));
	*set = got;
	return true;
}

int rules_walk(struct unwind_rules **rp, Dwfl *dwfl, const struct ev_ustack *u, size_t len,
	       uint64_t *pcs, unsigned max, unsigned *n, bool *truncated, uint64_t *top)
{
	struct unwind_rules *t = *rp;
	uint64_t regs[NREGS];
	uint32_t set = (1u << RA_REG) - 1;   /* rip is the pc, not a register, at first */
	bool read_failed = false, full = false;
	uint64_t pc = u->regs[RA_REG];

	*n = 0;
	if (!t && !(t = *rp = calloc(1, sizeof(*t))))
		return RULES_SLOW;
	memcpy(regs, u->regs, sizeof(regs));
	*top = 0;
	for (;;) {
		if (*n == max) {
			full = true;
			break;
		}
		/* A return address's call is the byte before; the first pc is exact. */
		const struct rule *r = lookup(t, dwfl, *n ? pc - 1 : pc);
		pcs[(*n)++] = pc;
		if (!r || r->slow)
			return RULES_SLOW;
		if (!step(r, u, len, regs, &set, &read_failed, top))
			break;
		pc = regs[RA_REG];
	}
	*truncated = full || read_failed;
	return RULES_WALKED;
}

void rules_clear(struct unwind_rules *r)
{
	if (!r)
		return;
	free(r->v);
	r->v = NULL;
	r->cap = r->used = 0;
}

void rules_free(struct unwind_rules *r)
{
	if (!r)
		return;
	free(r->v);
	free(r);
}

void rules_stats(const struct unwind_rules *r, uint64_t *decoded, uint64_t *lookups)
{
	*decoded = r ? r->decoded : 0;
	*lookups = r ? r->lookups : 0;
}
