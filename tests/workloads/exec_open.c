/* exec_open: execs itself from inside an allocator call, so that call never returns:
 * its own valloc (probed by name in the executable) runs execv(/proc/self/exe,
 * --second). The second image recurses EXEC_OPEN_DEPTH frames (far below the first
 * call's stack pointer when ASLR is off) and makes EXEC_OPEN_COUNT blocks of 64 bytes
 * at exec_open_site: all must be recorded, none taken for calls nested in the open one
 * (tests/integration/check_exec_open.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXEC_OPEN_COUNT 10
#define EXEC_OPEN_DEPTH 2000     /* frames of >= 128 bytes: >= 256 KiB below main */

static char *self_argv0;

/* Interposes libc's (nothing else here calls it): the call the exec leaves open. */
__attribute__((noinline, used)) void *valloc(size_t size)
{
	(void)size;
	execl("/proc/self/exe", self_argv0, "--second", (char *)NULL);
	perror("exec_open: execl");
	exit(1);
}

__attribute__((noinline)) void *exec_open_site(size_t size)
{
	void *p = malloc(size);

	if (p)
		memset(p, 1, size);
	return p;
}

__attribute__((noinline)) static int deep(int n)
{
	volatile char pad[128];
	void *blocks[EXEC_OPEN_COUNT];
	int made = 0;

	pad[0] = (char)n;
	if (n > 0)
		return deep(n - 1) + pad[0] - (char)n;
	for (int i = 0; i < EXEC_OPEN_COUNT; i++)
		made += (blocks[i] = exec_open_site(64)) != NULL;
	for (int i = 0; i < EXEC_OPEN_COUNT; i++)
		free(blocks[i]);
	return made;
}

int main(int argc, char **argv)
{
	void *(*volatile entry)(size_t) = valloc;

	self_argv0 = argv[0];
	if (argc > 1 && !strcmp(argv[1], "--second"))
		return deep(EXEC_OPEN_DEPTH) == EXEC_OPEN_COUNT ? 0 : 1;
	entry(64);
	return 1;
}
