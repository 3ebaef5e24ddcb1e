/* daemon/alloc/usdt_multi.c: x86-64 USDT argument strings into usdt.bpf.h's spec layout
 * (registers, sub-registers, dereferences, constants, what is refused), and the
 * .note.stapsdt sites of Debian's python3 (python:* probes with semaphores) read into a
 * real BPF spec map, one spec per distinct argument string. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <asm/ptrace.h>
#include <bpf/bpf.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/alloc/usdt_multi.h"

#define PYTHON3 "/usr/bin/python3"

static void test_layout(void **state)
{
	(void)state;
	/* usdt.bpf.h: 12 16-byte argument specs, the cookie, a short: 208 bytes. */
	assert_int_equal(sizeof(struct usdt_arg_spec), 16);
	assert_int_equal(sizeof(struct usdt_spec), 208);
	assert_int_equal(offsetof(struct usdt_spec, usdt_cookie), 192);
	assert_int_equal(offsetof(struct usdt_spec, arg_cnt), 200);
}

static void test_registers(void **state)
{
	struct usdt_spec s;

	(void)state;
	/* memprofd:alloc as gcc emits it in libmemprofd_sampler. */
	assert_int_equal(usdt_parse_args("8@%r12 8@%rbx 8@%rax 4@%r13d 8@%r14", &s), 0);
	assert_int_equal(s.arg_cnt, 5);
	assert_int_equal(s.args[0].arg_type, USDT_ARG_REG);
	assert_int_equal(s.args[0].reg_off, offsetof(struct pt_regs, r12));
	assert_int_equal(s.args[1].reg_off, offsetof(struct pt_regs, rbx));
	assert_int_equal(s.args[2].reg_off, offsetof(struct pt_regs, rax));
	assert_int_equal(s.args[3].reg_off, offsetof(struct pt_regs, r13));
	assert_int_equal(s.args[3].arg_bitshift, 32);
	assert_false(s.args[3].arg_signed);
	assert_int_equal(s.args[4].arg_bitshift, 0);
	assert_int_equal(usdt_parse_args("-1@%sil 2@%ax -8@%rip", &s), 0);
	assert_int_equal(s.args[0].reg_off, offsetof(struct pt_regs, rsi));
	assert_int_equal(s.args[0].arg_bitshift, 56);
	assert_true(s.args[0].arg_signed);
	assert_int_equal(s.args[1].reg_off, offsetof(struct pt_regs, rax));
	assert_int_equal(s.args[1].arg_bitshift, 48);
	assert_int_equal(s.args[2].reg_off, offsetof(struct pt_regs, rip));
}

static void test_deref_const(void **state)
{
	struct usdt_spec s;

	(void)state;
	/* memprofd:watch at -O0 frames: stack slots and a constant. */
	assert_int_equal(usdt_parse_args("8@-96(%rbp) 8@%rsi 8@(%rax) -4@$8 8@$-3", &s), 0);
	assert_int_equal(s.arg_cnt, 5);
	assert_int_equal(s.args[0].arg_type, USDT_ARG_REG_DEREF);
	assert_int_equal((int64_t)s.args[0].val_off, -96);
	assert_int_equal(s.args[0].reg_off, offsetof(struct pt_regs, rbp));
	assert_int_equal(s.args[2].arg_type, USDT_ARG_REG_DEREF);
	assert_int_equal(s.args[2].val_off, 0);
	assert_int_equal(s.args[3].arg_type, USDT_ARG_CONST);
	assert_int_equal(s.args[3].val_off, 8);
	assert_true(s.args[3].arg_signed);
	assert_int_equal((int64_t)s.args[4].val_off, -3);
	assert_int_equal(usdt_parse_args("", &s), 0);
	assert_int_equal(s.arg_cnt, 0);
}

static void test_refused(void **state)
{
	struct usdt_spec s;

	(void)state;
	assert_int_equal(usdt_parse_args("8@counter(%rip)", &s), -EOPNOTSUPP);
	assert_int_equal(usdt_parse_args("8@-8(%rbp,%rax,8)", &s), -EOPNOTSUPP);
	assert_int_equal(usdt_parse_args("8@%xmm0", &s), -EOPNOTSUPP);
	assert_int_equal(usdt_parse_args("3@%rax", &s), -EINVAL);
	assert_int_equal(usdt_parse_args("garbage", &s), -EOPNOTSUPP);
	assert_int_equal(usdt_parse_args("8@%r1 8@%r2 8@%r3 8@%r4 8@%r5 8@%r6 8@%r7 8@%r8 8@%r9 "
					 "8@%r10 8@%r11 8@%r12 8@%r13", &s), -EOPNOTSUPP);
	assert_int_equal(usdt_parse_args("8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax "
					 "8@%rax 8@%rax 8@%rax 8@%rax 8@%rax", &s), -E2BIG);
}

/* python3's python:audit and python:gc__done, read into a real spec map: the attach
 * itself is refused (no program: -EBADF) after the sites and specs were read. */
static void test_python3_notes(void **state)
{
	struct usdt_specs sp;
	struct usdt_spec got, want;
	int map, err;
	uint32_t id = 0;

	(void)state;
	if (access(PYTHON3, R_OK)) {
		skip();
		return;
	}
	map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "usdt_specs", sizeof(uint32_t),
			     sizeof(struct usdt_spec), USDT_SPECS_MAX, NULL);
	if (map < 0) {
		skip();   /* needs CAP_BPF */
		return;
	}
	assert_int_equal(usdt_specs_init(&sp, map, sizeof(struct usdt_spec) + 8), -EINVAL);
	assert_int_equal(usdt_specs_init(&sp, map, sizeof(struct usdt_spec)), 0);
	assert_int_equal(usdt_multi_attach(&sp, -1, PYTHON3, 0, "python", "no__such"), -ENOENT);
	assert_int_equal(usdt_multi_attach(&sp, -1, PYTHON3, 0, "nosuch", "audit"), -ENOENT);
	assert_int_equal(sp.n, 0);
	err = usdt_multi_attach(&sp, -1, PYTHON3, 0, "python", "audit");
	assert_int_equal(err, -EBADF);
	assert_int_equal(sp.n, 1);
	assert_int_equal(bpf_map_lookup_elem(map, &id, &got), 0);
	assert_int_equal(usdt_parse_args(sp.args[0], &want), 0);
	assert_memory_equal(&got, &want, sizeof(got));
	assert_true(got.arg_cnt == 2);
	/* A second probe with the same argument string shares the spec. */
	err = usdt_multi_attach(&sp, -1, PYTHON3, 0, "python", "audit");
	assert_int_equal(err, -EBADF);
	assert_int_equal(sp.n, 1);
	assert_int_equal(usdt_multi_attach(&sp, -1, "/etc/passwd", 0, "python", "audit"), -ENOEXEC);
	usdt_specs_free(&sp);
	close(map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_registers),
		cmocka_unit_test(test_deref_const),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_python3_notes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
