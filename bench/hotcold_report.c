/* Preloaded by bench/pgo_real.py into the PGO builds: at exit, prints
 * libmemprofd_hotcold's arena statistics (memprofd_hotcold_print_stats) to stderr when
 * the program has the runtime; defines no allocator symbol, so it changes nothing else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

__attribute__((destructor)) static void hotcold_report(void)
{
	void (*print)(FILE *) = (void (*)(FILE *))dlsym(RTLD_DEFAULT, "memprofd_hotcold_print_stats");

	if (print)
		print(stderr);
}
