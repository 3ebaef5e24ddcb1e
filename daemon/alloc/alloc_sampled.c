/* `--alloc sampled` (the default): loads sampled.bpf.c, attaches its USDT programs to
 * libmemprofd_sampler (preloaded into the child, or found in a running process), and
 * turns each sampled object's death into a weighted MIB. Invariants: as exact mode,
 * every sampled object the kernel tracked ends up in one aggregate or a counted drop;
 * per context, the estimated alloc_count stays within one object of the sum of the
 * samples' weights (the fractional part is carried per context, never rounded away).
 *
 * How each MIB field is estimated (sample weight w = 1/(1-exp(-size/mean)), unbiased by
 * Horvitz-Thompson; c = the integer share of w given to this sample by the carry):
 *   alloc_count          sum of c                        (unbiased, +-1 per context)
 *   total_size           sum of c * size                 (unbiased up to the carry)
 *   total_lifetime_ns    sum of c * lifetime             (lifetime of the sampled object)
 *   min/max size, min/max lifetime   over the sampled objects (not estimates: a sample
 *                        of the context's range, biased towards the middle)
 *   alloc/dealloc ts and cpu         of the last sampled object, as MemProf
 *   num_lifetime_overlaps, num_same_alloc_cpu, num_same_dealloc_cpu   MemProf's
 *                        increment between consecutive samples, scaled by c
 *   num_migrated_cpu     first sample's flag, as MemProf's Merge
 *   access_samples       raw access samples that hit the sampled object (not weighted)
 *   total_access_count   sum of c * a, a = the object's own estimated accesses (its
 *                        samples' weights, attrib): the Horvitz-Thompson estimate of the
 *                        context's accesses, with the same integer share c as alloc_count
 *                        and total_size, so the query's density (total_access_count /
 *                        total_size / average lifetime) is a ratio of two sums over the
 *                        same sampled objects and a one-sample context shows its object's
 *                        own density
 *   min/max_access_count a of the sampled objects (per object, never scaled)
 * Lifetimes come from the sampled objects' own alloc and free probes. With --access,
 * objects of the region go through attribution (attrib_alloc at memprofd:alloc,
 * attrib_free at memprofd:free) and are aggregated when they settle; the allocation
 * ring's drain time gives attribution its allocation watermark. Objects outside the
 * region (region full) have no free probe, so no known lifetime to credit samples in:
 * they are aggregated without accesses, as are objects whose alloc record was lost. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "sampled.skel.h"
#include "base/log.h"
#include "daemon/access/watch.h"
#include "daemon/alloc/events.h"
#include "daemon/alloc/ustack.h"
#include "daemon/alloc/uprobe_multi.h"
#include "daemon/alloc/usdt_multi.h"
#include "base/array.h"
#include "daemon/attrib/attrib.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/core_btf.h"
#include "symbolizer/rootfs.h"
#include "sampler/sampler.h"
#include "base/clock.h"

extern char **environ;

struct carry {
	const struct istack *stack;
	double wsum;              /* sum of the weights of this context's samples */
	uint64_t emitted;         /* objects already given to aggregates */
	uint64_t pending;         /* samples whose weight waits for the next emitted one */
	double watch_acc, watch_bs;   /* its watched objects: accesses, byte-seconds of life */
	double whole_acc, whole_bytes;/* ... those one watch saw from allocation to free */
	double whole_life;            /* the longest life among those (s) */
};

#define SAMPLED_WATERMARK_SLACK_NS 2000000ULL  /* records may trail the ring's order by this much */

struct sampled {
	struct recorder *r;
	struct sampled_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks, links_cap;
	bool multi;               /* USDTs through multi-uprobe links (usdt_multi.c) */
	struct usdt_specs specs;  /* their argument specs */
	int *fds;                 /* their links */
	size_t nfds, fds_cap;
	struct hmap carries;      /* istack hash -> struct carry */
	uint64_t samples;         /* sampled deaths aggregated */
	double est_objects;       /* sum of their weights */
	uint64_t watermark;       /* every record made before this has been consumed */
	uint64_t records;         /* sampled allocations and frees read (EV_SALLOC, EV_SFREE) */
	/* Samplers attached before the watch opened: memprofd:watch waits for it. Attaching
	 * it (its semaphore) is what turns the sampler's in-process watches on, so only
	 * `record` does (sampled_attach_binary): the daemon attaches per sampler file for
	 * every process that maps it, selected or not, and would make them all pay. */
	char *watch_paths[SAMPLED_WATCH_PENDING];
	int watch_pids[SAMPLED_WATCH_PENDING];
	unsigned nwatch_pending;
	bool watch_per_target;    /* record -- CMD: no host-wide memprofd:watch (watch_targets.c) */
};

static int on_event(void *ctx, void *data, size_t len);

static int add_link(struct sampled *s, struct bpf_link *l)
{
	return events_link_push(&s->links, &s->nlinks, &s->links_cap, l);
}

/* Keeps a USDT attachment until sampled_close; on failure destroys it. */
static int add_usdt(struct sampled *s, struct usdt_link *l)
{
	int err;

	if (!l->multi) {
		err = l->link ? add_link(s, l->link) : 0;
		l->link = NULL;
		return err;
	}
	if (ARRAY_GROW(s->fds, s->fds_cap, s->nfds, 8) < 0) {
		usdt_link_destroy(l);
		return -ENOMEM;
	}
	s->fds[s->nfds++] = l->fd;
	*l = (struct usdt_link){ 0 };
	return 0;
}

/* The USDT programs, loaded for multi-uprobe links where the kernel has them: one link
 * per probe name and file, so a recording's end waits one RCU grace period per link,
 * not one per site (MEMPROFD_NO_UPROBE_MULTI: libbpf's classic USDT attachment). */
static void usdt_prepare(struct sampled *s)
{
	struct bpf_program *progs[] = { s->skel->progs.on_alloc, s->skel->progs.on_free,
		s->skel->progs.on_otel_alloc, s->skel->progs.on_otel_free, s->skel->progs.on_watch };

	s->multi = uprobe_multi_supported();
	for (size_t i = 0; s->multi && i < sizeof(progs) / sizeof(progs[0]); i++)
		bpf_program__set_expected_attach_type(progs[i], UPROBE_MULTI_ATTACH_TYPE);
}

/* provider:name of path on prog, into *out: 0, -ENOENT (path has none), -errno. */
static int usdt_attach(struct sampled *s, struct bpf_program *prog, int pid, const char *path,
		       const char *provider, const char *name, struct usdt_link *out)
{
	*out = (struct usdt_link){ 0 };
	if (!s->multi) {
		out->link = bpf_program__attach_usdt(prog, pid, path, provider, name, NULL);
		return out->link ? 0 : -errno;
	}
	int fd = usdt_multi_attach(&s->specs, bpf_program__fd(prog), path, pid, provider, name);
	if (fd < 0)
		return fd;
	*out = (struct usdt_link){ .fd = fd, .multi = true };
	return 0;
}

/* What the recording needs of the object, before its load. */
static int sampled_configure(struct sampled *s, struct recorder *r)
{
	int err;

	s->skel->rodata->watch_all_exec = r->watch_all_exec;
	s->skel->rodata->mark_at_exec = r->mark_at_exec;
	if (r->no_otel) {
		bpf_program__set_autoload(s->skel->progs.on_otel_alloc, false);
		bpf_program__set_autoload(s->skel->progs.on_otel_free, false);
	}
	if (r->no_watch_usdt)
		bpf_program__set_autoload(s->skel->progs.on_watch, false);
	usdt_prepare(s);
	if (r->ring_fd > 0 && (err = bpf_map__reuse_fd(s->skel->maps.events, r->ring_fd)))
		return log_error_errno(err, "%s: adopting the ring buffer: %s", recorder_cmd(r), strerror(-err));
	if (r->ring_fd <= 0 && r->ring_bytes &&
	    (err = bpf_map__set_max_entries(s->skel->maps.events, (__u32)r->ring_bytes)))
		return log_error_errno(err, "%s: sizing the ring buffer: %s", recorder_cmd(r), strerror(-err));
	if ((err = ustack_size_scratch(s->skel->maps.ustack_map)))
		return log_error_errno(err, "%s: sizing the stack scratch: %s", recorder_cmd(r), strerror(-err));
	return 0;
}

/* sampled.bpf.c as core_btf_load drives it. */
struct sampled_load_arg {
	struct sampled *s;
	struct recorder *r;
};

static int sampled_skel_open(void *arg, const struct bpf_object_open_opts *oo)
{
	struct sampled_load_arg *a = arg;

	a->s->skel = sampled_bpf__open_opts(oo);
	return a->s->skel ? 0 : (errno ? -errno : -EINVAL);
}

static int sampled_skel_configure(void *arg)
{
	struct sampled_load_arg *a = arg;

	return sampled_configure(a->s, a->r);
}

static int sampled_skel_load(void *arg)
{
	return sampled_bpf__load(((struct sampled_load_arg *)arg)->s->skel);
}

static void sampled_skel_destroy(void *arg)
{
	struct sampled_load_arg *a = arg;

	sampled_bpf__destroy(a->s->skel);
	a->s->skel = NULL;
}

/* Opens and loads sampled.bpf.c, against the cached minimized kernel BTF where there is
 * one (core_btf.h). */
static int sampled_load(struct sampled *s, struct recorder *r)
{
	struct sampled_load_arg a = { .s = s, .r = r };
	struct core_btf_skel k = { .name = "sampled", .open = sampled_skel_open,
				   .configure = sampled_skel_configure, .load = sampled_skel_load,
				   .destroy = sampled_skel_destroy, .arg = &a };
	enum core_btf_stage stage;
	int err;

	k.obj = sampled_bpf__elf_bytes(&k.objsz);
	if ((err = core_btf_load(&k, &r->core_btf_used, &stage)) >= 0)
		return 0;
	return recorder_bpf_load_error(r, err, (int)stage);
}

int sampled_open(struct sampled **out, struct recorder *r)
{
	struct sampled *s = calloc(1, sizeof(*s));
	int err;

	*out = NULL;
	if (!s)
		return log_error_errno(-ENOMEM, "record: out of memory");
	s->r = r;
	if ((err = events_recorder_init(r))) {
		free(s);
		return err;
	}
	*out = s;

	if ((err = sampled_load(s, r)))
		return err;
	r->unwind_modes_fd = bpf_map__fd(s->skel->maps.unwind_modes);
	r->sent_stacks_fd = bpf_map__fd(s->skel->maps.sent_stacks);
	if (s->multi && (err = usdt_specs_init(&s->specs, bpf_map__fd(s->skel->maps.__bpf_usdt_specs),
					       bpf_map__value_size(s->skel->maps.__bpf_usdt_specs))))
		return log_error_errno(err, "%s: USDT spec map: unexpected layout", recorder_cmd(r));
	err = events_attach_lifecycle(s->skel->progs.on_fork, s->skel->progs.on_exec,
				      s->skel->progs.on_exit,
				      r->watch_all_exec ? NULL : s->skel->progs.on_mmap, &s->links,
				      &s->nlinks, &s->links_cap);
	if (err)
		return err;
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_event, s, NULL);
	if (!s->rb)
		return log_error_errno(-errno, "%s: ring buffer: %s", recorder_cmd(r), strerror(errno));
	r->stash = (struct stash){ .rb = s->rb, .handle = on_event, .ctx = s };
	return 0;
}

/* One provider's pair of probes in path: 1 attached, 0 path has none, -errno. */
static int attach_pair(struct sampled *s, const char *path, int pid, const char *provider,
		       struct bpf_program *alloc, struct bpf_program *freep,
		       struct usdt_link out[SAMPLED_LINKS])
{
	int err;

	if ((err = usdt_attach(s, alloc, pid, path, provider, "alloc", &out[0])))
		return err == -ENOENT ? 0 : log_error_errno(err, "%s: attaching USDT %s:alloc in %s: %s",
							    recorder_cmd(s->r), provider, path, strerror(-err));
	if ((err = usdt_attach(s, freep, pid, path, provider, "free", &out[1]))) {
		usdt_link_destroy(&out[0]);
		return log_error_errno(err, "%s: attaching USDT %s:free in %s: %s", recorder_cmd(s->r),
				       provider, path, strerror(-err));
	}
	return 1;
}

bool sampled_may_have_otel(const char *path)
{
	static const char provider[] = "otel_memory";
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool found = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			found = memmem(m, (size_t)st.st_size, provider, sizeof(provider)) != NULL;
			munmap(m, (size_t)st.st_size);
		}
	}
	close(fd);
	return found;
}

/* memprofd's own probes, else the OpenTelemetry contract's (never both: libmemprofd_sampler
 * emits both, and each sample must be counted once). */
int sampled_attach_links(struct sampled *s, const char *path, int pid,
			 struct usdt_link out[SAMPLED_LINKS])
{
	int n;

	out[0] = out[1] = (struct usdt_link){ 0 };
	n = attach_pair(s, path, pid, "memprofd", s->skel->progs.on_alloc, s->skel->progs.on_free, out);
	if (n != 0)
		return n;
	if (s->r->no_otel)
		return 0;
	n = attach_pair(s, path, pid, "otel_memory", s->skel->progs.on_otel_alloc,
			s->skel->progs.on_otel_free, out);
	return n > 0 ? SAMPLED_OTEL : n;
}

int sampled_attach_binary(struct sampled *s, const char *path, int pid)
{
	struct usdt_link l[SAMPLED_LINKS];
	int n, err;

	/* Known before the process runs, so its frames symbolize even if it exits early. */
	bin_register(&s->r->procs, path, path);
	n = sampled_attach_links(s, path, pid, l);

	if (n <= 0)
		return n;
	if (n == 1 && !s->r->no_watch && !(pid < 0 && s->watch_per_target) &&
	    s->nwatch_pending < SAMPLED_WATCH_PENDING &&
	    (s->watch_paths[s->nwatch_pending] = strdup(path)))
		s->watch_pids[s->nwatch_pending++] = pid;
	if (s->r->watch && s->r->watch_inprocess)
		sampled_attach_watch(s);
	for (int i = 0; i < SAMPLED_LINKS; i++)
		if ((err = add_usdt(s, &l[i]))) {
			for (int j = i + 1; j < SAMPLED_LINKS; j++)
				usdt_link_destroy(&l[j]);
			return err;
		}
	return n;
}

int sampled_attach_watch(struct sampled *s)
{
	int n = 0;

	for (unsigned i = 0; i < s->nwatch_pending; i++) {
		struct usdt_link l = { 0 };

		if (s->r->watch && s->r->watch_inprocess &&
		    usdt_attach(s, s->skel->progs.on_watch, s->watch_pids[i],
				s->watch_paths[i], "memprofd", "watch", &l) == 0 &&
		    add_usdt(s, &l) == 0)
			n++;
		free(s->watch_paths[i]);
	}
	s->nwatch_pending = 0;
	return n;
}

void sampled_watch_per_target(struct sampled *s)
{
	s->watch_per_target = true;
}

int sampled_attach_watch_pid(struct sampled *s, const char *path, int pid)
{
	struct usdt_link l = { 0 };
	int err;

	if (!s->r->watch || !s->r->watch_inprocess)
		return 0;
	err = usdt_attach(s, s->skel->progs.on_watch, pid, path, "memprofd", "watch", &l);
	if (!err)
		err = add_usdt(s, &l);
	return err < 0 ? err : 1;
}

int sampled_watch_sites(struct sampled *s, const char *path, struct usdt_sites *out, int *prog_fd)
{
	if (!s->multi || !s->r->watch || !s->r->watch_inprocess)
		return -EOPNOTSUPP;
	*prog_fd = bpf_program__fd(s->skel->progs.on_watch);
	return usdt_multi_sites(&s->specs, path, "memprofd", "watch", out);
}

int sampled_add_target(struct sampled *s, uint32_t pid)
{
	uint64_t any = 0;

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &pid, &any, BPF_ANY))
		return log_error_errno(-errno, "record: adding target %u: %s", pid, strerror(errno));
	return 0;
}

/* ---- finding the sampler ---- */

static bool is_sampler_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return strncmp(b ? b + 1 : path, "libmemprofd_sampler.so", 22) == 0;
}

int sampled_find_library(char *out, size_t outsz)
{
	char self[PATH_MAX], cand[PATH_MAX + 64];
	const char *env = getenv("MEMPROFD_SAMPLER");
	ssize_t n;

	if (env && *env) {
		if (access(env, R_OK))
			return log_error_errno(-errno, "record: MEMPROFD_SAMPLER=%s: %s", env, strerror(errno));
		return realpath(env, out) && strlen(out) < outsz ? 0 : -ENAMETOOLONG;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		/* Build tree (cli/memprofd -> sampler/), then an installed prefix. */
		static const char *const rel[] = {
			"/../sampler/libmemprofd_sampler.so", "/../lib/x86_64-linux-gnu/libmemprofd_sampler.so",
			"/../lib/x86_64-linux-gnu/libmemprofd_sampler.so.0",   /* runtime package, no -dev */
			"/../lib/aarch64-linux-gnu/libmemprofd_sampler.so", "/../lib64/libmemprofd_sampler.so",
			"/../lib/libmemprofd_sampler.so",
		};
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(cand, sizeof(cand), "%s%s", self, rel[i]);
			if (access(cand, R_OK) == 0 && realpath(cand, out) && strlen(out) < outsz)
				return 0;
		}
	}
	static const char *const sys[] = {
		"/usr/lib/x86_64-linux-gnu/libmemprofd_sampler.so", "/usr/lib/x86_64-linux-gnu/libmemprofd_sampler.so.0",
		"/usr/local/lib/x86_64-linux-gnu/libmemprofd_sampler.so",
		"/usr/lib/aarch64-linux-gnu/libmemprofd_sampler.so", "/usr/lib64/libmemprofd_sampler.so",
		"/usr/local/lib/libmemprofd_sampler.so", "/usr/lib/libmemprofd_sampler.so",
	};
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (access(sys[i], R_OK) == 0 && strlen(sys[i]) < outsz) {
			strcpy(out, sys[i]);
			return 0;
		}
	return -ENOENT;
}

/* sampled_attach_pid's work; quiet: errors are returned, not logged (a child may be gone). */
static int attach_pid(struct sampled *s, int pid, bool quiet)
{
	char maps[64], line[PATH_MAX + 256], path[PATH_MAX + 64];
	FILE *f;
	int found = 0, err;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "re");
	if (!f && quiet)
		return -errno;
	if (!f)
		return log_error_errno(-errno, "record: --pid %d: %s: %s", pid, maps, strerror(errno));
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		if (!p)
			continue;
		p[strcspn(p, "\n")] = '\0';
		if (!is_sampler_name(p))
			continue;
		/* Resolved inside the target's root: its links never reach our files. */
		int fd = rootfs_open(pid, p);
		if (fd < 0) {
			fclose(f);
			if (quiet)
				return fd;
			return log_error_errno(fd, "record: --pid %d: %s inside its root: %s", pid, p,
					       strerror(-fd));
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		err = sampled_attach_binary(s, path, pid);
		close(fd);
		if (err < 0) {
			fclose(f);
			return err;
		}
		found = err;
	}
	fclose(f);
	if (found)
		return 1;
	/* Linked statically: the probes are in the executable. */
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	return sampled_attach_binary(s, path, pid);
}

int sampled_attach_pid(struct sampled *s, int pid)
{
	return attach_pid(s, pid, false);
}

int sampled_attach_child(struct sampled *s, int pid)
{
	return attach_pid(s, pid, true);
}

/* Which allocator a process without the sampler uses, for the hint (see sampler.c on
 * why jemalloc's and tcmalloc's own sampling is not used instead). */
static const char *other_allocator(int pid)
{
	char maps[64], line[PATH_MAX + 256];
	const char *what = NULL;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	if (!(f = fopen(maps, "re")))
		return NULL;
	while (!what && fgets(line, sizeof(line), f)) {
		if (strstr(line, "/libjemalloc"))
			what = "jemalloc";
		else if (strstr(line, "/libtcmalloc"))
			what = "tcmalloc";
	}
	fclose(f);
	return what;
}

void sampled_missing_hint(int pid, const char *sampler_path, char *buf, size_t n)
{
	const char *lib = sampler_path && *sampler_path ? sampler_path : "/usr/lib/x86_64-linux-gnu/libmemprofd_sampler.so";
	const char *other = other_allocator(pid);

	snprintf(buf, n, "restart it with the sampler preloaded (systemd unit: Environment=LD_PRELOAD=%s) "
		 "or linked in (-lmemprofd_sampler)%s%s%s", lib, other ? " (it uses " : "",
		 other ? other : "", other ? ", which the preloaded sampler forwards to)" : "");
}

void sampled_report_missing(int pid, const char *sampler_path)
{
	char hint[PATH_MAX + 256];

	sampled_missing_hint(pid, sampler_path, hint, sizeof(hint));
	/* The hint's allocator note comes last there; here "or --alloc exact" is inserted. */
	char *note = strstr(hint, " (it uses ");
	char tail[128] = "";
	if (note) {
		snprintf(tail, sizeof(tail), "%s", note);
		*note = '\0';
	}
	log_error("record: --pid %d: the process has no memprofd sampler loaded (--alloc sampled needs it); "
		  "%s, or record it with --alloc exact%s", pid, hint, tail);
}

int sampled_setup_child_env(char ***envp_out, const char *sampler_path)
{
	size_t n = 0, k = 0;
	const char *old = getenv("LD_PRELOAD");
	char **env;

	*envp_out = NULL;
	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return -ENOMEM;
	size_t len = strlen("LD_PRELOAD=") + strlen(sampler_path) + (old && *old ? strlen(old) + 1 : 0) + 1;
	char *pre = malloc(len);
	if (!pre) {
		free(env);
		return -ENOMEM;
	}
	/* First, so the sampler's malloc comes before any other preloaded one's. */
	snprintf(pre, len, "LD_PRELOAD=%s%s%s", sampler_path, old && *old ? ":" : "", old && *old ? old : "");
	env[k++] = pre;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	env[k] = NULL;
	*envp_out = env;
	return 0;
}

void sampled_free_env(char **envp)
{
	if (envp) {
		free(envp[0]);
		free(envp);
	}
}

static bool carry_eq(const void *val, const void *key)
{
	return ((const struct carry *)val)->stack == key;
}

/* How many whole objects this sample adds to its context: the running sum of weights,
 * floored, minus what was already given (so the count stays within 1 of the estimate).
 * *samples: how many samples those objects rest on (this one and those carried). */
static struct carry *carry_get(struct sampled *s, const struct istack *st)
{
	uint64_t h = st->hash ? st->hash : 1;
	struct carry *c = hmap_find(&s->carries, h, carry_eq, st);

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || hmap_insert(&s->carries, h, c)) {
			free(c);
			return NULL;
		}
		c->stack = st;
	}
	return c;
}

static uint64_t carry_take(struct sampled *s, const struct istack *st, double w,
			   uint64_t *samples)
{
	struct carry *c = carry_get(s, st);

	if (!c) {
		*samples = 1;
		return (uint64_t)llround(w);
	}
	c->wsum += w;
	uint64_t total = (uint64_t)floor(c->wsum + 1e-9);
	uint64_t take = total > c->emitted ? total - c->emitted : 0;
	c->emitted += take;
	c->pending++;
	*samples = take ? c->pending : 0;
	if (take)
		c->pending = 0;
	return take;
}

/* The context of stack key `key` in p, or the unknown-stack context (counted). */
static struct istack *context_of(struct sampled *s, struct proc *p, uint64_t key)
{
	struct istack *st = key ? hmap_find(&p->stacks, stack_slot(key), NULL, NULL) : NULL;

	if (!st) {
		st = s->r->unknown_stack;
		s->r->unknown_stack_objs++;
		s->r->unknown_stack_why[!key ? UNKNOWN_NO_KEY : key & ALLOC_USTACK_KEY ?
					UNKNOWN_COPY_LOST : UNKNOWN_FP_LOST]++;
	}
	return st;
}

/* One sampled object's death, with a = est_accesses from access_samples samples. */
static void add_sample(struct sampled *s, struct proc *p, struct istack *st, uint64_t size,
		       uint64_t weight_q16, uint64_t alloc_ns, uint64_t dead_ns, uint32_t acpu,
		       uint32_t dcpu, uint64_t access_samples, uint64_t est_accesses,
		       const struct watch_est *we)
{
	struct recorder *r = s->r;
	double w = (double)weight_q16 / (double)(1u << SAMPLED_WEIGHT_SHIFT);
	struct mib m;

	if (w < 1)
		w = 1;      /* a probability is at most 1 */
	s->samples++;
	s->est_objects += w;
	uint64_t nsamples;
	uint64_t c = carry_take(s, st, w, &nsamples);
	if (c == 0)
		return;     /* its weight is carried to the context's next sample */
	mib_from_object(&m, size, alloc_ns, dead_ns, acpu, dcpu, est_accesses);
	m.alloc_count = c;
	m.total_size = c * size;
	m.total_lifetime_ns *= c;
	m.total_access_count = est_accesses > UINT64_MAX / c ? UINT64_MAX : c * est_accesses;
	m.access_samples = access_samples;
	m.alloc_samples = nsamples;
	if (we) {              /* raw evidence, never scaled by c (store/mib.h) */
		m.watch_hits = we->hits;
		m.watch_ns = we->watched_s > 0 ? (uint64_t)(we->watched_s * 1e9 + 0.5) : 0;
	}
	if (p->exit_mono_ns && dead_ns >= p->exit_mono_ns)
		mib_mark_live_at_exit(&m);   /* reaped at its process's exit: c objects */
	int64_t bucket = agg_bucket_of((int64_t)dead_ns + r->mono_to_real_ns);
	struct agg *a = agg_find(&r->aggs, st, p, bucket);
	struct mib before = a ? a->mib : (struct mib){ 0 };
	if (agg_add(&r->aggs, st, p, bucket, &m))
		return;
	r->objects++;
	if (!a || c == 1)
		return;
	/* MemProf's per-object increments count this sample once; it stands for c objects. */
	a = agg_find(&r->aggs, st, p, bucket);
	a->mib.num_lifetime_overlaps += (c - 1) * (a->mib.num_lifetime_overlaps - before.num_lifetime_overlaps);
	a->mib.num_same_alloc_cpu += (c - 1) * (a->mib.num_same_alloc_cpu - before.num_same_alloc_cpu);
	a->mib.num_same_dealloc_cpu += (c - 1) * (a->mib.num_same_dealloc_cpu - before.num_same_dealloc_cpu);
}

int sampled_reap(struct sampled *s, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu)
{
	int fd = bpf_map__fd(s->skel->maps.live);
	struct live_key *keys;
	size_t n;
	int err = events_live_keys(fd, tgid, &keys, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		struct slive_val v;
		if (bpf_map_lookup_elem(fd, &keys[i], &v))
			continue;
		if (tgid && v.start_ns != start_ns)
			continue;
		if (v.ts_ns > ts_ns)
			continue;
		if (v.flags & SAMPLED_F_THINNED) {   /* a sample thinning dropped: never reported */
			bpf_map_delete_elem(fd, &keys[i]);
			continue;
		}
		struct proc *p = proc_get(&s->r->procs, keys[i].tgid, v.start_ns);
		uint64_t dead = ts_ns > v.ts_ns ? ts_ns : v.ts_ns;
		bpf_map_delete_elem(fd, &keys[i]);
		/* Known to attribution: it ends there and is aggregated when it settles. */
		if (s->r->attrib && (v.flags & SAMPLER_F_REGION) &&
		    attrib_free(s->r->attrib, keys[i].tgid, v.start_ns, keys[i].addr, dead, cpu) == 0)
			continue;
		if (p)
			add_sample(s, p, context_of(s, p, v.key), v.size, v.weight_q16, v.ts_ns, dead,
				   v.cpu, cpu, 0, 0, NULL);
	}
	free(keys);
	return 0;
}

static void reap_cb(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns,
		    uint32_t cpu)
{
	sampled_reap(r->sampled, tgid, start_ns, ts_ns, cpu);
}

static int handle_event(struct sampled *s, void *data, size_t len)
{
	struct recorder *r = s->r;
	const struct ev_hdr *h = data;
	struct proc *p;

	r->events++;
	if (len < sizeof(*h) || !events_gate(r, data, len))
		return 0;
	if (h->type == EV_SFREE || h->type == EV_SALLOC)
		s->records++;
	if (h->type == EV_SFREE) {
		const struct ev_sfree *e = data;
		if (len < sizeof(*e) || !(p = events_proc(r, h->tgid, h->start_ns)))
			return 0;
		if (r->watch)
			watch_freed(r->watch, h->tgid, h->start_ns, e->addr, e->free_ns);
		if (r->attrib && (e->flags & SAMPLER_F_REGION) &&
		    attrib_free(r->attrib, h->tgid, h->start_ns, e->addr, e->free_ns, e->free_cpu) == 0) {
			ustack_key_done(p, e->key);
			return 0;   /* aggregated when it settles: sampled_object() */
		}
		add_sample(s, p, context_of(s, p, e->key), e->size, e->weight_q16, e->alloc_ns,
			   e->free_ns, e->alloc_cpu, e->free_cpu, 0, 0, NULL);
		ustack_key_done(p, e->key);   /* a copied stack's key is this sample's alone */
		return 0;
	}
	if (h->type == EV_SWATCH) {
		const struct ev_swatch *e = data;
		if (len >= sizeof(*e) && r->watch)
			watch_count_stray(r->watch, e->flags >> SAMPLED_WATCH_STRAY_SHIFT);
		if (len >= sizeof(*e) && r->watch)
			watch_report(r->watch, h->tgid, h->start_ns, e->addr, e->hits, e->watched_ns,
				     e->flags & SAMPLED_WATCH_K_MASK, e->flags & SAMPLED_WATCH_CAPPED,
				     e->flags & SAMPLED_WATCH_OTHER_THREAD);
		return 0;
	}
	if (h->type == EV_SALLOC) {
		const struct ev_salloc *e = data;
		if (len < sizeof(*e) || !r->attrib || !(e->flags & SAMPLER_F_REGION) ||
		    !(p = events_proc(r, h->tgid, h->start_ns)))
			return 0;
		/* On failure (index full) the object is aggregated at its death, without accesses. */
		if (attrib_alloc(r->attrib, h->tgid, h->start_ns, e->addr, e->size,
				 context_of(s, p, e->key), e->alloc_ns, e->cpu, e->weight_q16) == 0 &&
		    r->watch)
			watch_add(r->watch, h->tgid, h->start_ns, e->addr, e->size);
		return 0;
	}
	events_common(r, data, len, reap_cb);
	return 0;
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct sampled *s = ctx;

	if (s->r->stash.on)
		return stash_take(&s->r->stash, data, len);
	if (s->r->stop_discard) {   /* a stop past its drain deadline (service/stop.c) */
		s->r->stop_records++;
		return events_slice_after(s->r);
	}
	handle_event(s, data, len);
	return events_slice_after(s->r);
}

int sampled_poll(struct sampled *s, int timeout_ms, bool *more)
{
	uint64_t t0 = mono_ns();
	bool cut = false;
	int n = events_poll(s->r, s->rb, timeout_ms, EVENTS_SLICE_NS, &cut);

	/* A drain that began at t0 and ran to the end consumed every record submitted
	 * before t0; one cut short by its slice did not. */
	if (n >= 0 && !cut && t0 > SAMPLED_WATERMARK_SLACK_NS + s->watermark)
		s->watermark = t0 - SAMPLED_WATERMARK_SLACK_NS;
	if (more)
		*more = cut;
	return n < 0 ? log_error_errno(n, "record: polling ring buffer: %s", strerror(-n)) : n;
}

uint64_t sampled_watermark(const struct sampled *s)
{
	return s ? s->watermark : 0;
}

int sampled_targets_fd(const struct sampled *s)
{
	return bpf_map__fd(s->skel->maps.targets);
}

int sampled_live_fd(const struct sampled *s)
{
	return bpf_map__fd(s->skel->maps.live);
}

int sampled_ring_fd(const struct sampled *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

double sampled_set_keep(struct sampled *s, double keep)
{
	double q = keep * SAMPLED_KEEP_ONE;
	uint32_t k = q >= SAMPLED_KEEP_ONE ? SAMPLED_KEEP_ONE : q < 1 ? 1 : (uint32_t)llround(q);

	s->skel->data->keep_q16 = k;
	return (double)k / SAMPLED_KEEP_ONE;
}

void sampled_send_allocs(struct sampled *s, bool on)
{
	s->skel->bss->send_allocs = on;
}

static uint64_t d2u(double a)
{
	return a >= 1.8e19 ? UINT64_MAX : a <= 0 ? 0 : (uint64_t)(a + 0.5);
}

/* A watched object's accesses come from its windows' rate over its whole life (the
 * soft samples that hit it are a far smaller share); the traps count as its samples.
 * An object the budget left unwatched gets its context's watched density so far (a
 * ratio estimate), none before the first. Where watches saw objects of its context
 * from allocation to free (the sampler's, on objects that die within its span) and it
 * lived no longer than the longest of those, the ratio is accesses per byte: those
 * counts are whole, and their lifetimes hold their traps' time (a few traps outlast a
 * short-lived object's own microseconds many times over: per byte-second, every
 * sibling came out that many times too low). Else accesses per byte-second of the
 * watched ones' lives, less their traps' time (hits x the calibrated trap cost, at most
 * 90% of a life). */
void sampled_object(struct sampled *s, const struct attrib_object *o)
{
	struct recorder *r = s->r;
	struct proc *p = proc_find(&r->procs, o->tgid, o->start_ns);
	uint64_t samples = o->samples, est = o->est_accesses;
	struct watch_est we;
	bool watched = false;

	if (r->watch) {
		struct carry *c = o->ctx ? carry_get(s, o->ctx) : NULL;
		double life = (double)(o->free_ns - o->alloc_ns) / 1e9;
		double bs = (double)o->size * life;

		if (watch_take(r->watch, o->tgid, o->start_ns, o->addr, &we)) {
			double a = watch_est_accesses(&we, o->size, o->free_ns - o->alloc_ns);

			est = d2u(a);
			watched = true;
			samples += we.hits;
			r->watch_hits += we.hits;
			r->watch_est += est;
			if (c) {
				struct watch_counts wc;
				double traps;

				watch_get_counts(r->watch, &wc);
				traps = (double)we.hits * wc.trap_ns / 1e9 * (double)o->size;
				c->watch_acc += a;
				c->watch_bs += traps < 0.9 * bs ? bs - traps : 0.1 * bs;
				/* The sampler's watch ends at the free unless its K traps
				 * disarmed it or its span ran out (then a window may follow). */
				if (we.early_span_s > 0 && !we.early_capped &&
				    o->free_ns - o->alloc_ns < WATCH_INPROC_LIFE_NS) {
					c->whole_acc += a;
					c->whole_bytes += (double)o->size;
					if (life > c->whole_life)
						c->whole_life = life;
				}
			}
		} else if (c && !samples && c->whole_bytes > 0 && life <= c->whole_life) {
			est = d2u(c->whole_acc / c->whole_bytes * (double)o->size);
			r->watch_imputed++;
		} else if (c && c->watch_bs > 0 && !samples) {
			est = d2u(c->watch_acc / c->watch_bs * bs);
			r->watch_imputed++;
		}
	}
	if (p)
		add_sample(s, p, o->ctx, o->size, o->weight_q16, o->alloc_ns, o->free_ns,
			   o->alloc_cpu, o->free_cpu, samples, est, watched ? &we : NULL);
}

int sampled_drain(struct sampled *s)
{
	int n, total = 0;

	while ((n = ring_buffer__consume(s->rb)) > 0)
		total += n;
	return n < 0 ? n : total;
}

void sampled_counters(struct sampled *s, uint64_t out[SCNT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();

	memset(out, 0, SCNT_MAX * sizeof(out[0]));
	if (!s || !s->skel || ncpu <= 0)
		return;
	int fd = bpf_map__fd(s->skel->maps.counters);
	uint64_t *v = calloc(ncpu, sizeof(*v));
	if (!v)
		return;
	for (uint32_t c = 0; c < SCNT_MAX; c++) {
		if (bpf_map_lookup_elem(fd, &c, v))
			continue;
		for (int i = 0; i < ncpu; i++)
			out[c] += v[i];
	}
	free(v);
}

uint64_t sampled_records(struct sampled *s)
{
	uint64_t c[SCNT_MAX];

	if (!s)
		return 0;
	sampled_counters(s, c);
	return s->records + c[CNT_DROP_RINGBUF];
}

void sampled_stats(const struct sampled *s, uint64_t *samples, double *est_objects)
{
	*samples = s ? s->samples : 0;
	*est_objects = s ? s->est_objects : 0;
}

void sampled_close(struct sampled *s)
{
	if (!s)
		return;
	events_detach_all(s->links, s->nlinks, s->fds, s->nfds);
	free(s->links);
	free(s->fds);
	usdt_specs_free(&s->specs);
	for (unsigned i = 0; i < s->nwatch_pending; i++)
		free(s->watch_paths[i]);
	ring_buffer__free(s->rb);
	stash_free(&s->r->stash);
	s->r->stash.rb = NULL;
	sampled_bpf__destroy(s->skel);
	hmap_foreach(&s->carries, i)
		free(s->carries.vals[i]);
	hmap_free(&s->carries);
	free(s);
}
