/* blip: a process of a few milliseconds with one allocation site. Makes --count blocks
 * of 64 bytes at blip_site, frees them, spins until --ms have passed since start and
 * exits: the shape of a short-lived process a daemon must not lose to its discovery
 * latency (tests/integration/check_daemon_blips.py). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLIP_MAX 1024

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) void *blip_site(size_t size)
{
	void *p = malloc(size);

	if (p)
		memset(p, 1, size);
	return p;
}

int main(int argc, char **argv)
{
	double t0 = now_ms(), ms = 4;
	int count = 10;
	void *v[BLIP_MAX];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--count"))
			count = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--ms"))
			ms = atof(argv[i + 1]);
	}
	if (count < 0 || count > BLIP_MAX)
		return 2;
	for (int i = 0; i < count; i++)
		if (!(v[i] = blip_site(64)))
			return 3;
	for (int i = 0; i < count; i++)
		free(v[i]);
	while (now_ms() - t0 < ms)
		;
	return 0;
}
