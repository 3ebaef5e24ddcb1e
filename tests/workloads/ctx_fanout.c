/* ctx_fanout: many allocation contexts, in process after process. Each round forks a
 * child that walks a binary call tree of --depth levels, each level entered through one of
 * two call sites (distinct return addresses), and mallocs then frees one block at each of
 * the 2^depth leaves: 2^depth contexts, each a new aggregate for the child's process. The
 * parent waits for the child and starts the next --interval-ms after the last one started
 * (default 0), until --seconds have passed (counted from when --wait-file exists, if given). --progress FILE is rewritten after each child
 * with "<CLOCK_MONOTONIC ns> <children done> <blocks allocated>". */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 20
#define WAIT_FILE_POLLS 6000   /* 10 ms each: a minute */

static volatile uintptr_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void leaf(void)
{
	void *p = malloc(96);

	sink += (uintptr_t)p;
	free(p);
	__asm__ volatile("" ::: "memory");
}

/* Two calls of the next level from two sites: their return addresses tell the paths apart. */
__attribute__((noinline)) static void level(int d)
{
	if (d == 0) {
		leaf();
	} else {
		level(d - 1);
		__asm__ volatile("" ::: "memory");
		level(d - 1);
	}
	__asm__ volatile("" ::: "memory");
}

static void write_progress(const char *path, unsigned long children, unsigned long blocks)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return;
	fprintf(f, "%llu %lu %lu\n", (unsigned long long)now_ns(), children, blocks);
	if (fclose(f) == 0)
		rename(tmp, path);
}

int main(int argc, char **argv)
{
	const char *progress = NULL, *wait_file = NULL;
	int depth = 10;
	double seconds = 10;
	int interval_ms = 0;
	unsigned long children = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--depth"))
			depth = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--interval-ms"))
			interval_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--progress"))
			progress = argv[i + 1];
		else if (!strcmp(argv[i], "--wait-file"))
			wait_file = argv[i + 1];
		else if (!strcmp(argv[i], "--pdeathsig"))
			prctl(PR_SET_PDEATHSIG, atoi(argv[i + 1]));
	}
	if (depth < 0 || depth > MAX_DEPTH) {
		fprintf(stderr, "ctx_fanout: --depth 0..%d\n", MAX_DEPTH);
		return 2;
	}
	for (int i = 0; wait_file && access(wait_file, F_OK) && i < WAIT_FILE_POLLS; i++)
		usleep(10000);
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		uint64_t next = now_ns() + (uint64_t)interval_ms * 1000000ULL;
		pid_t pid = fork();
		int ws;

		if (pid < 0)
			return 1;
		if (pid == 0) {
			level(depth);   /* a loop would merge the paths' return addresses */
			_exit(0);
		}
		if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
			return 1;
		children++;
		if (progress)
			write_progress(progress, children, children << depth);
		for (uint64_t t = now_ns(); t < next; t = now_ns())
			usleep((useconds_t)((next - t) / 1000));
	}
	return 0;
}
