/* unwind: a copied stack unwinds against the image its records came from. The daemon
 * checks a process's /proc maps against that image (procmaps.c same_image) and passes
 * them as known; libdwfl then reads /proc again for its modules. A shell's child that
 * exec'd between the two reads showed expr's modules to the second one, and its copy
 * (taken in dash before the exec) unwound to one frame, cut (ctor_stacks under load).
 * Here a real copy of this test's own stack, with this process's maps as known, is
 * unwound under the pid of a child that exec'd another program: it must unwind as it
 * does under this process's own pid, whole, through main. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "bpf/alloc.h"
#include "daemon/alloc/unwind.h"
#include "symbolizer/maps.h"

#define COPY_MAX 16384u

/* The stack's bytes as they are, redzones included (ASan's memcpy would refuse them):
 * byte by byte through volatile, so that no memcpy call stands in. */
__attribute__((no_sanitize_address)) static void copy_raw(unsigned char *dst, uint64_t src,
							  size_t n)
{
	const volatile unsigned char *s = (const volatile unsigned char *)(uintptr_t)src;

	for (size_t i = 0; i < n; i++)
		dst[i] = s[i];
}

/* A copy of this stack as BPF takes one: every register (DWARF order), the IP at the
 * label after the stores, the bytes from rsp up. */
__attribute__((noinline)) static void capture(struct ev_ustack *e, const struct maps *m)
{
	unsigned long long *r = e->regs;

	asm volatile("movq %%rax, 0(%0)\n\tmovq %%rdx, 8(%0)\n\tmovq %%rcx, 16(%0)\n\t"
		     "movq %%rbx, 24(%0)\n\tmovq %%rsi, 32(%0)\n\tmovq %%rdi, 40(%0)\n\t"
		     "movq %%rbp, 48(%0)\n\tmovq %%rsp, 56(%0)\n\tmovq %%r8, 64(%0)\n\t"
		     "movq %%r9, 72(%0)\n\tmovq %%r10, 80(%0)\n\tmovq %%r11, 88(%0)\n\t"
		     "movq %%r12, 96(%0)\n\tmovq %%r13, 104(%0)\n\tmovq %%r14, 112(%0)\n\t"
		     "movq %%r15, 120(%0)\n\tleaq 1f(%%rip), %%rax\n\tmovq %%rax, 128(%0)\n1:\n"
		     : : "r"(r) : "rax", "memory");
	e->sp = r[7];
	const struct map_entry *stack = maps_find(m, e->sp);   /* this thread's [stack] */
	assert_non_null(stack);
	uint64_t end = stack->end;
	e->len = (unsigned)(end - e->sp < COPY_MAX ? end - e->sp : COPY_MAX);
	copy_raw(e->data, e->sp, e->len);
}

static unsigned walk(uint32_t pid, const struct maps *known, const struct ev_ustack *e,
		     bool *truncated)
{
	struct unwinder *uw = NULL;
	uint64_t pcs[64];
	unsigned n = 0;

	unwind_stack(&uw, pid, known, true, e, e->len, pcs, 64, &n, truncated);
	unwinder_free(uw);
	return n;
}

static void test_other_image_under_pid(void **state)
{
	struct maps self = { 0 };
	struct ev_ustack *e = calloc(1, sizeof(*e));
	bool cut_self, cut_child;

	(void)state;
	assert_non_null(e);
	assert_int_equal(maps_read_pid(&self, getpid()), 0);
	capture(e, &self);
	unsigned n_self = walk((uint32_t)getpid(), &self, e, &cut_self);
	assert_true(n_self >= 3);   /* capture, this test, cmocka... up to main's caller */
	assert_false(cut_self);

	/* A child that execs sleep: /proc/CHILD/maps shows sleep's modules once it has. It
	 * dies with this test and holds none of its output (a failed assertion would leave
	 * the test's runner waiting on sleep's copy of the pipe). */
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
		    prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			_exit(126);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	struct maps other = { 0 };
	bool sleeping = false;
	for (int i = 0; i < 500 && !sleeping; i++) {
		maps_free(&other);
		if (i)
			usleep(10000);
		/* Read across its exec, the maps read empty (-ESRCH): the file was opened on
		 * the old image's mm, gone by the read (CI's clean clone saw it). */
		int rc = maps_read_pid(&other, child);
		assert_true(rc == 0 || rc == -ESRCH);
		for (size_t j = 0; j < other.n; j++)
			sleeping |= strstr(other.v[j].path, "/sleep") != NULL;
	}
	assert_true(sleeping);

	unsigned n_child = walk((uint32_t)child, &self, e, &cut_child);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(n_child, n_self);
	assert_false(cut_child);
	maps_free(&other);
	maps_free(&self);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_other_image_under_pid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
