/* Symbolizer benchmark: ns per address, uncached (fresh cache: open, index, first lookups)
 * and cached (the same addresses again), side by side in one run with eu-addr2line -i -f
 * and binutils addr2line -i -f -C on the same addresses of the same big real libraries,
 * printed as ratios. Usage: symbolize_bench [N] [LIB...]  (default 2000 addresses of the
 * libstdc++ debug build and of libc through its /usr/lib/debug/.build-id file). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define BENCH_MAX_ADDRS 100000

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Function addresses (+ a small in-function delta) from nm: vaddrs, spread evenly. */
static size_t pick_addrs(const char *lib, uint64_t *v, size_t want)
{
	char cmd[4200], line[4096], type;
	unsigned long long a, sz;
	uint64_t *all = malloc(sizeof(*all) * 2000000);
	size_t n = 0, k = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "(nm -S --defined-only '%s' 2>/dev/null || true; "
		 "nm -S -D --defined-only '%s' 2>/dev/null) | sort -u", lib, lib);
	if (!all || !(f = popen(cmd, "r")))
		return 0;
	while (fgets(line, sizeof(line), f) && n < 2000000)
		if (sscanf(line, "%llx %llx %c", &a, &sz, &type) == 3 && (type == 'T' || type == 't') &&
		    sz > 8)
			all[n++] = a + (sz / 2 & ~3ull);
	pclose(f);
	for (size_t i = 0; i < want && n; i++)
		v[k++] = all[(i * 7919) % n];
	free(all);
	return k;
}

static double run_tool(const char *fmt, const char *lib, const char *addrfile)
{
	char cmd[8192];
	double t0 = now_ns();

	snprintf(cmd, sizeof(cmd), fmt, lib, addrfile);
	if (system(cmd) != 0)
		return -1;
	return now_ns() - t0;
}

static int bench(const char *lib, size_t want)
{
	uint64_t *va = calloc(want, sizeof(*va)), *off = calloc(want, sizeof(*off));
	char id[130], addrfile[] = "/tmp/symbench.XXXXXX";
	struct elfsym *e = NULL;
	struct symcache *c = NULL;
	size_t n, resolved = 0, frames = 0;
	double t_unc, t_cached, t_eu, t_bu;
	FILE *af;
	int fd;

	n = pick_addrs(lib, va, want);
	if (n == 0 || elfsym_open(&e, lib) < 0 || elfsym_build_id(e, id, sizeof(id)) < 0) {
		fprintf(stderr, "symbolize_bench: %s: no symbols or no build-id, skipped\n", lib);
		return 0;
	}
	/* vaddr -> file offset (what the daemon's frames carry): invert through a probe. */
	for (size_t i = 0; i < n; i++) {
		uint64_t o = va[i], back;
		/* PT_LOAD offsets and vaddrs differ by a constant per segment: search it. */
		for (uint64_t d = 0; d <= 0x400000; d += 0x1000) {
			if (va[i] >= d && elfsym_offset_to_vaddr(e, va[i] - d, &back) == 0 && back == va[i]) {
				o = va[i] - d;
				break;
			}
		}
		off[i] = o;
	}
	elfsym_close(e);
	if ((fd = mkstemp(addrfile)) < 0 || !(af = fdopen(fd, "w")))
		return -1;
	for (size_t i = 0; i < n; i++)
		fprintf(af, "0x%llx\n", (unsigned long long)va[i]);
	fclose(af);

	symcache_new(&c, NULL);
	double t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		struct dwsym_frames f;
		if (symcache_code(c, id, lib, NULL, off[i], &f) == 0 && f.n && f.v[0].file)
			resolved++;
		frames += f.n;
		dwsym_frames_free(&f);
	}
	t_unc = now_ns() - t0;
	t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		struct dwsym_frames f;
		symcache_code(c, id, lib, NULL, off[i], &f);
		dwsym_frames_free(&f);
	}
	t_cached = now_ns() - t0;
	symcache_free(c);
	t_eu = run_tool("eu-addr2line -i -f -e '%s' < '%s' > /dev/null 2>&1", lib, addrfile);
	t_bu = run_tool("addr2line -i -f -C -e '%s' < '%s' > /dev/null 2>&1", lib, addrfile);
	unlink(addrfile);

	printf("%s: %zu addresses, %zu with file:line, %.2f frames/address\n", lib, n, resolved,
	       (double)frames / n);
	printf("  memprofd uncached  %10.0f ns/address\n", t_unc / n);
	printf("  memprofd cached    %10.0f ns/address\n", t_cached / n);
	printf("  eu-addr2line -i -f %10.0f ns/address   (%.1fx uncached, %.1fx cached)\n",
	       t_eu / n, t_eu / t_unc, t_eu / t_cached);
	printf("  addr2line -i -f -C %10.0f ns/address   (%.1fx uncached, %.1fx cached)\n",
	       t_bu / n, t_bu / t_unc, t_bu / t_cached);
	free(va);
	free(off);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const defaults[] = {
		"/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30",
		"/lib/x86_64-linux-gnu/libc.so.6",
	};
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;

	if (n == 0 || n > BENCH_MAX_ADDRS)
		n = 2000;
	if (argc > 2) {
		for (int i = 2; i < argc; i++)
			bench(argv[i], n);
	} else {
		for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
			if (access(defaults[i], R_OK) == 0)
				bench(defaults[i], n);
	}
	return 0;
}
