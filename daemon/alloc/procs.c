/* Process table and binary registry of the recorder (see procs.h). /proc is read only
 * while a process is alive; everything read is bounded and may fail without harm. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "base/cleanup.h"
#include "daemon/alloc/procmaps.h"
#include "daemon/alloc/procs.h"
#include "daemon/alloc/unwind.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/datasym.h"

struct pkey { uint32_t tgid; uint64_t start; };

static uint64_t proc_hash(uint32_t tgid, uint64_t start)
{
	return hash_u64(((uint64_t)tgid << 40) ^ start);
}

static bool proc_eq(const void *val, const void *key)
{
	const struct proc *p = val;
	const struct pkey *k = key;

	return p->pid == k->tgid && p->start_ns == k->start;
}

struct proc *proc_find(struct proctab *t, uint32_t tgid, uint64_t start_ns)
{
	struct pkey k = { tgid, start_ns };

	return hmap_find(&t->procs, proc_hash(tgid, start_ns), proc_eq, &k);
}

static void read_comm(struct proctab *t, struct proc *p)
{
	char path[64], buf[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", p->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = '\0';
		p->comm = intern_str(t->in, buf);
	}
	fclose(f);
}

/* The parent's pid from /proc/PID/stat (field 4), 0 if unread. */
static uint32_t read_ppid(uint32_t pid)
{
	char path[64], buf[1024];
	unsigned ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %u", &ppid) != 1)
		return 0;
	return ppid;
}

bool proc_running(uint32_t pid, uint64_t start_ns)
{
	char path[64], buf[1024], state;
	struct timespec bt, mt;
	unsigned long long ticks;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	/* Fields after comm: state is 3rd, starttime 22nd. A zombie has ended. */
	if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &state, &ticks) != 2 || state == 'Z' || state == 'X')
		return false;
	/* /proc's start time is in clock ticks of CLOCK_BOOTTIME, BPF's in monotonic ns. */
	clock_gettime(CLOCK_BOOTTIME, &bt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	long hz = sysconf(_SC_CLK_TCK);
	int64_t off = (bt.tv_sec - mt.tv_sec) * 1000000000LL + (bt.tv_nsec - mt.tv_nsec);
	int64_t want = ((int64_t)start_ns + off) / (1000000000LL / (hz > 0 ? hz : 100));
	return (int64_t)ticks >= want - 1 && (int64_t)ticks <= want + 1;
}

struct proc *proc_get(struct proctab *t, uint32_t tgid, uint64_t start_ns)
{
	struct proc *p = proc_find(t, tgid, start_ns);
	char path[64], exe[PATH_MAX];
	ssize_t n;

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = tgid;
	p->start_ns = start_ns;
	p->exe = p->build_id = p->comm = "";
	if (hmap_insert(&t->procs, proc_hash(tgid, start_ns), p)) {
		free(p);
		return NULL;
	}
	/* The PID may already belong to a successor; callers overwrite exe/comm when they
	 * know better (fork, exec, the command we started). */
	snprintf(path, sizeof(path), "/proc/%u/exe", tgid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		proc_set_exe(t, p, exe);
		read_comm(t, p);
		if (proc_running(tgid, start_ns))
			p->ppid = read_ppid(tgid);   /* no fork or exec record will say */
	}
	return p;
}

/* Whether the file open as fd is the one at file (or p->exe, deleted since exec). */
static bool same_file(int fd, const struct proc *p, const char *file)
{
	char fdpath[64], target[PATH_MAX + 16];
	struct stat run, named;
	ssize_t n;

	if (fstat(fd, &run))
		return false;
	if (!stat(file, &named))
		return run.st_dev == named.st_dev && run.st_ino == named.st_ino;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	n = readlink(fdpath, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	size_t len = strlen(p->exe);
	return !strncmp(target, p->exe, len) && !strcmp(target + len, " (deleted)");
}

/* The binary p runs, under the name file only when file is that very binary: an exec
 * record is read late, when the process may run a script's interpreter (the record names
 * the script) or have exec'd again; the binary then is named from its own mapping. */
static struct binary *exe_binary(struct proctab *t, struct proc *p, const char *file)
{
	char open_path[64];
	_cleanup_close_ int fd = -1;

	snprintf(open_path, sizeof(open_path), "/proc/%u/exe", p->pid);
	fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd >= 0 && same_file(fd, p, file)) {
		/* Through the descriptor: right file even if replaced or deleted. */
		snprintf(open_path, sizeof(open_path), "/proc/self/fd/%d", fd);
		return bin_register(t, file, open_path);
	}
	return bin_register(t, file, file);
}

void proc_set_exe(struct proctab *t, struct proc *p, const char *path)
{
	size_t len = strlen(path);
	const char *del = " (deleted)";
	struct binary *b;

	if (len > strlen(del) && strcmp(path + len - strlen(del), del) == 0)
		len -= strlen(del);
	p->exe = intern_strn(t->in, path, len);
	if (!p->exe)
		p->exe = "";
	char file[PATH_MAX + 64];
	proc_file_path(p, p->exe, file, sizeof(file));
	b = *p->exe ? exe_binary(t, p, file) : NULL;
	p->build_id = b ? b->build_id : "";
	if (!p->comm || !*p->comm) {
		const char *base = strrchr(p->exe, '/');
		p->comm = base ? base + 1 : p->exe;
	}
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int hex2raw(const char *hex, unsigned char raw[20])
{
	size_t n = strlen(hex) / 2;

	memset(raw, 0, 20);
	if (n > 20)
		return -EINVAL;
	/* by hand: bin_path and bin_function decode a frame's build-id for every frame stored,
	 * where sscanf's 20 calls took ~9% of the reader's CPU on clang-19 (table
	 * comparisons use the raw bytes kept at registration) */
	for (size_t i = 0; i < 2 * n; i++) {
		int d = hex_digit(hex[i]);
		if (d < 0)
			return -EINVAL;
		raw[i / 2] = (unsigned char)(raw[i / 2] << 4 | d);
	}
	return 0;
}

static bool bin_eq_raw(const void *val, const void *key)
{
	const struct binary *b = val;

	/* Raw bytes kept at registration: this runs for every frame of every stack record. */
	return memcmp(b->raw, key, 20) == 0;
}

struct binary *bin_by_raw(struct proctab *t, const unsigned char raw[20])
{
	return hmap_find(&t->bins, hash_bytes(raw, 20, 0), bin_eq_raw, raw);
}

/* Whether path names a file through a process (/proc/PID/...): gone when it exits. */
static bool dies_with_process(const char *path)
{
	return !strncmp(path, "/proc/", 6) && strncmp(path, "/proc/self/", 11);
}

struct binary *bin_register(struct proctab *t, const char *path, const char *open_path)
{
	char hex[2 * 64 + 1], fd_path[32];
	_cleanup_close_ int fd = -1;
	unsigned char raw[20];
	struct binary *b;

	/* Opened first, the build-id read through it: the kept descriptor is that file. */
	if (dies_with_process(path) && t->kept_fds < BIN_KEPT_FDS_MAX &&
	    (fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) >= 0) {
		snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
		open_path = fd_path;
	}
	if (elf_build_id_of(open_path, hex, sizeof(hex)) < 0 || hex2raw(hex, raw) < 0)
		return NULL;
	b = bin_by_raw(t, raw);
	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->build_id = intern_str(t->in, hex);
	memcpy(b->raw, raw, sizeof(b->raw));
	/* Keep a path that stays valid after the process exits, when the file is the same. */
	b->path = intern_str(t->in, path);
	b->fd = -1;
	if (fd >= 0 && !(b->fd_path = intern_str(t->in, fd_path)))
		b->build_id = NULL;   /* out of memory: fails below */
	if (!b->build_id || !b->path || hmap_insert(&t->bins, hash_bytes(raw, 20, 0), b)) {
		free(b);
		return NULL;
	}
	if (fd >= 0) {
		b->fd = fd;
		fd = -1;
		t->kept_fds++;
	}
	return b;
}

void proc_file_path(const struct proc *p, const char *logical, char *out, size_t n)
{
	char root[64], ns[64], our_ns[64] = "", their_ns[64] = "";
	struct stat ours, theirs;

	/* Another mount namespace or root (a container, a chroot): its paths mean files
	 * under /proc/PID/root. */
	snprintf(root, sizeof(root), "/proc/%u/root", p->pid);
	snprintf(ns, sizeof(ns), "/proc/%u/ns/mnt", p->pid);
	ssize_t a = readlink("/proc/self/ns/mnt", our_ns, sizeof(our_ns) - 1);
	ssize_t b = readlink(ns, their_ns, sizeof(their_ns) - 1);
	bool other_ns = a > 0 && b > 0 && strcmp(our_ns, their_ns) != 0;
	bool other_root = stat("/", &ours) == 0 && stat(root, &theirs) == 0 &&
			  (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino);
	if (other_ns || other_root)
		snprintf(out, n, "%s%s", root, logical);
	else
		snprintf(out, n, "%s", logical);
}

/* The file of mapping e of p, named by its path only when that is the very file: the
 * maps may be older than the process's current image (it exec'd since they were read). */
struct binary *bin_register_map(struct proctab *t, const struct proc *p, const struct map_entry *e)
{
	char open_path[128], path[PATH_MAX + 64];
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (e->path[0] != '/')
		return NULL;
	proc_file_path(p, e->path, path, sizeof(path));
	snprintf(open_path, sizeof(open_path), "/proc/%u/map_files/%llx-%llx", p->pid,
		 (unsigned long long)e->start, (unsigned long long)e->end);
	fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)   /* gone: the file at path, as it is now */
		return bin_register(t, path, path);
	if (fstat(fd, &st) || st.st_ino != e->inode || major(st.st_dev) != e->dev_major ||
	    minor(st.st_dev) != e->dev_minor)
		return NULL;   /* another image's mapping now */
	snprintf(open_path, sizeof(open_path), "/proc/self/fd/%d", fd);
	return bin_register(t, path, open_path);
}

void bin_scan_process(struct proctab *t, struct proc *p)
{
	struct maps m = { 0 };

	if (maps_read_pid(&m, p->pid) < 0)
		return;
	for (size_t i = 0; i < m.n; i++) {
		const struct map_entry *e = &m.v[i];
		if (e->path[0] != '/' || (i > 0 && strcmp(m.v[i - 1].path, e->path) == 0))
			continue;
		bin_register_map(t, p, e);
	}
	maps_free(&m);
}

static struct binary *bin_by_hex(struct proctab *t, const char *hex)
{
	unsigned char raw[20];

	if (!*hex || hex2raw(hex, raw) < 0)
		return NULL;
	return bin_by_raw(t, raw);
}

const char *bin_path(struct proctab *t, const char *build_id)
{
	struct binary *b = bin_by_hex(t, build_id);

	return b ? b->path : NULL;
}

const char *bin_open_path(struct proctab *t, const char *build_id)
{
	struct binary *b = bin_by_hex(t, build_id);

	return !b ? NULL : b->fd_path ? b->fd_path : b->path;
}

int bin_function(struct proctab *t, const char *build_id, uint64_t offset,
		 const char **demangled, const char **mangled)
{
	struct binary *b = bin_by_hex(t, build_id);
	char hex[2 * 64 + 1];
	uint64_t delta;
	const char *name;
	char *d;

	*demangled = *mangled = NULL;
	if (!b)
		return -ENOENT;
	if (!b->sym && !b->sym_failed) {
		/* Never symbolize against a file whose build-id changed since we saw it. */
		if (elfsym_open(&b->sym, b->fd_path ? b->fd_path : b->path) < 0 ||
		    elfsym_build_id(b->sym, hex, sizeof(hex)) < 0 || strcmp(hex, b->build_id)) {
			if (b->sym)
				elfsym_close(b->sym);
			b->sym = NULL;
			b->sym_failed = true;
		}
	}
	if (!b->sym)
		return -ENOENT;
	/* Frames are return addresses: the call is the byte before. */
	name = elfsym_lookup_offset(b->sym, offset ? offset - 1 : 0, &delta);
	if (!name)
		return -ENOENT;
	*mangled = intern_str(t->in, name);
	d = sym_demangle(name);
	if (d) {
		*demangled = intern_str(t->in, d);
		free(d);
	}
	return 0;
}

void proc_forget(struct proctab *t, struct proc *p)
{
	hmap_remove(&t->procs, proc_hash(p->pid, p->start_ns), p);
	hmap_free(&p->stacks);
	procmaps_free(p);
	unwinder_free(p->uw);
	p->uw = NULL;
	free(p);
}

void proctab_free(struct proctab *t)
{
	hmap_foreach(&t->procs, i) {
		struct proc *p = t->procs.vals[i];
		hmap_free(&p->stacks);
		procmaps_free(p);
		unwinder_free(p->uw);
		free(p);
	}
	hmap_foreach(&t->bins, i) {
		struct binary *b = t->bins.vals[i];
		if (b->sym)
			elfsym_close(b->sym);
		if (b->ds)
			datasym_close(b->ds);
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
	hmap_foreach(&t->files, i)
		free(t->files.vals[i]);
	hmap_free(&t->procs);
	hmap_free(&t->bins);
	hmap_free(&t->files);
}
