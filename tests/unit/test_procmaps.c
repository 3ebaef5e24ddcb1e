/* Unit tests for daemon/alloc/procmaps.c's mappings of processes gone before /proc could
 * be read: EV_MMAP records (their path checked against device and inode, the file's head
 * added below its text), joined with the kept snapshot (newer over older), dropped at
 * another address space, and /proc refused when it shows another image (same_image). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/unit/mpd_cmocka.h"

#define UNUSED __attribute__((unused))

#include "bpf/alloc.h"
#include "daemon/alloc/procmaps.h"

static struct map_entry entry(uint64_t start, uint64_t end, const char *path)
{
	return (struct map_entry){ .start = start, .end = end, .prot = PROT_READ | PROT_EXEC,
				   .dev_major = 8, .dev_minor = 1, .inode = 7, .path = (char *)path };
}

static void test_join_gone(void **state UNUSED)
{
	struct proc p = { .pid = mpd_reaped_pid() };
	struct map_entry kept[] = { entry(0x1000, 0x2000, "/bin/a"), entry(0x10000, 0x11000, "/lib/old") };
	struct maps k = { kept, 2 };
	struct map_entry e = entry(0x10000, 0x12000, "/lib/new");

	procmaps_keep(&p, &k);
	assert_int_equal(procmaps_mapped(&p, 1, &e), 0);
	procmaps_load(&p);
	assert_false(p.maps_proc);
	assert_int_equal(p.maps.n, 2);
	assert_string_equal(p.maps.v[0].path, "/bin/a");
	assert_string_equal(p.maps.v[1].path, "/lib/new");   /* the newer mapping wins */
	assert_non_null(maps_find(&p.maps, 0x11800));
	/* Another address space (an exec): the first one's mappings are stale. */
	e = entry(0x20000, 0x21000, "/lib/other");
	assert_int_equal(procmaps_mapped(&p, 2, &e), 0);
	assert_int_equal(p.maps_ev.n, 1);
	assert_false(p.maps_loaded);   /* joined again at the next load */
	procmaps_exec(&p, 2);          /* the exec's own mappings came before its record */
	assert_int_equal(p.maps_ev.n, 1);
	assert_int_equal(p.maps_kept.n, 0);
	procmaps_exec(&p, 3);
	assert_int_equal(p.maps_ev.n, 0);
	procmaps_free(&p);
}

static void fill_names(struct ev_mmap *e, const char *path)
{
	char buf[256];
	char *parts[ALLOC_MMAP_DEPTH], *save = NULL;
	unsigned n = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = strtok_r(buf, "/", &save); s && n < ALLOC_MMAP_DEPTH; s = strtok_r(NULL, "/", &save))
		parts[n++] = s;
	e->nnames = n;
	for (unsigned i = 0; i < n; i++)   /* innermost first */
		snprintf(e->names[i], ALLOC_MMAP_NAME, "%s", parts[n - 1 - i]);
}

static void test_on_mmap(void **state UNUSED)
{
	char path[] = "/tmp/mpd-procmaps-XXXXXX";
	int fd = mkstemp(path);
	struct stat st;
	struct ev_mmap *e = calloc(1, sizeof(*e));
	struct proc p = { .pid = mpd_reaped_pid() };

	assert_true(fd >= 0 && e);
	assert_int_equal(fstat(fd, &st), 0);
	e->mm = 5;
	e->start = 0x40000;
	e->end = 0x41000;
	e->pgoff = 0x3000;
	e->ino = st.st_ino;
	e->dev = major(st.st_dev) << 20 | minor(st.st_dev);
	e->exe = 1;
	fill_names(e, path);
	procmaps_on_mmap(&p, e);
	assert_true(p.exe_known);
	assert_int_equal(p.maps_ev.n, 2);   /* the file's head below its text, and the text */
	assert_int_equal(p.maps_ev.v[0].start, 0x3d000);
	assert_int_equal(p.maps_ev.v[0].offset, 0);
	assert_int_equal(p.maps_ev.v[1].offset, 0x3000);
	assert_string_equal(p.maps_ev.v[1].path, path);
	/* Another inode at that path now, a name that climbs, a path cut short: refused. */
	e->start = 0x80000;
	e->end = 0x81000;
	e->ino++;
	procmaps_on_mmap(&p, e);
	assert_int_equal(p.maps_ev.n, 2);
	e->ino--;
	snprintf(e->names[0], ALLOC_MMAP_NAME, "..");
	procmaps_on_mmap(&p, e);
	assert_int_equal(p.maps_ev.n, 2);
	fill_names(e, path);
	e->nnames = 0;
	procmaps_on_mmap(&p, e);
	assert_int_equal(p.maps_ev.n, 2);
	procmaps_free(&p);
	close(fd);
	unlink(path);
	free(e);
}

static void test_other_image(void **state UNUSED)
{
	struct proc p = { .pid = (uint32_t)getpid() };
	struct map_entry kept[] = { entry(0x1000, 0x2000, "/bin/before-exec") };
	struct maps k = { kept, 1 };
	struct stat st;

	assert_int_equal(stat("/proc/self/exe", &st), 0);
	procmaps_keep(&p, &k);
	p.exe_known = true;   /* the records' image ran another executable */
	p.exe_ino = st.st_ino + 1;
	p.exe_dev_major = major(st.st_dev);
	p.exe_dev_minor = minor(st.st_dev);
	procmaps_load(&p);
	assert_false(p.maps_proc);
	assert_int_equal(p.maps.n, 1);
	assert_string_equal(p.maps.v[0].path, "/bin/before-exec");
	p.exe_ino = st.st_ino;   /* this image: /proc stands */
	procmaps_reload(&p);
	assert_true(p.maps_proc);
	assert_true(p.maps.n > 1);
	procmaps_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_gone),
		cmocka_unit_test(test_on_mmap),
		cmocka_unit_test(test_other_image),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
