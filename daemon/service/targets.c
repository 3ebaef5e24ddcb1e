/* Target discovery (targets.h): rules -> probes -> the BPF targets map. Binaries are
 * looked at once per inode, through /proc/PID/root so that a container's own files are
 * the ones probed; a binary without probes is remembered too, so a busy host's execs cost
 * a stat each, not an ELF parse. In sampled mode the sampler is found in the process's
 * maps, else in its LD_PRELOAD (ld.so maps preloads only after exec, and the exec record
 * arrives first), else in its executable (linked statically); a process that shows none
 * waits for its loader, then is listed. */
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/log.h"
#include "alloc.skel.h"
#include "bpf/alloc.h"
#include "daemon/service/rules.h"
#include "daemon/service/targets.h"
#include "daemon/access/access.h"
#include "daemon/service/exec_hold.h"
#include "symbolizer/elf_needed.h"
#include "daemon/service/watch_links.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/usdt_multi.h"
#include "sampler/sampler.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/maps.h"
#include "symbolizer/rootfs.h"
#include "base/clock.h"
#include "base/array.h"

#define ENVIRON_MAX (256 << 10)     /* bytes of /proc/PID/environ read to find LD_PRELOAD */
#define SAMPLER_NAME "libmemprofd_sampler.so"

struct tfile {
	dev_t dev;
	ino_t ino;
	bool probes;                   /* it has probes (attached); false: it has none */
	bool own;                      /* ... memprofd's own (the sampler: memprofd:watch) */
	int fd;                        /* with probes: the file, held open (its path for
	                                * symbols is /proc/self/fd/FD), else -1 */
	struct usdt_link links[SAMPLED_LINKS];   /* sampled mode: its USDT links */
	struct exact_sites *sites;     /* exact mode with per-process links: its probe
	                                * sites, attached per target (NULL: none) */
	uint8_t dflt;                  /* 1 + its index in host_libs: the host's allocator
	                                * library (the daemon's own libc, libstdc++), linked
	                                * at a target's exec, before ld.so maps it, when its
	                                * executable names it (DT_NEEDED); or 0 */
};

/* The host's allocator libraries, by file name prefix (tfile.dflt). */
static const char *const host_libs[] = { "libc.so", "libstdc++.so" };
#define NHOST_LIBS (sizeof(host_libs) / sizeof(host_libs[0]))

struct tpending {
	pid_t pid;
	unsigned long long ticks;      /* start time, /proc/PID/stat field 22 */
	int64_t deadline;              /* CLOCK_MONOTONIC ms */
};

struct tunsampled {
	pid_t pid;
	unsigned long long ticks;
	char exe[256];
};

enum why { WHY_RESCAN, WHY_EXEC, WHY_RECHECK };

/* ---- process identity ---- */

/* The start time of pid in clock ticks since boot (/proc/PID/stat field 22); -ESRCH for
 * a process that ended, zombies included. */
static int start_ticks(pid_t pid, unsigned long long *ticks)
{
	char path[64], buf[1024], state;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	/* Fields after comm: state is 3rd, starttime 22nd. */
	if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &state, ticks) != 2)
		return -EINVAL;
	return state == 'Z' || state == 'X' ? -ESRCH : 0;
}

static long clk_tck(void)
{
	long hz = sysconf(_SC_CLK_TCK);

	return hz > 0 ? hz : 100;
}

static bool still(pid_t pid, unsigned long long ticks)
{
	unsigned long long now;

	return start_ticks(pid, &now) == 0 && now == ticks;
}

/* How long ago the process started, in ms. */
static int64_t age_ms(unsigned long long ticks)
{
	struct timespec bt;

	clock_gettime(CLOCK_BOOTTIME, &bt);
	return (bt.tv_sec * 1000LL + bt.tv_nsec / 1000000) - (int64_t)(ticks * 1000 / (unsigned long long)clk_tck());
}

/* ---- the BPF targets map ---- */

static int map_fd(const struct targets *t)
{
	return recorder_targets_fd(t->r);
}

static bool map_has(const struct targets *t, uint32_t pid)
{
	uint64_t v;

	return bpf_map_lookup_elem(map_fd(t), &pid, &v) == 0;
}

/* start_ns: the process's task start time (CLOCK_MONOTONIC ns) when an exec record gave
 * it, else 0; the map keeps it as the BPF fork program does for children, so that a sweep
 * can tell a reused PID (and spe whose samples they are). */
static int map_add(const struct targets *t, uint32_t pid, uint64_t start_ns)
{
	if (bpf_map_update_elem(map_fd(t), &pid, &start_ns, BPF_ANY))
		return log_error_errno(-errno, "daemon: adding target %u: %s", pid, strerror(errno));
	return 0;
}

static void map_remove(const struct targets *t, uint32_t pid)
{
	if (bpf_map_delete_elem(map_fd(t), &pid) && errno != ENOENT)
		log_warn("daemon: removing target %u: %s", pid, strerror(errno));
}

/* Counts the targets, dropping those that ended without their exit being seen (added
 * just after it, or the exit record lost): a later process with the PID must not be
 * traced for them. */
static size_t map_sweep(const struct targets *t)
{
	int fd = map_fd(t);
	uint32_t k, next, *gone = NULL;
	size_t n = 0, ngone = 0, cap = 0;
	unsigned long long ticks;

	for (int e = bpf_map_get_next_key(fd, NULL, &next); e == 0;
	     e = bpf_map_get_next_key(fd, &k, &next)) {
		uint64_t start = 0;

		k = next;
		if (bpf_map_lookup_elem(fd, &k, &start) == 0 &&
		    (start ? proc_running(k, start) : start_ticks((pid_t)k, &ticks) == 0)) {
			n++;
			continue;
		}
		/* Collected, not deleted: deleting while walking would restart the walk. */
		if (ARRAY_GROW(gone, cap, ngone, 64) < 0)
			break;
		gone[ngone++] = k;
	}
	for (size_t i = 0; i < ngone; i++)
		map_remove(t, gone[i]);
	free(gone);
	return n;
}

/* ---- binaries, once per inode ---- */

/* Probes the file at path (exact: allocator uprobes; sampled: the sampler's USDT probes)
 * unless its inode was seen: 1 it has probes, 0 it has none, -errno. The file is opened
 * once and probed through /proc/self/fd: a process gone meanwhile (its /proc/PID/root
 * with it) cannot fail the attach half-way, so the first short-lived process of a
 * binary already leaves it probed for the next ones. */
/* Probes the file open at fd (taken over: kept while probes hold it, else closed); path
 * names it in messages only. */
static int file_probe_fd_at(struct targets *t, int fd, const char *path, size_t *idx)
{
	struct stat st;
	char fdpath[64];
	int n;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	for (size_t i = 0; i < t->nfiles; i++)
		if (t->files[i].dev == st.st_dev && t->files[i].ino == st.st_ino) {
			close(fd);
			*idx = i;
			if (t->files[i].own && t->own_fd < 0)
				t->own_fd = t->files[i].fd;
			return t->files[i].probes;
		}
	if (t->nfiles == TARGETS_FILES_MAX) {
		if (!t->files_full)
			log_warn("daemon: %d binaries looked at already; not probing %s or any further one",
				 TARGETS_FILES_MAX, path);
		t->files_full = true;
		close(fd);
		return 0;
	}
	struct tfile f = { .dev = st.st_dev, .ino = st.st_ino, .fd = -1 };
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if (t->pid_links) {
		/* Sites only: each target gets its own links (attach_exact_links). */
		if (!(f.sites = malloc(sizeof(*f.sites)))) {
			close(fd);
			return -ENOMEM;
		}
		n = exact_sites_of(fdpath, f.sites);
		if (n <= 0) {
			free(f.sites);
			f.sites = NULL;
		}
	} else {
		n = t->smp ? sampled_attach_links(t->smp, fdpath, -1, f.links) : exact_attach_binary(t->r, fdpath);
	}
	if (n <= 0)
		close(fd);
	if (n < 0)
		return n;
	f.probes = n > 0;
	f.own = t->smp && n == 1;
	f.fd = n > 0 ? fd : -1;
	*idx = t->nfiles;
	if (f.own && t->own_fd < 0)
		t->own_fd = fd;
	t->files[t->nfiles++] = f;
	return f.probes;
}

static int file_probe_fd(struct targets *t, int fd, const char *path)
{
	size_t idx;

	return file_probe_fd_at(t, fd, path, &idx);
}

/* Links pid to file i (one with sites). */
static void link_file(struct targets *t, pid_t pid, uint64_t start_ns, size_t i)
{
	const struct tfile *f = &t->files[i];

	if (f->sites)   /* made on the link thread; a full queue is counted there */
		exec_hold_request(&t->hold, (uint32_t)pid, start_ns,
				  ((uint64_t)f->dev << 32) ^ (uint64_t)f->ino, f->fd, f->sites);
}

/* A file named by pid (its maps, its environment), resolved inside pid's root. */
static int file_probe_in_root(struct targets *t, pid_t pid, const char *path)
{
	return file_probe_fd(t, rootfs_open(pid, path), path);
}

/* /proc/PID/exe: the kernel's own link to the executable, no path resolution. */
static int file_probe_exe(struct targets *t, pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return file_probe_fd(t, fd < 0 ? -errno : fd, path);
}

static bool is_sampler_path(const char *p)
{
	const char *b = strrchr(p, '/');

	return strncmp(b ? b + 1 : p, SAMPLER_NAME, strlen(SAMPLER_NAME)) == 0;
}

/* Exact mode: the allocator binaries pid maps (its exe, libc, libstdc++, jemalloc,
 * tcmalloc). 0 or -errno. */
/* The host libraries (bits of host_libs) that exe names in its DT_NEEDED; all of them
 * where it cannot be read. */
static uint32_t host_libs_needed(const char *exe)
{
	uint32_t mask;

	return elf_needs(exe, host_libs, NHOST_LIBS, &mask) < 0 ? (1u << NHOST_LIBS) - 1 : mask;
}

static int attach_exact(struct targets *t, pid_t pid, uint64_t start_ns)
{
	struct maps m = { 0 };
	bool libs = false;   /* ld.so has mapped an allocator library already */
	int err;

	if (t->r->alloc_off)
		return 0;        /* alloc = off: traced for access sampling only */
	if ((err = maps_read_pid(&m, pid)))
		return err;
	for (size_t i = 0; i < m.n; i++) {
		const char *p = m.v[i].path, *base = strrchr(p, '/');

		if (!base || (i > 0 && !strcmp(m.v[i - 1].path, p)))
			continue;
		base++;
		/* The executable may link an allocator statically; libraries by name. */
		bool exe_map = m.v[i].offset == 0 && i == 0;
		if (!exe_map && strncmp(base, "libc.so", 7) && strncmp(base, "libstdc++.so", 12) &&
		    strncmp(base, "libjemalloc.so", 14) && strncmp(base, "libtcmalloc", 11))
			continue;
		size_t idx;
		int n = file_probe_fd_at(t, rootfs_open(pid, p), p, &idx);
		if (n < 0 && n != -ENOENT && !exe_map) {
			maps_free(&m);
			return n;
		}
		if (n > 0 && t->pid_links)
			link_file(t, pid, start_ns, idx);
		libs |= !exe_map;
	}
	maps_free(&m);
	if (!t->pid_links || libs)
		return 0;
	/* ld.so maps its libraries after the exec record: the host's that the executable
	 * needs are linked now (one it loads later is linked at the next rescan). */
	char exe[64];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	uint32_t need = host_libs_needed(exe);
	for (size_t i = 0; i < t->nfiles; i++)
		if (t->files[i].dflt && (need & (1u << (t->files[i].dflt - 1))))
			link_file(t, pid, start_ns, i);
	return 0;
}

/* The daemon's own allocator libraries (those of the host): found once, linked at a
 * target's exec when its executable needs them. */
static void probe_host_allocators(struct targets *t)
{
	struct maps m = { 0 };

	if (maps_read_pid(&m, getpid()))
		return;
	for (size_t i = 0; i < m.n; i++) {
		const char *p = m.v[i].path, *base = strrchr(p, '/');
		size_t idx;

		size_t lib = 0;

		while (base && lib < NHOST_LIBS && strncmp(base + 1, host_libs[lib], strlen(host_libs[lib])))
			lib++;
		if (!base || lib == NHOST_LIBS)
			continue;
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (file_probe_fd_at(t, fd < 0 ? -errno : fd, p, &idx) > 0)
			t->files[idx].dflt = (uint8_t)(lib + 1);
	}
	maps_free(&m);
}

/* The absolute LD_PRELOAD entry of pid naming the sampler, or -ENOENT. */
static int preload_of(pid_t pid, char *out, size_t n)
{
	char path[64];
	int fd, r = -ENOENT;
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	char *buf = malloc(ENVIRON_MAX + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	len = read(fd, buf, ENVIRON_MAX);
	close(fd);
	if (len < 0) {
		free(buf);
		return -errno;
	}
	buf[len] = '\0';
	for (char *e = buf; e < buf + len; e += strlen(e) + 1) {
		if (strncmp(e, "LD_PRELOAD=", 11))
			continue;
		char *save = NULL;
		/* ld.so separates preloads by ':' or spaces. */
		for (char *tok = strtok_r(e + 11, ": \t", &save); tok; tok = strtok_r(NULL, ": \t", &save))
			if (tok[0] == '/' && is_sampler_path(tok) && strlen(tok) < n) {
				strcpy(out, tok);
				r = 0;
				break;
			}
		break;
	}
	free(buf);
	return r;
}

/* Sampled mode: attaches the samplers pid has (memprofd's or an otel_memory one: mapped,
 * preloaded, or linked into its executable). 1 found, 0 none (yet), -errno. */
static int attach_sampler(struct targets *t, pid_t pid)
{
	char pre[PATH_MAX];
	struct maps m = { 0 };
	int n, found = 0;

	if ((n = maps_read_pid(&m, pid)) < 0)
		return n;
	/* Any mapped object may bring probes: libmemprofd_sampler's, or a third-party
	 * sampler's otel_memory ones (an allocator hook, a wrapper linked in). Each is
	 * opened inside pid's root (a hostile process names it). */
	for (size_t i = 0; i < m.n; i++) {
		if (m.v[i].path[0] != '/' || !(m.v[i].prot & PROT_EXEC))
			continue;   /* code only: an object's probes are in its text */
		n = file_probe_in_root(t, pid, m.v[i].path);
		if (n < 0 && n != -ENOENT && is_sampler_path(m.v[i].path)) {
			maps_free(&m);
			return n;
		}
		found |= n > 0;   /* another object that cannot be probed is no reason to stop */
	}
	maps_free(&m);
	if (!found && preload_of(pid, pre, sizeof(pre)) == 0) {
		found = file_probe_in_root(t, pid, pre) > 0;   /* probes set at its mmap, before any call */
	}
	if (!found) {
		if ((n = file_probe_exe(t, pid)) < 0)
			return n == -ENOENT ? 0 : n;
		found = n > 0;
	}
	return found;
}

/* ---- waiting and listed processes ---- */

static struct tpending *pending_find(struct targets *t, pid_t pid)
{
	for (size_t i = 0; i < t->npending; i++)
		if (t->pending[i].pid == pid)
			return &t->pending[i];
	return NULL;
}

static void pending_remove(struct targets *t, pid_t pid)
{
	struct tpending *p = pending_find(t, pid);

	if (p)
		*p = t->pending[--t->npending];
}

static void unsampled_remove(struct targets *t, pid_t pid)
{
	for (size_t i = 0; i < t->nunsampled; i++)
		if (t->unsampled[i].pid == pid) {
			memmove(&t->unsampled[i], &t->unsampled[i + 1],
				(t->nunsampled - i - 1) * sizeof(t->unsampled[0]));
			t->nunsampled--;
			return;
		}
}

/* Whether exe was logged as lacking the sampler already (and notes that it is now). */
static bool logged_before(struct targets *t, const char *exe)
{
	uint64_t h = hash_bytes(exe, strlen(exe), 0) | 1;

	if (hmap_find(&t->logged, h, NULL, NULL))
		return true;
	if (t->logged.n >= TARGETS_LOGGED_MAX) {
		if (!t->logged_full)
			log_warn("daemon: %d executables logged as lacking the sampler; further ones "
				 "only show in `memprofd query status`", TARGETS_LOGGED_MAX);
		t->logged_full = true;
		return true;
	}
	hmap_insert(&t->logged, h, (void *)1);
	return false;
}

/* A process the exec gate traced from its exec that turned out to lack the sampler: out
 * of the targets map (its access samples are not ours to take), and left for the
 * recorder to forget as an exited process whose row needs no writing (it allocated
 * nothing we saw). */
static void drop_unsampled(struct targets *t, pid_t pid)
{
	map_remove(t, (uint32_t)pid);
	hmap_foreach(&t->r->procs.procs, i) {
		struct proc *p = t->r->procs.procs.vals[i];
		if (p->pid == (uint32_t)pid && !p->exited && !p->stacks.n) {
			p->exited = p->exit_written = true;
			if (t->ntraced)
				t->ntraced--;
		}
	}
}

/* A selected process without the sampler: listed for query status, logged once per
 * executable with the two ways to load it. */
static void unsampled_add(struct targets *t, pid_t pid, unsigned long long ticks,
			  const struct proc_identity *id, const char *rule)
{
	for (size_t i = 0; i < t->nunsampled; i++)
		if (t->unsampled[i].pid == pid) {
			if (t->unsampled[i].ticks == ticks)
				return;
			unsampled_remove(t, pid);   /* a reused PID */
			break;
		}
	drop_unsampled(t, pid);
	if (!logged_before(t, id->exe)) {
		char hint[PATH_MAX + 256];
		char mean[96] = "";
		sampled_missing_hint(pid, t->sampler_hint, hint, sizeof(hint));
		if (t->cfg->sample_bytes != SAMPLER_DEFAULT_MEAN)
			snprintf(mean, sizeof(mean), ", with Environment=MEMPROFD_SAMPLE_BYTES=%llu "
				 "([sampling] sample_bytes)", (unsigned long long)t->cfg->sample_bytes);
		log_warn("daemon: pid %d (%s) matches [target %s] but has no memprofd sampler "
			 "loaded, so it is not profiled (alloc = sampled); %s%s", (int)pid, id->exe,
			 rule ? rule : "?", hint, mean);
	}
	if (t->nunsampled == TARGETS_UNSAMPLED_MAX) {
		t->unsampled_over++;
		return;
	}
	struct tunsampled *u = &t->unsampled[t->nunsampled++];
	u->pid = pid;
	u->ticks = ticks;
	snprintf(u->exe, sizeof(u->exe), "%s", id->exe);
}

/* No sampler in pid now: wait for its loader if it may still map one, else list it. */
static void no_sampler(struct targets *t, pid_t pid, const struct proc_identity *id,
		       const char *rule, enum why why)
{
	unsigned long long ticks;
	int64_t now = mono_ms();
	struct tpending *p;

	if (start_ticks(pid, &ticks) < 0)
		return;   /* gone */
	if ((p = pending_find(t, pid)) && p->ticks != ticks) {
		pending_remove(t, pid);   /* a reused PID */
		p = NULL;
	}
	if (why == WHY_EXEC || (!p && age_ms(ticks) < TARGETS_SAMPLER_WAIT_MS)) {
		if (!p && t->npending < TARGETS_PENDING_MAX)
			p = &t->pending[t->npending++];
		if (p) {
			*p = (struct tpending){ pid, ticks, now + TARGETS_SAMPLER_WAIT_MS };
			if (!t->next_recheck || t->next_recheck > now + TARGETS_RECHECK_MS)
				t->next_recheck = now + TARGETS_RECHECK_MS;
			return;
		}
	} else if (p && now < p->deadline) {
		return;   /* still within its loader's time */
	}
	pending_remove(t, pid);
	unsampled_add(t, pid, ticks, id, rule);
}

/* ---- deciding ---- */

/* A process decided at its exec whose probes were attached only now: it ran without
 * them since its exec (what it did meanwhile is lost), counted for query status. */
static void note_late(struct targets *t, size_t files_before, enum why why)
{
	if (why != WHY_EXEC)
		return;
	for (size_t i = files_before; i < t->nfiles; i++)
		if (t->files[i].probes) {
			t->r->missed_late++;
			return;
		}
}

static bool uses_build_id(const struct config *c)
{
	if (c->deny.build_id.n)
		return true;
	for (size_t i = 0; i < c->ntargets; i++)
		if (c->targets[i].build_id.n)
			return true;
	return false;
}

int targets_decide_exec(struct targets *t, pid_t pid, struct proc_identity *id,
			const char *open_path)
{
	if (pid == getpid())
		return 0;
	if (uses_build_id(t->cfg) && elf_build_id_of(open_path, id->build_id, sizeof(id->build_id)) < 0)
		id->build_id[0] = '\0';
	if (rules_match(t->cfg, id).verdict != RULE_TARGET)
		return 0;
	if (t->ntraced >= t->cfg->max_processes) {
		t->skipped_full++;
		return 0;
	}
	t->ntraced++;
	return 1;
}

void targets_untrack(struct targets *t, pid_t pid, uint64_t start_ns)
{
	uint64_t v;

	/* Not a successor of the PID that the kernel marked meanwhile. */
	if (bpf_map_lookup_elem(map_fd(t), &(uint32_t){ (uint32_t)pid }, &v) == 0 &&
	    (v == 0 || v == start_ns))
		map_remove(t, (uint32_t)pid);
	if (t->pid_links)
		target_links_drop(&t->links, (uint32_t)pid);
}

size_t targets_end_gone(struct targets *t)
{
	struct timespec now;
	size_t n = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	hmap_foreach(&t->r->procs.procs, i) {
		struct proc *p = t->r->procs.procs.vals[i];
		if (p->gone_unseen && !p->exit_mono_ns) {
			/* Still no exit record a tick later (lost with a full ring): the objects
			 * attribution holds for it settle now, or it would be held for good. */
			p->exit_mono_ns = mono_ns();
			access_exit(t->r, p->pid, p->start_ns, p->exit_mono_ns);
			continue;
		}
		if (p->exited || !p->start_ns || proc_running(p->pid, p->start_ns))
			continue;
		p->exited = true;
		p->gone_unseen = true;
		p->exit_ns = now.tv_sec * 1000000000LL + now.tv_nsec;
		n++;
	}
	return n;
}

void targets_unaccept(struct targets *t)
{
	if (t->ntraced)
		t->ntraced--;
}

void targets_retrack(struct targets *t, pid_t pid, uint64_t start_ns)
{
	map_add(t, (uint32_t)pid, start_ns);
}

void targets_preprobe(struct targets *t, const char *path)
{
	/* Our own sampler's path (the daemon's hint, not a process's): opened as it is. */
	if (!path || !*path)
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (file_probe_fd(t, fd < 0 ? -errno : fd, path) < 0)
		log_warn("daemon: probing %s ahead of its processes failed", path);
}

static void consider(struct targets *t, pid_t pid, uint64_t start_ns, enum why why)
{
	struct proc_identity id;
	char exe[64];

	if (pid == getpid() || rules_read_identity(pid, &id) < 0 || !id.exe[0])
		return;   /* gone, a kernel thread, or ourselves */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (elf_build_id_of(exe, id.build_id, sizeof(id.build_id)) < 0)
		id.build_id[0] = '\0';
	struct rule_match m = rules_match(t->cfg, &id);

	if (m.verdict != RULE_TARGET) {
		if (t->pid_links)
			target_links_drop(&t->links, (uint32_t)pid);
		pending_remove(t, pid);   /* exec'd into something not selected */
		unsampled_remove(t, pid);
		return;
	}
	bool known = map_has(t, (uint32_t)pid);
	if (!known && t->ntraced >= t->cfg->max_processes) {
		t->skipped_full++;
		return;
	}
	size_t files_before = t->nfiles;
	if (!t->smp) {
		int n = attach_exact(t, pid, start_ns);
		note_late(t, files_before, why);
		if (n < 0 || known)
			return;
	} else {
		t->own_fd = -1;
		int n = attach_sampler(t, pid);
		note_late(t, files_before, why);
		if (n < 0)
			return;
		if (n == 0) {
			no_sampler(t, pid, &id, m.rule, why);
			return;
		}
		pending_remove(t, pid);
		unsampled_remove(t, pid);
		if (known) {
			wlinks_add(&t->wl, pid, t->own_fd);
			return;
		}
	}
	unsigned long long ticks;
	if (map_add(t, (uint32_t)pid, start_ns))
		return;
	/* Added after its exit (no exit event will remove it) or to a successor of the
	 * PID: take it back, or a later process with this PID would be traced. */
	if (start_ns ? !proc_running((uint32_t)pid, start_ns) : start_ticks(pid, &ticks) < 0) {
		map_remove(t, (uint32_t)pid);
		if (t->pid_links)
			target_links_drop(&t->links, (uint32_t)pid);
		return;
	}
	t->ntraced++;
	if (t->smp)
		wlinks_add(&t->wl, pid, t->own_fd);
}

/* ---- exact mode's hold at exec (bpf/exec_watch.bpf.h) ---- */

static void hold_file(struct targets *t, const struct hold_key *k, size_t i)
{
	const struct tfile *f = &t->files[i];

	if (exec_hold_add_file(&t->hold, k, ((uint64_t)f->dev << 32) ^ f->ino, f->fd, f->sites))
		log_warn("daemon: more than %d files to link at held execs: some are linked late",
			 EXEC_HOLD_FILES_MAX);
}

/* The files that exe rules name literally (no glob): their execs are held, and the hold
 * thread links each held process to its executable (when it defines allocator
 * functions) and the host's allocator libraries. A glob, a comm, cgroup or build-id rule
 * is decided without a hold (its first allocations may precede its probes). Rules are
 * read once, at start. */
static void hold_rules(struct targets *t)
{
	int fd = bpf_map__fd(t->r->skel->maps.hold_files);
	size_t n = 0;

	for (size_t i = 0; i < t->cfg->ntargets; i++) {
		const struct strlist *l = &t->cfg->targets[i].exe;
		for (size_t j = 0; j < l->n; j++) {
			struct stat st;
			size_t idx;
			if (strpbrk(l->v[j], "*?[") || stat(l->v[j], &st) < 0)
				continue;
			struct hold_key k = { .dev = ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev),
					      .ino = st.st_ino };
			int efd = open(l->v[j], O_RDONLY | O_CLOEXEC);
			if (file_probe_fd_at(t, efd < 0 ? -errno : efd, l->v[j], &idx) > 0)
				hold_file(t, &k, idx);
			uint32_t need = host_libs_needed(l->v[j]);
			for (size_t f = 0; f < t->nfiles; f++)
				if (t->files[f].dflt && (need & (1u << (t->files[f].dflt - 1))))
					hold_file(t, &k, f);
			if (bpf_map_update_elem(fd, &k, &(uint8_t){ 1 }, BPF_ANY) == 0)
				n++;
		}
	}
	t->held_files = n;
}

bool targets_held_after(struct targets *t, pid_t pid, uint64_t start_ns, uint64_t exec_ns)
{
	struct hold_val v;

	if (!t->pid_links)
		return false;
	/* The held map first: the hold thread links before it deletes the entry. */
	if (bpf_map_lookup_elem(t->hold.held_fd, &(uint32_t){ (uint32_t)pid }, &v) == 0 &&
	    v.start_ns == start_ns && v.held_ns > exec_ns)
		return true;
	return target_links_held_after(&t->links, (uint32_t)pid, start_ns, exec_ns);
}

void targets_held_exec(struct targets *t, pid_t pid, uint64_t start_ns, bool accepted)
{
	/* Linked and continued by the hold thread; an accepted one gets the rest of its
	 * probes in consider (EV_NEWEXEC), a rejected one loses its links. */
	if (t->pid_links && !accepted)
		target_links_reject(&t->links, (uint32_t)pid, start_ns);
}

void targets_consider(struct targets *t, pid_t pid, uint64_t start_ns, bool exec)
{
	consider(t, pid, start_ns, exec ? WHY_EXEC : WHY_RESCAN);
}

void targets_lifecycle(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	struct targets *t = arg;

	switch (type) {
	case EV_NEWEXEC:  /* accepted by the exec gate: its probes */
	case EV_EXEC:     /* a target's new image may bring binaries to probe */
		consider(t, (pid_t)tgid, start_ns, WHY_EXEC);
		break;
	case EV_FORK: {   /* added in the kernel; its parent's links do not follow it */
		const struct proc *p = proc_find(&t->r->procs, tgid, start_ns);

		t->ntraced++;
		if (t->pid_links)
			attach_exact(t, (pid_t)tgid, start_ns);
		if (p && p->ppid)   /* else it waits for the next /proc walk (rescan_interval) */
			wlinks_add_child(&t->wl, (pid_t)tgid, (pid_t)p->ppid);
		break;
	}
	case EV_EXIT:   /* remembered as ended: a link request still queued is not made */
		if (t->pid_links)
			target_links_reject(&t->links, tgid, start_ns);
		if (t->ntraced)
			t->ntraced--;
		pending_remove(t, (pid_t)tgid);
		wlinks_remove(&t->wl, (pid_t)tgid);
		break;
	}
}

void targets_recheck(struct targets *t, int64_t now_ms)
{
	if (t->pid_links) {
		exec_hold_count_late(&t->hold, t->r);
		t->r->missed_late += target_links_take_denied(&t->links);
	}
	if (!t->next_recheck || now_ms < t->next_recheck)
		return;
	t->next_recheck = 0;
	/* consider() may remove entries: walk a copy. */
	size_t n = t->npending;
	struct tpending *v = n ? malloc(n * sizeof(*v)) : NULL;
	if (n && !v)
		return;
	if (n)
		memcpy(v, t->pending, n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		if (!still(v[i].pid, v[i].ticks))
			pending_remove(t, v[i].pid);
		else
			consider(t, v[i].pid, 0, WHY_RECHECK);
	}
	free(v);
	if (t->npending)
		t->next_recheck = now_ms + TARGETS_RECHECK_MS;
}

void targets_prune(struct targets *t)
{
	size_t w = 0;

	for (size_t i = 0; i < t->nunsampled; i++)
		if (still(t->unsampled[i].pid, t->unsampled[i].ticks))
			t->unsampled[w++] = t->unsampled[i];
	t->nunsampled = w;
	wlinks_prune(&t->wl);     /* links of processes that ended unseen */
}

void targets_rescan(struct targets *t)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;

	if (!dir)
		return;
	targets_prune(t);
	t->unsampled_over = 0;     /* recounted by this walk */
	while ((e = readdir(dir))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		consider(t, (pid_t)pid, 0, WHY_RESCAN);
	}
	closedir(dir);
	t->ntraced = map_sweep(t);   /* what lost lifecycle records skewed */
}

size_t targets_unsampled_list(const struct targets *t, char *buf, size_t n)
{
	size_t len = 0;

	if (n)
		buf[0] = '\0';
	for (size_t k = 0; k < t->nunsampled && k < TARGETS_UNSAMPLED_SHOWN && len < n; k++) {
		const struct tunsampled *u = &t->unsampled[t->nunsampled - 1 - k];
		int w = snprintf(buf + len, n - len, "%s%d %s", k ? "\n" : "", (int)u->pid, u->exe);
		len += w > 0 ? (size_t)w : 0;
	}
	return len < n ? len : n ? n - 1 : 0;
}

uint64_t targets_unsampled_count(const struct targets *t)
{
	return t->nunsampled + t->unsampled_over;
}

int targets_init(struct targets *t, struct recorder *r, struct sampled *smp,
		 const struct config *cfg)
{
	memset(t, 0, sizeof(*t));
	t->r = r;
	t->smp = smp;
	t->cfg = cfg;
	t->files = calloc(TARGETS_FILES_MAX, sizeof(*t->files));
	t->pending = calloc(TARGETS_PENDING_MAX, sizeof(*t->pending));
	t->unsampled = calloc(TARGETS_UNSAMPLED_MAX, sizeof(*t->unsampled));
	if (!t->files || !t->pending || !t->unsampled) {
		targets_free(t);
		return -ENOMEM;
	}
	if (smp && sampled_find_library(t->sampler_hint, sizeof(t->sampler_hint)) < 0)
		t->sampler_hint[0] = '\0';
	t->own_fd = -1;
	/* Exact mode: per-process links where the kernel has them (else host-wide uprobes,
	 * which trap every process mapping the binaries). */
	t->pid_links = !smp && r->per_target_probes;
	if (t->pid_links) {
		target_links_init(&t->links, r);
		probe_host_allocators(t);
		hold_rules(t);
		if (exec_hold_start(&t->hold, r, &t->links) < 0) {
			targets_free(t);
			return -EIO;
		}
	}
	return wlinks_init(&t->wl, smp && r->watch && r->watch_inprocess ? smp : NULL);
}

void targets_free(struct targets *t)
{
	if (t->pid_links)
		exec_hold_stop(&t->hold);   /* first: it reads files[] fds and links */
	wlinks_free(&t->wl);
	for (size_t i = 0; t->files && i < t->nfiles; i++) {
		for (int k = 0; k < SAMPLED_LINKS; k++)
			usdt_link_destroy(&t->files[i].links[k]);
		if (t->files[i].fd >= 0)
			close(t->files[i].fd);
		free(t->files[i].sites);
	}
	if (t->pid_links)
		target_links_free(&t->links);
	free(t->files);
	free(t->pending);
	free(t->unsampled);
	hmap_free(&t->logged);
	memset(t, 0, sizeof(*t));
}
