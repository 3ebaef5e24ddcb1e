/* ustack: a copied stack that unwinds to no frame at all (its process gone before its
 * maps were read, its first IP in none of them) makes no context: the key's objects
 * then count as a stack lost (record's "objects in the context without frames" line),
 * rather than filling a frameless context that reads as a stack of its own (ctor_stacks
 * saw one expr allocation filed so in one of three shell runs). The same for a
 * frame-pointer stack whose one frame is a bare IP in no mapping. The controls: the same
 * records with an IP in this test's own code, in this running process, make a context. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "bpf/alloc.h"
#include "daemon/alloc/events.h"
#include "daemon/alloc/intern.h"
#include "daemon/alloc/procs.h"
#include "daemon/alloc/ustack.h"
#include "daemon/record/recorder.h"

/* A copy of 256 zero bytes whose registers put the IP at ip. */
static struct ev_ustack *copy_at(uint32_t pid, uint64_t key, uint64_t ip)
{
	struct ev_ustack *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->h.type = EV_USTACK;
	e->h.tgid = pid;
	e->h.start_ns = 1;
	e->key = key;
	e->sp = 0x7ffff0000000ULL;
	e->regs[7] = e->sp;       /* rsp */
	e->regs[6] = e->sp + 64;  /* rbp */
	e->regs[16] = ip;         /* rip */
	e->len = 256;
	return e;
}

static void unwind_one(uint32_t pid, uint64_t key, uint64_t ip, struct istack **out,
		       uint64_t *ustacks)
{
	struct recorder r = { 0 };
	struct ev_ustack *e = copy_at(pid, key, ip);
	struct proc *p;

	r.procs.in = &r.in;
	assert_non_null(p = proc_get(&r.procs, pid, 1));
	ustack_handle(&r, e, offsetof(struct ev_ustack, data) + e->len);
	*out = hmap_find(&p->stacks, stack_slot(key), NULL, NULL);
	if (*out)   /* outlives the interner below: only whether it was there, and its size */
		*out = (struct istack *)(uintptr_t)((*out)->nframes + 1);
	*ustacks = r.ustacks;
	free(e);
	proctab_free(&r.procs);
	interner_free(&r.in);
}

static void test_gone_process_no_frame(void **state)
{
	struct istack *s;
	uint64_t n;

	(void)state;
	/* 0x1000 is in no mapping anyway. */
	unwind_one(mpd_reaped_pid(), ALLOC_USTACK_KEY | 7, 0x1000, &s, &n);
	assert_null(s);
	assert_int_equal(n, 0);
}

static void test_own_code_makes_a_context(void **state)
{
	struct istack *s;
	uint64_t n;

	(void)state;
	unwind_one((uint32_t)getpid(), ALLOC_USTACK_KEY | 8,
		   (uint64_t)(uintptr_t)test_own_code_makes_a_context + 4, &s, &n);
	assert_non_null(s);
	assert_true((uintptr_t)s >= 2);   /* at least the IP's frame */
	assert_int_equal(n, 1);
}

/* A frame-pointer stack of one bare IP (the kernel could not take the mmap lock). */
static void fp_one(uint32_t pid, uint64_t key, uint64_t ip, unsigned *nframes)
{
	struct recorder r = { 0 };
	struct ev_stack e = { .h = { .type = EV_STACK, .tgid = pid, .start_ns = 1 }, .key = key,
			      .nframes = 1 };
	struct istack *s;
	struct proc *p;

	r.procs.in = &r.in;
	e.frames[0].status = 2;
	e.frames[0].ip = ip;
	assert_non_null(p = proc_get(&r.procs, pid, 1));
	events_common(&r, &e, sizeof(e), NULL);
	s = hmap_find(&p->stacks, stack_slot(key), NULL, NULL);
	*nframes = s ? s->nframes + 1 : 0;   /* 0: no context */
	proctab_free(&r.procs);
	interner_free(&r.in);
}

static void test_fp_stack_no_frame(void **state)
{
	unsigned n;

	(void)state;
	fp_one(mpd_reaped_pid(), 9, 0x1000, &n);
	assert_int_equal(n, 0);
	fp_one((uint32_t)getpid(), 10, (uint64_t)(uintptr_t)test_fp_stack_no_frame + 4, &n);
	assert_int_equal(n, 2);   /* one frame */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gone_process_no_frame),
		cmocka_unit_test(test_own_code_makes_a_context),
		cmocka_unit_test(test_fp_stack_no_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
