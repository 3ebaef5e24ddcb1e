/* Targets that stress the recorder, one per mode:
 *   --fork N        forks N children one after another; each allocates HOSTILE_CHILD_ALLOCS
 *                   blocks of a size unique to it (child i: 1000 + i bytes) and exits;
 *   --exec-alloc    a thread allocates in a loop while the main thread execs /bin/true;
 *   --unmap-stack   moves onto a heap stack (makecontext), unmaps the [stack] mapping it
 *                   came from, then allocates there (the stack walker sees an SP in no
 *                   stack VMA) and exits through _exit.
 * Exit 0 when it did what it was asked. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define HOSTILE_CHILD_ALLOCS 2
#define HOSTILE_STACK_BYTES (256 * 1024)
#define HOSTILE_UNMAPPED_ALLOCS 100

static void *volatile sink;   /* volatile pointer: malloc/free pairs are not elided */

static __attribute__((noinline)) void child_allocs(size_t size)
{
	for (int i = 0; i < HOSTILE_CHILD_ALLOCS; i++) {
		sink = malloc(size);
		free(sink);
	}
}

static int forks(long n)
{
	for (long i = 0; i < n; i++) {
		pid_t p = fork();
		int st;

		if (p < 0)
			return 1;
		if (p == 0) {
			child_allocs(1000 + (size_t)i);
			_exit(0);
		}
		if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	return 0;
}

static void *alloc_loop(void *arg)
{
	for (;;) {
		sink = malloc(64);
		free(sink);
	}
	return NULL;
}

static int exec_alloc(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, alloc_loop, NULL))
		return 1;
	usleep(50 * 1000);
	execl("/bin/true", "true", (char *)NULL);
	return 1;
}

static ucontext_t main_ctx, heap_ctx;

static void on_heap_stack(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t lo = 0, hi = 0;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]"))
			sscanf(line, "%lx-%lx", &lo, &hi);
	if (f)
		fclose(f);
	if (!lo || munmap((void *)lo, hi - lo))
		_exit(1);
	for (int i = 0; i < HOSTILE_UNMAPPED_ALLOCS; i++) {
		sink = malloc(128);
		free(sink);
	}
	_exit(0);   /* nothing to return to: the old stack is gone */
}

static int unmap_stack(void)
{
	void *stk = malloc(HOSTILE_STACK_BYTES);

	if (!stk || getcontext(&heap_ctx))
		return 1;
	heap_ctx.uc_stack.ss_sp = stk;
	heap_ctx.uc_stack.ss_size = HOSTILE_STACK_BYTES;
	heap_ctx.uc_link = NULL;
	makecontext(&heap_ctx, on_heap_stack, 0);
	swapcontext(&main_ctx, &heap_ctx);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--fork"))
		return forks(atol(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "--exec-alloc"))
		return exec_alloc();
	if (argc == 2 && !strcmp(argv[1], "--unmap-stack"))
		return unmap_stack();
	fprintf(stderr, "usage: hostile --fork N | --exec-alloc | --unmap-stack\n");
	return 2;
}
