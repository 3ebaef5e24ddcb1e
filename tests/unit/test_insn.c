/* insn: effective addresses, sizes and read/write of x86-64 instruction forms, each from
 * exact bytes (assembled with GNU as, -M intel shown) and one fixed register set. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/insn.h"

#define IP 0x400000ULL
#define R INSN_READ
#define W INSN_WRITE
#define RW (INSN_READ | INSN_WRITE)

struct exp_acc { uint64_t addr; uint32_t size; uint8_t rw; uint8_t flags; };
struct form {
	const char *name;
	uint8_t bytes[16];
	unsigned len;
	enum insn_status status;
	unsigned n;
	struct exp_acc acc[INSN_MAX_ACCESSES];
};

static const struct form forms[] = {
	{ "mov eax,[rdi]", {0x8b, 0x07}, 2, INSN_OK, 1, {{0x6000, 4, R, 0}} },
	{ "mov [rdi+rcx*8+0x10],rax", {0x48, 0x89, 0x44, 0xcf, 0x10}, 5, INSN_OK, 1,
	  {{0x6028, 8, W, 0}} },
	{ "mov rax,[rip+0x100]", {0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00}, 7, INSN_OK, 1,
	  {{IP + 7 + 0x100, 8, R, INSN_F_RIP}} },
	{ "add dword [rax],1", {0x83, 0x00, 0x01}, 3, INSN_OK, 1, {{0x1000, 4, RW, 0}} },
	{ "cmp byte [rbx-1],0", {0x80, 0x7b, 0xff, 0x00}, 4, INSN_OK, 1, {{0x1fff, 1, R, 0}} },
	{ "rep movsb", {0xf3, 0xa4}, 2, INSN_OK, 2,
	  {{0x6000, 1, W, INSN_F_STRING | INSN_F_REP}, {0x5000, 1, R, INSN_F_STRING | INSN_F_REP}} },
	{ "rep stosq", {0xf3, 0x48, 0xab}, 3, INSN_OK, 1,
	  {{0x6000, 8, W, INSN_F_STRING | INSN_F_REP}} },
	{ "lodsd", {0xad}, 1, INSN_OK, 1, {{0x5000, 4, R, INSN_F_STRING}} },
	{ "cmpsq", {0x48, 0xa7}, 2, INSN_OK, 2,
	  {{0x5000, 8, R, INSN_F_STRING}, {0x6000, 8, R, INSN_F_STRING}} },
	{ "scasb", {0xae}, 1, INSN_OK, 1, {{0x6000, 1, R, INSN_F_STRING}} },
	{ "push rbx", {0x53}, 1, INSN_OK, 1, {{0x7fe8, 8, W, INSN_F_STACK}} },
	{ "pop rbx", {0x5b}, 1, INSN_OK, 1, {{0x7ff0, 8, R, INSN_F_STACK}} },
	{ "call rel32", {0xe8, 0x00, 0x01, 0x00, 0x00}, 5, INSN_OK, 1,
	  {{0x7fe8, 8, W, INSN_F_STACK}} },
	{ "ret", {0xc3}, 1, INSN_OK, 1, {{0x7ff0, 8, R, INSN_F_STACK}} },
	{ "push qword [rax+8]", {0xff, 0x70, 0x08}, 3, INSN_OK, 2,
	  {{0x1008, 8, R, 0}, {0x7fe8, 8, W, INSN_F_STACK}} },
	{ "leave", {0xc9}, 1, INSN_OK, 1, {{0x8000, 8, R, INSN_F_STACK}} },
	{ "movdqu xmm0,[rsi]", {0xf3, 0x0f, 0x6f, 0x06}, 4, INSN_OK, 1, {{0x5000, 16, R, 0}} },
	{ "vmovdqu [rdi],ymm1", {0xc5, 0xfe, 0x7f, 0x0f}, 4, INSN_OK, 1, {{0x6000, 32, W, 0}} },
	{ "vpgatherdd ymm0,[rax+ymm1*4+0x40],ymm2", {0xc4, 0xe2, 0x6d, 0x90, 0x44, 0x88, 0x40}, 7,
	  INSN_OK, 1, {{0x1040, 4, R, INSN_F_BASE_ONLY}} },
	{ "mov rax,fs:0x28", {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, 9, INSN_OK, 1,
	  {{0x7f0028, 8, R, INSN_F_TLS}} },
	{ "lea rax,[rdi+8]", {0x48, 0x8d, 0x47, 0x08}, 4, INSN_NO_ACCESS, 0, {{0}} },
	{ "nop word [rax+rax]", {0x66, 0x0f, 0x1f, 0x04, 0x00}, 5, INSN_NO_ACCESS, 0, {{0}} },
	{ "add eax,ebx", {0x01, 0xd8}, 2, INSN_NO_MEM, 0, {{0}} },
	{ "mov eax,[edi] (addr32)", {0x67, 0x8b, 0x07}, 3, INSN_OK, 1, {{0x6000, 4, R, 0}} },
	{ "lock cmpxchg [rdi],ecx", {0xf0, 0x0f, 0xb1, 0x0f}, 4, INSN_OK, 1, {{0x6000, 4, RW, 0}} },
	{ "movss xmm0,[rsp+4]", {0xf3, 0x0f, 0x10, 0x44, 0x24, 0x04}, 6, INSN_OK, 1,
	  {{0x7ff4, 4, R, 0}} },
	{ "pop qword [rsp]", {0x8f, 0x04, 0x24}, 3, INSN_OK, 2,
	  {{0x7ff8, 8, W, 0}, {0x7ff0, 8, R, INSN_F_STACK}} },
	{ "call qword [rip+0x20]", {0xff, 0x15, 0x20, 0x00, 0x00, 0x00}, 6, INSN_OK, 2,
	  {{IP + 6 + 0x20, 8, R, INSN_F_RIP}, {0x7fe8, 8, W, INSN_F_STACK}} },
	{ "vmovaps zmm0,[rdi]", {0x62, 0xf1, 0x7c, 0x48, 0x28, 0x07}, 6, INSN_OK, 1,
	  {{0x6000, 64, R, 0}} },
	{ "mov [r12+r13*2-0x20],r14w", {0x66, 0x47, 0x89, 0x74, 0x6c, 0xe0}, 6, INSN_OK, 1,
	  {{0x8fea, 2, W, 0}} },
	{ "movzx eax,byte [rdx+rsi]", {0x0f, 0xb6, 0x04, 0x32}, 4, INSN_OK, 1, {{0x9000, 1, R, 0}} },
	{ "prefetcht0 [rax]", {0x0f, 0x18, 0x08}, 3, INSN_NO_ACCESS, 0, {{0}} },
	{ "mov dword gs:[rax+4],7", {0x65, 0xc7, 0x40, 0x04, 0x07, 0x00, 0x00, 0x00}, 8, INSN_OK, 1,
	  {{0x7e1004, 4, W, INSN_F_TLS}} },
	{ "xchg [rsp+16],rdx", {0x48, 0x87, 0x54, 0x24, 0x10}, 5, INSN_OK, 1,
	  {{0x8000, 8, RW, 0}} },
	{ "invalid ff /7", {0xff, 0xff}, 2, INSN_UNDECODABLE, 0, {{0}} },
	{ "truncated mov", {0x48, 0x8b}, 2, INSN_UNDECODABLE, 0, {{0}} },
};

static void set_regs(struct insn_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->regs.rax = 0x1000;
	c->regs.rbx = 0x2000;
	c->regs.rcx = 3;
	c->regs.rdx = 0x4000;
	c->regs.rsi = 0x5000;
	c->regs.rdi = 0x100006000ULL & 0xffffffffffULL;  /* high bits: addr32 must mask */
	c->regs.rsp = 0x7ff0;
	c->regs.rbp = 0x8000;
	c->regs.r12 = 0x9000;
	c->regs.r13 = 5;
	c->regs.rip = IP;
	c->fs_base = 0x7f0000;
	c->gs_base = 0x7e0000;
	c->fs_known = c->gs_known = true;
}

static void check_form(struct insn_decoder *d, const struct form *f, const struct insn_ctx *c)
{
	struct insn_result res;
	enum insn_status s = insn_access_at(d, f->bytes, f->len, IP, NULL, 0, c, &res);

	print_message("%-40s -> %s n=%u\n", f->name, insn_status_name(s), res.n);
	assert_int_equal(s, f->status);
	assert_int_equal(res.n, f->n);
	if (f->status != INSN_UNDECODABLE)
		assert_int_equal(res.len, f->len);
	for (unsigned i = 0; i < f->n; i++) {
		const struct exp_acc *e = &f->acc[i];
		bool found = false;
		for (unsigned j = 0; j < res.n; j++) {
			uint64_t a = res.acc[j].addr;
			if (f->len == 3 && f->bytes[0] == 0x67)
				a &= 0xffffffffULL;
			if (a != e->addr || (res.acc[j].flags & INSN_F_STACK) != (e->flags & INSN_F_STACK))
				continue;
			found = true;
			assert_int_equal(res.acc[j].size, e->size);
			assert_int_equal(res.acc[j].rw, e->rw);
			assert_int_equal(res.acc[j].flags, e->flags);
		}
		if (!found)
			fail_msg("%s: no access at %#llx", f->name, (unsigned long long)e->addr);
	}
}

static void test_forms(void **state)
{
	struct insn_decoder *d;
	struct insn_ctx c;
	const struct insn_stats *st;

	set_regs(&c);
	c.regs.rdi = 0x6000;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if (forms[i].bytes[0] == 0x67) {
			struct insn_ctx c32 = c;
			c32.regs.rdi = 0x100006000ULL;   /* 32-bit addressing drops bit 32 */
			check_form(d, &forms[i], &c32);
		} else {
			check_form(d, &forms[i], &c);
		}
	}
	st = insn_stats(d);
	assert_int_equal(st->samples, sizeof(forms) / sizeof(forms[0]));
	assert_int_equal(st->by_status[INSN_NO_MEM], 1);
	assert_int_equal(st->by_status[INSN_NO_ACCESS], 3);
	assert_int_equal(st->by_status[INSN_UNDECODABLE], 2);
	assert_int_equal(st->base_only, 1);
	uint64_t sum = 0;
	for (int i = 0; i < INSN_STATUS_MAX; i++)
		sum += st->by_status[i];
	assert_int_equal(sum, st->samples);   /* every sample has exactly one outcome */
	insn_decoder_close(d);
}

/* fs:/gs: with an unknown base: the operand is dropped and counted, never guessed. */
static void test_segment_unknown(void **state)
{
	static const uint8_t fs28[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};
	struct insn_decoder *d;
	struct insn_ctx c;
	struct insn_result res;

	set_regs(&c);
	c.fs_known = false;
	assert_int_equal(insn_decoder_open(&d, 16), 0);
	assert_int_equal(insn_access_at(d, fs28, sizeof(fs28), IP, NULL, 0, &c, &res),
			 INSN_SEG_UNKNOWN);
	assert_int_equal(res.n, 0);
	assert_int_equal(insn_stats(d)->seg_dropped, 1);
	insn_decoder_close(d);
}

/* The decode cache: same (build-id, offset) hits and is reused at another IP (the RIP-
 * relative address follows the runtime IP); a colliding key evicts. */
static void test_cache(void **state)
{
	static const uint8_t rip[] = {0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00};
	static const uint8_t nop[] = {0x90};
	struct insn_decoder *d;
	struct insn_ctx c;
	struct insn_result res;
	const struct insn_decoded *a, *b;

	set_regs(&c);
	assert_int_equal(insn_decoder_open(&d, 1), 0);
	assert_null(insn_lookup(d, "abcd", 0x1234));
	a = insn_decode(d, rip, sizeof(rip), IP, "abcd", 0x1234);
	assert_non_null(a);
	assert_string_equal(insn_decoded_mnemonic(a), "mov");
	assert_ptr_equal(insn_lookup(d, "abcd", 0x1234), a);
	assert_int_equal(insn_eval(d, a, 0x7000000, &c, &res), INSN_OK);
	assert_int_equal(res.acc[0].addr, 0x7000000 + 7 + 0x100);
	assert_int_equal(insn_stats(d)->cache_hits, 1);
	assert_int_equal(insn_stats(d)->cache_misses, 1);
	/* bytes ignored on a hit */
	assert_int_equal(insn_access_at(d, nop, 1, IP, "abcd", 0x1234, &c, &res), INSN_OK);
	assert_int_equal(insn_stats(d)->cache_hits, 2);
	/* one slot: another key evicts */
	b = insn_decode(d, nop, 1, IP, "ef01", 0x1234);
	assert_int_equal(insn_eval(d, b, IP, &c, &res), INSN_NO_MEM);
	assert_int_equal(insn_stats(d)->cache_evictions, 1);
	assert_null(insn_lookup(d, "abcd", 0x1234));
	assert_int_equal(insn_decoder_open(&(struct insn_decoder *){0}, (size_t)1 << 30), -EINVAL);
	insn_decoder_close(d);
}

/* The predecessor of a sampled IP, evaluated with the registers after it ran. */
static void test_prev(void **state)
{
	/* f: mov rcx,[rsi+rax*8]; add rax,8; mov rax,[rax]; push rbx; pop rbx; movsb; ret */
	static const uint8_t f[] = { 0x48, 0x8b, 0x0c, 0xc6, 0x48, 0x83, 0xc0, 0x08,
				     0x48, 0x8b, 0x00, 0x53, 0x5b, 0xa4, 0xc3 };
	struct insn_decoder *d;
	struct insn_ctx c;
	struct insn_result res;
	const struct insn_decoded *dec;

	set_regs(&c);
	c.regs.rdi = 0x6000;
	assert_int_equal(insn_decoder_open(&d, 64), 0);
	/* IP at the add: the load before it, rax unchanged by it */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 4, "bid", 0x104);
	assert_string_equal(insn_decoded_mnemonic(dec), "mov");
	assert_int_equal(insn_eval_prev(d, dec, IP + 4, &c, &res), INSN_OK);
	assert_int_equal(res.acc[0].addr, 0x5000 + 0x1000 * 8);
	assert_int_equal(res.acc[0].size, 8);
	assert_ptr_equal(insn_lookup_prev(d, "bid", 0x104), dec);
	assert_null(insn_lookup(d, "bid", 0x104));          /* apart from the IP's own decode */
	/* ... and both stay cached side by side (a skid sample needs the two), for any IP */
	for (uint64_t off = 0x1000; off < 0x1000 + 64 * 16; off += 16) {
		const struct insn_decoded *own = insn_decode(d, f + 4, 4, IP + 4, "bid", off);
		const struct insn_decoded *pre = insn_decode_prev(d, f, sizeof(f), IP, IP + 4, "bid", off);
		assert_ptr_equal(insn_lookup(d, "bid", off), own);
		assert_ptr_equal(insn_lookup_prev(d, "bid", off), pre);
	}
	/* IP after mov rax,[rax]: rax is the loaded pointer now, so the chase's next step
	 * (the same field of the next node) is what is reported */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 11, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 11, &c, &res), INSN_OK);
	assert_int_equal(res.acc[0].addr, c.regs.rax);
	assert_true(res.acc[0].flags & INSN_F_CHASED);
	/* add rax,8 (no memory operand) still clobbers nothing it reads: prev of IP + 8 */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 8, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 8, &c, &res), INSN_NO_MEM);
	/* after push rbx: rsp already points at the pushed slot */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 12, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 12, &c, &res), INSN_OK);
	assert_int_equal(res.acc[0].addr, 0x7ff0);
	assert_int_equal(res.acc[0].rw, INSN_WRITE);
	/* after pop rbx: the slot is 8 below rsp */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 13, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 13, &c, &res), INSN_OK);
	assert_int_equal(res.acc[0].addr, 0x7fe8);
	/* after movsb: rsi and rdi advanced by one */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 14, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 14, &c, &res), INSN_OK);
	assert_int_equal(res.n, 2);
	for (unsigned i = 0; i < 2; i++)
		assert_true(res.acc[i].addr == 0x4fff || res.acc[i].addr == 0x5fff);
	/* no instruction ends at IP + 2 (inside the first one), nor before the start */
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP + 2, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP + 2, &c, &res), INSN_UNDECODABLE);
	dec = insn_decode_prev(d, f, sizeof(f), IP, IP - 1, NULL, 0);
	assert_int_equal(insn_eval_prev(d, dec, IP - 1, &c, &res), INSN_UNDECODABLE);
	insn_decoder_close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_segment_unknown),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_prev),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
