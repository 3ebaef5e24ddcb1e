/* four_sites: four allocation sites a person can check a profile against.
 *   site_small  5000 x 64 B, each freed at once
 *   site_leak   100 x 256 B, never freed (live when the process exits)
 *   site_long   10 x 4096 B, freed after LONG_MS
 *   fopen's stdio buffer (glibc's _IO_file_doallocate), freed by fclose
 * Built at test time by the checks (cc -g -fno-omit-frame-pointer), once more with
 * -DVARIANT=1 for a rebuilt binary whose build-id differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 0
#endif
__attribute__((used)) static const int variant = VARIANT;   /* a build-id of its own */

#define SMALL_N 5000
#define LEAK_N 100
#define LONG_N 10
#define LONG_MS 300

__attribute__((noinline)) static void *site_small(void) { return malloc(64); }
__attribute__((noinline)) static void *site_leak(void) { return malloc(256); }
__attribute__((noinline)) static void *site_long(void) { return malloc(4096); }

int main(void)
{
	static void *volatile leaked[LEAK_N];
	void *longs[LONG_N];
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		;
	if (f)
		fclose(f);
	for (int i = 0; i < LONG_N; i++)
		memset(longs[i] = site_long(), i, 4096);
	for (int i = 0; i < SMALL_N; i++) {
		void *p = site_small();

		memset(p, i, 64);
		free(p);
	}
	for (int i = 0; i < LEAK_N; i++)
		memset(leaked[i] = site_leak(), 1, 256);
	nanosleep(&(struct timespec){ .tv_nsec = LONG_MS * 1000000L }, NULL);
	for (int i = 0; i < LONG_N; i++)
		free(longs[i]);
	return 0;
}
