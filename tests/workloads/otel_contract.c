/* otel_contract: a sampler of its own written only against the OpenTelemetry memory
 * contract (provider otel_memory: alloc(ptr, size, weight) on a sampled allocation,
 * weight = bytes the sample stands for; free(ptr) on the free of a sampled one), as a
 * compile-time allocator wrapper would emit it. It samples with a byte interval of 1,
 * so every allocation is sampled with weight = its size (one object each): a recorder
 * must count exactly --count objects of --size bytes at otel_site. --wait-ms waits
 * before allocating (a daemon attaches at exec, then the probes of the executable). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <time.h>

#define OTEL_INTERVAL 1   /* bytes between samples: every allocation is one */
#define OTEL_MAX 4096

__attribute__((noinline)) static void *otel_malloc(size_t n)
{
	void *p = malloc(n);
	uint64_t weight = (uint64_t)n / OTEL_INTERVAL * OTEL_INTERVAL;

	if (p)
		STAP_PROBE3(otel_memory, alloc, p, n, weight);
	return p;
}

__attribute__((noinline)) static void otel_free(void *p)
{
	STAP_PROBE1(otel_memory, free, p);
	free(p);
}

__attribute__((noinline)) void *otel_site(size_t n)
{
	void *p = otel_malloc(n);

	if (p)
		memset(p, 2, n);
	return p;
}

int main(int argc, char **argv)
{
	int count = 100, size = 100, wait_ms = 0;
	void *v[OTEL_MAX];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--count"))
			count = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--wait-ms"))
			wait_ms = atoi(argv[i + 1]);
	}
	if (count < 0 || count > OTEL_MAX || size <= 0)
		return 2;
	struct timespec w = { wait_ms / 1000, (wait_ms % 1000) * 1000000L };
	nanosleep(&w, NULL);
	for (int i = 0; i < count; i++)
		if (!(v[i] = otel_site((size_t)size)))
			return 3;
	for (int i = 0; i < count; i++)
		otel_free(v[i]);
	return 0;
}
