/* insn_window: the straight-line window around a sampled IP, decoded from real code
 * (functions assembled into this test), recovers every operand whose address registers
 * still hold or moved by a known constant, the chase's next step for a load that
 * replaced its own base, and none whose registers were overwritten. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/insn_window.h"
#include "symbolizer/insn.h"

#define FN(name, body) void name(void); extern const char name##_ip[]; \
	__asm__(".text\n.globl " #name "\n.type " #name ",@function\n" #name ":\n" body \
		"\n.size " #name ", .-" #name "\n")

/* s += table[i] + heap[i]: two loads per iteration, the index moved after them. */
FN(w_loop, "xor %eax,%eax\n1: mov (%rdi,%rax,8),%rdx\nadd (%rsi,%rax,8),%rdx\n"
	   "add %rdx,%rcx\nadd $1,%rax\n.globl w_loop_ip\nw_loop_ip: cmp %r8,%rax\njne 1b\nret");
/* p = p->next (next at offset 8) */
FN(w_chase, "1: mov 8(%rax),%rax\n.globl w_chase_ip\nw_chase_ip: test %rax,%rax\njne 1b\nret");
/* a pointer spilled to the stack and reloaded; then a push moves rsp */
FN(w_spill, "mov %rdi,8(%rsp)\nmov 8(%rsp),%rdx\nmov (%rdx),%rcx\npush %rbx\n"
	    ".globl w_spill_ip\nw_spill_ip: nop\npop %rbx\nret");
/* the base register overwritten after the load: that load is lost; the one after the IP
 * through rbx (not yet written at that point) is found */
FN(w_clob, "mov (%rbx),%rcx\nmov %rdx,%rbx\n.globl w_clob_ip\nw_clob_ip: nop\nmov (%rsi),%r9\n"
	   "mov %rdi,%rsi\nmov (%rsi),%r10\nret");

/* db_bench's memtable lookup: node->key, then the key's first byte; a stack read after */
FN(w_twomiss, "1: mov (%r15),%rdi\nmovzbl (%rdi),%eax\n.globl w_twomiss_ip\nw_twomiss_ip: "
	      "test %al,%al\nmov 8(%rsp),%rdx\nnop\njns 1b\nret");

/* -O1's spilled pointer: reloaded from a frame slot every pass, then the array read */
FN(w_slot, "1: mov -8(%rbp),%rdx\nadd (%rdx,%rax,1),%rcx\nadd $8,%rax\n"
	   ".globl w_slot_ip\nw_slot_ip: cmp $0x40000,%rax\njne 1b\nret");

static struct insn_ctx regs(void)
{
	struct insn_ctx c;

	memset(&c, 0, sizeof(c));
	c.regs.rax = 0x1000;
	c.regs.rbx = 0x2000;
	c.regs.rdx = 0x4000;
	c.regs.rsi = 0x5000;
	c.regs.rdi = 0x6000;
	c.regs.rsp = 0x7ff0;
	return c;
}

static unsigned eval(struct insn_decoder *d, void (*fn)(void), const char *ip_label, uint64_t off,
		     struct insn_win_result *res)
{
	uint64_t code = (uintptr_t)fn, ip = (uintptr_t)ip_label;
	const struct insn_window *w = insn_win_decode(d, (const uint8_t *)code, ip - code + 32,
						      code, ip, "bid", off);
	struct insn_ctx c = regs();

	assert_non_null(w);
	assert_ptr_equal(insn_win_lookup(d, "bid", off), w);
	return insn_win_eval(d, w, ip, &c, res);
}

static bool has(const struct insn_win_result *r, uint64_t addr, uint8_t flags)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->acc[i].addr == addr && (r->acc[i].flags & flags) == flags)
			return true;
	return false;
}

static void test_loop(void **state)
{
	struct insn_decoder *d;
	struct insn_win_result r;

	(void)state;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	/* IP after add $1,%rax: rax was 0x1000 - 1 at the loads */
	assert_int_equal(eval(d, w_loop, w_loop_ip, 0x10, &r), 2);
	assert_int_equal(r.ninsns, 6);          /* the loop body: head (jne's target) to jne */
	assert_true(has(&r, 0x6000 + 0xfff * 8, 0));
	assert_true(has(&r, 0x5000 + 0xfff * 8, 0));
	/* IP at the loop head: both loads ahead, at rax as it is */
	assert_int_equal(eval(d, w_loop, (const char *)w_loop + 2, 0x11, &r), 2);
	assert_true(has(&r, 0x6000 + 0x1000 * 8, 0) && has(&r, 0x5000 + 0x1000 * 8, 0));
	assert_int_equal(r.ninsns, 6);
	/* an IP inside an instruction: no window */
	assert_int_equal(eval(d, w_loop, (const char *)w_loop + 3, 0x12, &r), 0);
	assert_int_equal(r.ninsns, 0);
	assert_int_equal(insn_win_stats(d)->misaligned, 1);
	insn_decoder_close(d);
}

static void test_chase(void **state)
{
	struct insn_decoder *d;
	struct insn_win_result r;

	(void)state;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	assert_int_equal(eval(d, w_chase, w_chase_ip, 0x20, &r), 1);
	assert_true(has(&r, 0x1000 + 8, INSN_F_CHASED));
	assert_int_equal(insn_win_stats(d)->chased, 1);
	insn_decoder_close(d);
}

static void test_spill(void **state)
{
	struct insn_decoder *d;
	struct insn_win_result r;

	(void)state;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	/* rsp is 8 lower than at the spill; rdx still holds the reloaded pointer; the push
	 * wrote at rsp; the pop after the IP reads there */
	assert_int_equal(eval(d, w_spill, w_spill_ip, 0x30, &r), 6);
	assert_true(has(&r, 0x7ff0 + 8 + 8, 0));     /* mov %rdi,8(%rsp): rsp + 8 back then */
	assert_true(has(&r, 0x4000, 0));             /* mov (%rdx),%rcx */
	assert_true(has(&r, 0x7ff0, INSN_F_STACK));  /* push %rbx and pop %rbx */
	insn_decoder_close(d);
}

/* after_read marks the instructions after a heap-like read (where its misses' samples
 * land), not after the stack read, not the run's first */
static void test_after_read(void **state)
{
	struct insn_decoder *d;
	struct insn_win_result r;

	(void)state;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	eval(d, w_twomiss, w_twomiss_ip, 0x40, &r);
	assert_int_equal(r.ninsns, 6);
	assert_true(r.dep_load);
	assert_int_equal(r.after_read, 1u << 1 | 1u << 2);
	assert_int_equal(r.after_unstrided, 1u << 1 | 1u << 2);   /* r15, rdi: no stride */
	/* an array walked by a stepped index: after its reads, but not unstrided ones */
	eval(d, w_loop, w_loop_ip, 0x10, &r);
	assert_int_equal(r.after_read, 1u << 1 | 1u << 2);
	assert_int_equal(r.after_unstrided, 0);
	/* a frame slot's reload is no heap-like read: no chase through it, nothing after it */
	eval(d, w_slot, w_slot_ip, 0x50, &r);
	assert_int_equal(r.ninsns, 5);
	assert_false(r.dep_load);
	assert_int_equal(r.after_read, 1u << 2);
	assert_int_equal(r.after_unstrided, 0);
	insn_decoder_close(d);
}

static void test_clobbered(void **state)
{
	struct insn_decoder *d;
	struct insn_win_result r;

	(void)state;
	assert_int_equal(insn_decoder_open(&d, 0), 0);
	assert_int_equal(eval(d, w_clob, w_clob_ip, 0x40, &r), 2);
	assert_true(has(&r, 0x5000, 0));             /* mov (%rsi),%r9: rsi not yet written */
	assert_true(has(&r, 0x7ff0, INSN_F_STACK));  /* ret: the window ends with it */
	assert_false(has(&r, 0x2000, 0));            /* rbx was overwritten after the load */
	assert_false(has(&r, 0x6000, 0));            /* past the IP, after rsi was written */
	assert_int_equal(insn_win_stats(d)->lost, 2);
	insn_decoder_close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop),
		cmocka_unit_test(test_chase),
		cmocka_unit_test(test_after_read),
		cmocka_unit_test(test_spill),
		cmocka_unit_test(test_clobbered),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
