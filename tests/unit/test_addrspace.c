/* addrspace: regions and data symbols of this test process itself: a global resolves to
 * its symbol, and the second time from the (device, inode) cache without opening the
 * file; a mapping made after the first maps read is found by one reread, while a miss
 * right after does not reread again; a mapped non-ELF file is not a binary (cached); a
 * running process not in the table yet becomes known at its first sample. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "daemon/attrib/addrspace.h"
#include "daemon/alloc/intern.h"
#include "daemon/alloc/procmaps.h"

uint64_t addrspace_test_global[512];
extern char _end[];                       /* the linker's end of .bss */

static void test_self(void **state)
{
	struct interner in = { 0 };
	struct proctab t = { .in = &in };
	struct addrspace *as;
	struct attrib_region r;
	struct attrib_datasym ds;
	uint64_t lookups, hits, reads;
	uint32_t pid = (uint32_t)getpid();

	(void)state;
	/* A private mapping of a file that is not ELF (mapped before the first maps read:
	 * the cache keeps what it read until a miss, so a later mapping at a reused
	 * address would still show what was there before). */
	char path[] = "/tmp/test_addrspace.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an elf file, just some bytes", 32), 32);
	void *f = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(f != MAP_FAILED);
	close(fd);
	unlink(path);

	assert_non_null(proc_get(&t, pid, 1));
	assert_int_equal(addrspace_open(&as, &t), 0);

	addrspace_region(as, pid, 1, (uintptr_t)&addrspace_test_global[100], 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	assert_true(r.inode != 0);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)&addrspace_test_global[100], &ds), 0);
	assert_string_equal(ds.symbol, "addrspace_test_global");
	assert_string_equal(ds.section, ".bss");
	assert_int_equal(ds.sym_size, sizeof(addrspace_test_global));
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)&addrspace_test_global[3], &ds), 0);
	assert_string_equal(ds.symbol, "addrspace_test_global");
	addrspace_stats(as, &lookups, &hits, &reads);
	assert_int_equal(lookups, 2);
	assert_int_equal(hits, 1);                    /* the file was not opened again */
	assert_int_equal(reads, 1);

	/* the stack: the mapping holding sp */
	int local;
	addrspace_region(as, pid, 1, (uintptr_t)&local, (uintptr_t)&local, &r);
	assert_int_equal(r.kind, REGION_STACK);

	/* a mapping newer than the cached maps: one reread finds it. Placed between two
	 * PROT_NONE guards: where the kernel puts a bare one right after a library's .bss
	 * it merges the two, and the maps then show that library's .bss (a clean clone's CI
	 * run got REGION_DATA once). */
	char *g = mmap(NULL, 3 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g != MAP_FAILED);
	void *m = mmap(g + (1 << 16), 1 << 16, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	assert_true(m != MAP_FAILED);
	addrspace_region(as, pid, 1, (uintptr_t)m + 100, 0, &r);
	assert_int_equal(r.kind, REGION_ANON);
	addrspace_stats(as, &lookups, &hits, &reads);
	assert_int_equal(reads, 2);
	munmap(g, 3 << 16);
	/* a miss, but the maps were read just now: no second reread */
	addrspace_region(as, pid, 1, 0x10, 0, &r);
	assert_int_equal(r.kind, REGION_NONE);
	addrspace_stats(as, &lookups, &hits, &reads);
	assert_int_equal(reads, 2);

	/* the file mapping made before the first maps read: not a binary, and remembered */
	addrspace_region(as, pid, 1, (uintptr_t)f + 8, 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)f + 8, &ds), -ENOENT);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)f + 16, &ds), -ENOENT);
	addrspace_stats(as, &lookups, &hits, &reads);
	assert_int_equal(hits, 2);
	munmap(f, 4096);

	/* an unknown process */
	addrspace_region(as, pid, 2, (uintptr_t)&addrspace_test_global[0], 0, &r);
	assert_int_equal(r.kind, REGION_NONE);
	addrspace_close(as);
	proctab_free(&t);
	interner_free(&in);
}

/* An anonymous mapping placed right after this binary's .bss: the kernel merges it onto
 * the .bss mapping, and the maps show one anonymous mapping after the file's rw one.
 * Addresses in the .bss still resolve to their symbols; those past the image (the
 * highest PT_LOAD's memsz) are anonymous memory, not data of this binary. */
static void test_merged_bss(void **state)
{
	struct interner in = { 0 };
	struct proctab t = { .in = &in };
	struct addrspace *as;
	struct attrib_region r;
	struct attrib_datasym ds;
	uint32_t pid = (uint32_t)getpid();
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uintptr_t past = ((uintptr_t)_end + page - 1) & ~(uintptr_t)(page - 1);

	(void)state;
	char *m = mmap((void *)past, 1 << 16, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED)
		fail_msg("no room right after this binary's .bss at %#lx: %s",
			 (unsigned long)past, strerror(errno));
	assert_ptr_equal(m, (void *)past);
	m[100] = 1;
	assert_non_null(proc_get(&t, pid, 1));
	assert_int_equal(addrspace_open(&as, &t), 0);

	addrspace_region(as, pid, 1, (uintptr_t)&addrspace_test_global[511], 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)&addrspace_test_global[511], &ds), 0);
	assert_string_equal(ds.symbol, "addrspace_test_global");
	addrspace_region(as, pid, 1, (uintptr_t)m + 100, 0, &r);
	/* Merged, it reads as the .bss's continuation; the image's end tells them apart. */
	assert_int_equal(r.kind, REGION_DATA);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)m + 100, &ds), -ERANGE);
	assert_int_equal(addrspace_datasym(as, &r, (uintptr_t)m + (1 << 16) - 1, &ds), -ERANGE);
	munmap(m, 1 << 16);
	addrspace_close(as);
	proctab_free(&t);
	interner_free(&in);
}

/* This process's task start time as BPF reports it (CLOCK_MONOTONIC ns), from /proc. */
static uint64_t self_start_ns(void)
{
	char buf[1024];
	unsigned long long ticks;
	struct timespec bt, mt;
	FILE *f = fopen("/proc/self/stat", "r");

	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	assert_int_equal(sscanf(strrchr(buf, ')') + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
				"%*u %*u %*d %*d %*d %*d %*d %*d %llu", &ticks), 1);
	clock_gettime(CLOCK_BOOTTIME, &bt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	int64_t off = (bt.tv_sec - mt.tv_sec) * 1000000000LL + (bt.tv_nsec - mt.tv_nsec);
	return ticks * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK)) - (uint64_t)off;
}

/* An mmap record marks a process's maps to be read again while it still holds them:
 * the next lookup reads them again and frees the old ones (it read over them in place,
 * and the ASan build's leak check failed `record --alloc off` in CI). */
static void test_reread_after_mmap_record(void **state)
{
	struct interner in = { 0 };
	struct proctab t = { .in = &in };
	struct addrspace *as;
	struct attrib_region r;
	uint64_t lookups, hits, reads;
	uint32_t pid = (uint32_t)getpid();

	(void)state;
	struct proc *p = proc_get(&t, pid, 1);
	assert_non_null(p);
	assert_int_equal(addrspace_open(&as, &t), 0);
	addrspace_region(as, pid, 1, (uintptr_t)&addrspace_test_global[7], 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	assert_true(p->maps.n > 0);
	struct map_entry e = { .start = 0x10000, .end = 0x11000, .prot = 1, .path = (char *)"" };
	assert_int_equal(procmaps_mapped(p, p->mm_ev, &e), 0);
	assert_false(p->maps_loaded);
	addrspace_region(as, pid, 1, (uintptr_t)&addrspace_test_global[7], 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	assert_true(p->maps_loaded);
	addrspace_stats(as, &lookups, &hits, &reads);
	assert_int_equal(reads, 2);
	addrspace_close(as);
	proctab_free(&t);
	interner_free(&in);
}

/* A running target none of whose allocations was seen (the daemon found it running; the
 * sampled mode sees few): its first sample makes it known, so its static data resolve.
 * A process that is not running under that start time stays unknown. */
static void test_running_unknown(void **state)
{
	struct interner in = { 0 };
	struct proctab t = { .in = &in };
	struct addrspace *as;
	struct attrib_region r;
	uint32_t pid = (uint32_t)getpid();
	uint64_t start = self_start_ns();

	(void)state;
	assert_true(proc_running(pid, start));
	assert_false(proc_running(pid, start + 5000000000ULL));
	assert_int_equal(addrspace_open(&as, &t), 0);
	addrspace_region(as, pid, start + 5000000000ULL, (uintptr_t)&addrspace_test_global[1], 0, &r);
	assert_int_equal(r.kind, REGION_NONE);
	assert_null(proc_find(&t, pid, start));
	addrspace_region(as, pid, start, (uintptr_t)&addrspace_test_global[1], 0, &r);
	assert_int_equal(r.kind, REGION_DATA);
	struct proc *p = proc_find(&t, pid, start);
	assert_non_null(p);
	assert_true(strstr(p->exe, "test_addrspace") != NULL);
	/* Forgotten with its process: the next one at that address starts afresh. */
	addrspace_forget(as, p);
	proc_forget(&t, p);
	addrspace_close(as);
	proctab_free(&t);
	interner_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_merged_bss),
		cmocka_unit_test(test_running_unknown),
		cmocka_unit_test(test_reread_after_mmap_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
