// stack_shapes: allocations whose call stacks exact mode's frame-pointer walk must get
// whole, each from its own noinline site function (tests/integration/check_stacks.py
// knows every site's chain by construction):
//   big_frames_leaf   under --depth recursions of big_frame, each frame larger than the
//                     walk's copy chunk (bpf/alloc.h ALLOC_STACK_CHUNK), then main;
//   thread_new_leaf   operator new (which calls malloc: a nested allocator call) in
//                     --threads threads at once, each on its own stack;
//   coro_leaf         on a makecontext stack (an mmap'd mapping, not the thread's stack);
//   main_leaf         on main's stack, before and after the coroutine ran.
// Each site makes --count allocations of its own size (main_leaf twice --count).
// usage: stack_shapes [--depth N] [--threads T] [--count C]
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define BIG_FRAME_BYTES 1500    // more than ALLOC_STACK_CHUNK (1024)
#define CORO_STACK_BYTES (256 << 10)
#define MAX_THREADS 16

struct Obj { long v[7]; };      // 56 bytes: thread_new_leaf's size

static unsigned long count = 50;
static volatile uintptr_t sink;
static ucontext_t main_ctx, coro_ctx;

__attribute__((noinline)) void big_frames_leaf()
{
	void *p = malloc(24);
	sink += (uintptr_t)p;
	free(p);
}

__attribute__((noinline)) void big_frame(int depth)
{
	volatile char pad[BIG_FRAME_BYTES];

	pad[0] = (char)depth;
	pad[BIG_FRAME_BYTES - 1] = pad[0];
	if (depth > 1)
		big_frame(depth - 1);
	else
		big_frames_leaf();
	sink += pad[BIG_FRAME_BYTES - 1];
}

__attribute__((noinline)) void thread_new_leaf()
{
	Obj *o = new Obj();
	sink += (uintptr_t)o;
	delete o;
}

__attribute__((noinline)) void *thread_body(void *)
{
	for (unsigned long i = 0; i < count; i++)
		thread_new_leaf();
	return nullptr;
}

__attribute__((noinline)) void coro_leaf()
{
	void *p = malloc(40);
	sink += (uintptr_t)p;
	free(p);
}

__attribute__((noinline)) void coro_body()
{
	for (unsigned long i = 0; i < count; i++)
		coro_leaf();
	swapcontext(&coro_ctx, &main_ctx);
}

__attribute__((noinline)) void main_leaf()
{
	void *p = malloc(72);
	sink += (uintptr_t)p;
	free(p);
}

int main(int argc, char **argv)
{
	int depth = 40, threads = 4;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--depth"))
			depth = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--count"))
			count = strtoul(argv[i + 1], nullptr, 10);
		else {
			fprintf(stderr, "stack_shapes: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (depth < 1 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "stack_shapes: bad --depth or --threads\n");
		return 2;
	}
	for (unsigned long i = 0; i < count; i++)
		main_leaf();
	for (unsigned long i = 0; i < count; i++)
		big_frame(depth);

	pthread_t tid[MAX_THREADS];
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], nullptr, thread_body, nullptr)) {
			fprintf(stderr, "stack_shapes: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], nullptr);

	void *stack = mmap(nullptr, CORO_STACK_BYTES, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED || getcontext(&coro_ctx)) {
		fprintf(stderr, "stack_shapes: coroutine stack\n");
		return 1;
	}
	coro_ctx.uc_stack.ss_sp = stack;
	coro_ctx.uc_stack.ss_size = CORO_STACK_BYTES;
	coro_ctx.uc_link = &main_ctx;
	makecontext(&coro_ctx, coro_body, 0);
	swapcontext(&main_ctx, &coro_ctx);
	munmap(stack, CORO_STACK_BYTES);

	for (unsigned long i = 0; i < count; i++)
		main_leaf();
	return 0;
}
