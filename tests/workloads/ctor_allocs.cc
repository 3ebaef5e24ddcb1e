// ctor_allocs: allocations before main and in main, each from its own noinline site, so
// that every run must show exactly one stack per site (one context per site and per
// path, whichever way the recorder unwound it and whenever it decided how). Before main:
// a constructor of the program (ctor_site, run by the dynamic loader's _dl_init), a
// global std::string longer than its inline buffer (libstdc++'s out-of-line
// _M_construct, no frame pointers), and libstdc++'s own emergency pool (its
// initialisation, before the program's). In main: main_site, and a std::string again.
#include <cstdio>
#include <cstdlib>
#include <string>

#define SITES_N 5

static void *kept[2 * SITES_N];

__attribute__((noinline)) static void *ctor_site(size_t n)
{
	void *p = malloc(n);
	asm volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void *main_site(size_t n)
{
	void *p = malloc(n);
	asm volatile("" ::: "memory");
	return p;
}

__attribute__((constructor)) static void before_main(void)
{
	for (int i = 0; i < SITES_N; i++)
		kept[i] = ctor_site(4321);
}

std::string global_text(3000, 'g');   // operator new from libstdc++, before main

__attribute__((noinline)) static size_t make_text(void)
{
	std::string s(5000, 'm');
	asm volatile("" ::: "memory");
	return s.size();
}

int main(void)
{
	size_t n = 0;

	for (int i = 0; i < SITES_N; i++)
		kept[SITES_N + i] = main_site(1234);
	n += make_text();
	printf("%zu %zu\n", n, global_text.size());
	for (int i = 0; i < 2 * SITES_N; i++)
		free(kept[i]);
	return 0;
}
