/* `--alloc exact`: loads alloc.bpf.c, attaches its uprobes to every allocator function a
 * binary defines, and turns ring-buffer records into MIB aggregates. Invariant: every
 * object the kernel tracked ends up in exactly one aggregate (at its free, at its
 * process's exit or exec, or when recording stops), or in a counted drop. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "alloc.skel.h"
#include "base/log.h"
#include "daemon/alloc/events.h"
#include "daemon/alloc/ustack.h"
#include "daemon/record/recorder.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/alloc/core_btf.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/maps.h"
#include "symbolizer/probesite.h"
#include "daemon/attrib/attrib.h"
#include "daemon/alloc/uprobe_multi.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/stats.h"

/* Which program a function gets, and its attach cookie: an enum alloc_kind for
 * alloc_entry (plus alloc_ret), an enum free_kind for free_entry. */
enum probe_prog { P_SIZE1 = AK_SIZE1, P_CALLOC = AK_CALLOC, P_SIZE2 = AK_SIZE2,
		  P_REALLOC = AK_REALLOC, P_REALLOCARRAY = AK_REALLOCARRAY,
		  P_POSIX = AK_POSIX_MEMALIGN, P_FREE = 100, P_DELETE = 101 };

/* Every allocator entry point we trace: C, then the C++ operators (Itanium mangling). */
static const struct { const char *name; enum probe_prog prog; } probes[] = {
	{ "malloc", P_SIZE1 }, { "calloc", P_CALLOC }, { "realloc", P_REALLOC },
	{ "reallocarray", P_REALLOCARRAY }, { "free", P_FREE },
	{ "posix_memalign", P_POSIX }, { "aligned_alloc", P_SIZE2 }, { "memalign", P_SIZE2 },
	{ "valloc", P_SIZE1 }, { "pvalloc", P_SIZE1 },
	{ "_Znwm", P_SIZE1 }, { "_Znam", P_SIZE1 },
	{ "_ZnwmRKSt9nothrow_t", P_SIZE1 }, { "_ZnamRKSt9nothrow_t", P_SIZE1 },
	{ "_ZnwmSt11align_val_t", P_SIZE1 }, { "_ZnamSt11align_val_t", P_SIZE1 },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", P_SIZE1 },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", P_SIZE1 },
	{ "_ZdlPv", P_DELETE }, { "_ZdaPv", P_DELETE }, { "_ZdlPvm", P_DELETE },
	{ "_ZdaPvm", P_DELETE }, { "_ZdlPvSt11align_val_t", P_DELETE },
	{ "_ZdaPvSt11align_val_t", P_DELETE }, { "_ZdlPvmSt11align_val_t", P_DELETE },
	{ "_ZdaPvmSt11align_val_t", P_DELETE }, { "_ZdlPvRKSt9nothrow_t", P_DELETE },
	{ "_ZdaPvRKSt9nothrow_t", P_DELETE }, { "_ZdlPvSt11align_val_tRKSt9nothrow_t", P_DELETE },
	{ "_ZdaPvSt11align_val_tRKSt9nothrow_t", P_DELETE },
};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))

static int on_event(void *ctx, void *data, size_t len);

static int multi_attach(struct recorder *r, struct bpf_program *prog, const char *path,
			const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret, int pid)
{
	int fd;

	if (!n)
		return 0;
	fd = uprobe_multi_link_pid(bpf_program__fd(prog), path, offs, NULL, cookies, n, ret, pid);
	if (fd < 0)
		return fd;
	if (ARRAY_GROW(r->fds, r->fds_cap, r->nfds, 16) < 0) {
		close(fd);
		return -ENOMEM;
	}
	r->fds[r->nfds++] = fd;
	return 0;
}

/* pid is not used: a classic uprobe's perf event filters by thread, so every process
 * mapping path traps (the BPF side still records only targets). */
static int classic_attach(struct recorder *r, struct bpf_program *prog, const char *path,
			  const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret, int pid)
{
	(void)pid;
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = cookies[i], .retprobe = ret);
		struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, -1, path, offs[i], &o);
		if (!l)
			return -errno;
		int err = events_link_push(&r->links, &r->nlinks, &r->links_cap, l);
		if (err)
			return err;
	}
	return 0;
}

/* What the recording needs of the object, before its load. */
static int exact_configure(struct recorder *r)
{
	int err;

	r->uprobe_multi = uprobe_multi_supported();
	if (r->alloc_off) {
		/* No allocator probe will be attached: not verified either (alloc_ret's stack
		 * walks and copies are most of the object's load time, ~40 ms). */
		bpf_program__set_autoload(r->skel->progs.alloc_entry, false);
		bpf_program__set_autoload(r->skel->progs.alloc_ret, false);
		bpf_program__set_autoload(r->skel->progs.free_entry, false);
		bpf_program__set_autoload(r->skel->progs.calib_entry, false);
		bpf_program__set_autoload(r->skel->progs.calib_ret, false);
	} else if (r->uprobe_multi) {
		bpf_program__set_expected_attach_type(r->skel->progs.calib_entry, UPROBE_MULTI_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(r->skel->progs.calib_ret, UPROBE_MULTI_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(r->skel->progs.alloc_entry, UPROBE_MULTI_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(r->skel->progs.alloc_ret, UPROBE_MULTI_ATTACH_TYPE);
		bpf_program__set_expected_attach_type(r->skel->progs.free_entry, UPROBE_MULTI_ATTACH_TYPE);
	}
	r->skel->rodata->watch_all_exec = r->watch_all_exec;
	r->skel->rodata->mark_at_exec = r->mark_at_exec;
	if (r->per_target_probes && !r->uprobe_multi && !r->alloc_off)
		log_warn("%s: this kernel has no multi-uprobe links: exact mode's uprobes trap every "
			 "process that maps an allocator binary", recorder_cmd(r));
	if (!r->uprobe_multi || r->alloc_off)
		r->per_target_probes = false;
	r->skel->rodata->hold_at_exec = r->per_target_probes;
	if (r->ring_fd > 0 && (err = bpf_map__reuse_fd(r->skel->maps.events, r->ring_fd)))
		return log_error_errno(err, "%s: adopting the ring buffer: %s", recorder_cmd(r), strerror(-err));
	if (r->ring_fd <= 0 && r->ring_bytes &&
	    (err = bpf_map__set_max_entries(r->skel->maps.events, (__u32)r->ring_bytes)))
		return log_error_errno(err, "%s: sizing the ring buffer: %s", recorder_cmd(r), strerror(-err));
	if ((err = ustack_size_scratch(r->skel->maps.ustack_map)))
		return log_error_errno(err, "%s: sizing the stack scratch: %s", recorder_cmd(r), strerror(-err));
	return 0;
}

/* alloc.bpf.c as core_btf_load drives it. */
static int exact_skel_open(void *arg, const struct bpf_object_open_opts *oo)
{
	struct recorder *r = arg;

	r->skel = alloc_bpf__open_opts(oo);
	return r->skel ? 0 : (errno ? -errno : -EINVAL);
}

static int exact_skel_configure(void *arg)
{
	return exact_configure(arg);
}

static int exact_skel_load(void *arg)
{
	return alloc_bpf__load(((struct recorder *)arg)->skel);
}

static void exact_skel_destroy(void *arg)
{
	struct recorder *r = arg;

	alloc_bpf__destroy(r->skel);
	r->skel = NULL;
}

/* Opens and loads alloc.bpf.c, against the cached minimized kernel BTF where there is
 * one (core_btf.h). */
static int exact_load(struct recorder *r)
{
	struct core_btf_skel k = { .name = "alloc", .open = exact_skel_open,
				   .configure = exact_skel_configure, .load = exact_skel_load,
				   .destroy = exact_skel_destroy, .arg = r };
	enum core_btf_stage stage;
	int err;

	k.obj = alloc_bpf__elf_bytes(&k.objsz);
	if ((err = core_btf_load(&k, &r->core_btf_used, &stage)) >= 0)
		return 0;
	return recorder_bpf_load_error(r, err, (int)stage);
}

/* What a probe hit costs its thread beyond the program's own run time: exact_calibrate
 * times calls of three functions of its own (x86-64: a frame push the kernel emulates,
 * as it does the instructions probesite.h moves allocator probes to, and a return), one
 * bare, one with an entry probe, one with an entry and a return probe, EXACT_CALIB_CALLS
 * calls of each in turn, EXACT_CALIB_ROUNDS times. Each round's differences (entry less
 * bare, both less entry) are taken side by side, under the same load, and the costs are
 * the rounds' medians: timed one after the other, once each, the entry hit measured
 * 4.9-6.9 us and the return hit 0.07-2.0 us in runs minutes apart on an idle host, as
 * the load moved between the measurements. ~10 ms where an entry hit costs ~5 us.
 * calib_ret's gaps (bpf/alloc.bpf.c) tell the part of both hits a call's gap holds from
 * the edges it does not, and scale the costs to each target thread's gaps. */
#define EXACT_CALIB_CALLS 32
#define EXACT_CALIB_ROUNDS 25
#define EXACT_CALIB_MAX_NS 100000   /* a hit measured above this is noise: not used */
#if defined(__x86_64__)
#define CALIB_FN(name)                                   \
	".type " name ", @function\n" name ":\n"         \
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tpop %rbp\n\tret\n" \
	".size " name ", .-" name "\n"
__asm__(".pushsection .text\n"
	CALIB_FN("exact_calib_bare") CALIB_FN("exact_calib_entry") CALIB_FN("exact_calib_both")
	".popsection\n");
void exact_calib_bare(void);
void exact_calib_entry(void);
void exact_calib_both(void);

/* ns per call of fn, over EXACT_CALIB_CALLS calls. */
static double calib_per_call(void (*fn)(void))
{
	uint64_t t0 = mono_ns();

	for (int i = 0; i < EXACT_CALIB_CALLS; i++)
		fn();
	return (double)(mono_ns() - t0) / EXACT_CALIB_CALLS;
}

/* The file and offset of code address a in this process, from its maps. */
static int self_file_offset(const struct maps *m, uintptr_t a, char *path, size_t pathsz,
			    uint64_t *off)
{
	const struct map_entry *e = maps_find(m, a);

	if (!e || e->path[0] != '/' || e->deleted || strlen(e->path) >= pathsz)
		return -ENOENT;
	snprintf(path, pathsz, "%s", e->path);
	*off = a - e->start + e->offset;
	return 0;
}

static int calib_attach(struct recorder *r, const struct maps *m, struct bpf_program *prog,
			void (*fn)(void), bool ret)
{
	char path[PATH_MAX];
	uint64_t off = 0, cookie = 0;
	int err = self_file_offset(m, (uintptr_t)fn, path, sizeof(path), &off);

	if (err)
		return err;
	if (r->uprobe_multi)
		return multi_attach(r, prog, path, &off, &cookie, 1, ret, getpid());
	LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, getpid(), path, off, &o);
	if (!l)
		return -errno;
	return events_link_push(&r->links, &r->nlinks, &r->links_cap, l);
}

/* Measures the hit costs and hands them to the BPF programs (bpf/alloc.bpf.c
 * hit_entry_ns, hit_ret_ns, hit_edges_ns). A failure leaves them 0 and says so:
 * lifetimes are then netted of the programs' time and the calls' gaps alone. The links
 * stay until exact_close: detaching costs an RCU grace period, and nothing calls
 * the functions again. */
static void exact_calibrate(struct recorder *r)
{
	__attribute__((cleanup(maps_free))) struct maps m = { 0 };
	double entry[EXACT_CALIB_ROUNDS], ret[EXACT_CALIB_ROUNDS];
	int err = maps_read_pid(&m, getpid());

	if (!err)
		err = calib_attach(r, &m, r->skel->progs.calib_entry, exact_calib_entry, false);
	if (!err)
		err = calib_attach(r, &m, r->skel->progs.calib_entry, exact_calib_both, false);
	if (!err)
		err = calib_attach(r, &m, r->skel->progs.calib_ret, exact_calib_both, true);
	if (!err) {
		for (int k = 0; k < EXACT_CALIB_ROUNDS; k++) {
			double bare = calib_per_call(exact_calib_bare);
			double e = calib_per_call(exact_calib_entry);
			double both = calib_per_call(exact_calib_both);
			entry[k] = e - bare;
			ret[k] = both - e;
		}
		double he = stats_median(entry, EXACT_CALIB_ROUNDS);
		double hr = stats_median(ret, EXACT_CALIB_ROUNDS);
		r->hit_entry_ns = he > 0 ? (uint64_t)(he + 0.5) : 0;
		r->hit_ret_ns = hr > 0 ? (uint64_t)(hr + 0.5) : 0;
		uint64_t n = r->skel->bss->calib_gap_n;
		double gap = n ? (double)r->skel->bss->calib_gap_sum / (double)n : 0;
		double edges = (double)(r->hit_entry_ns + r->hit_ret_ns) - gap;
		r->hit_edges_ns = edges > 0 ? (uint64_t)(edges + 0.5) : 0;
		r->calib_gap_ns = r->skel->bss->calib_gap_lo;
	}
	if (err)
		log_warn("%s: measuring what a probe hit costs: %s (lifetimes are netted of the "
			 "probes' programs alone)", recorder_cmd(r), strerror(-err));
	if (r->hit_entry_ns > EXACT_CALIB_MAX_NS || r->hit_ret_ns > EXACT_CALIB_MAX_NS)
		r->hit_entry_ns = r->hit_ret_ns = r->hit_edges_ns = r->calib_gap_ns = 0;
	r->skel->bss->hit_entry_ns = r->hit_entry_ns;
	r->skel->bss->hit_ret_ns = r->hit_ret_ns;
	r->skel->bss->hit_edges_ns = r->hit_edges_ns;
	r->skel->bss->calib_gap_ns = r->calib_gap_ns;
}
#else
static void exact_calibrate(struct recorder *r)
{
	(void)r;   /* calib_fn is x86-64 assembly: the programs' time alone */
}
#endif

int exact_open(struct recorder *r)
{
	int err;

	if ((err = events_recorder_init(r)))
		return err;

	if ((err = exact_load(r)))
		return err;
	if (!r->alloc_off)
		exact_calibrate(r);
	r->unwind_modes_fd = bpf_map__fd(r->skel->maps.unwind_modes);
	r->sent_stacks_fd = bpf_map__fd(r->skel->maps.sent_stacks);
	err = events_attach_lifecycle(r->skel->progs.on_fork, r->skel->progs.on_exec,
				      r->skel->progs.on_exit,
				      r->watch_all_exec ? NULL : r->skel->progs.on_mmap, &r->links,
				      &r->nlinks, &r->links_cap);
	if (err)
		return err;
	r->rb = ring_buffer__new(bpf_map__fd(r->skel->maps.events), on_event, r, NULL);
	if (!r->rb)
		return log_error_errno(-errno, "%s: ring buffer: %s", recorder_cmd(r), strerror(errno));
	r->stash = (struct stash){ .rb = r->rb, .handle = on_event, .ctx = r };
	return 0;
}

int exact_attach_binary(struct recorder *r, const char *path)
{
	return exact_attach_binary_pid(r, path, 0);
}

int exact_sites_of(const char *path, struct exact_sites *s)
{
	const char *names[NPROBES];
	uint64_t offs[NPROBES];
	struct elfsym *e;
	int err;

	_Static_assert(NPROBES <= EXACT_PROBES_MAX, "EXACT_PROBES_MAX too small");
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < NPROBES; i++)
		names[i] = probes[i].name;
	err = elfsym_open(&e, path);
	if (err)
		return err;
	err = elfsym_find_funcs(e, names, NPROBES, offs);
	elfsym_close(e);
	if (err <= 0)
		return err;   /* error, or defines no allocator function */
	for (size_t i = 0; i < NPROBES; i++) {
		if (offs[i] == UINT64_MAX)
			continue;
		bool dup = false;   /* aliases (memalign/aligned_alloc) share one address */
		for (size_t j = 0; j < i; j++)
			dup |= offs[j] == offs[i];
		if (dup)
			continue;
		/* Move each probe to an instruction the kernel emulates rather than
		 * single-steps, past ones that keep the arguments and [rsp] intact. */
		if (probes[i].prog == P_FREE || probes[i].prog == P_DELETE) {
			probesite_find(path, offs[i], PROBESITE_ARG1, &s->foff[s->nf]);
			s->fcookie[s->nf++] = probes[i].prog == P_DELETE ? FK_DELETE : FK_FREE;
		} else {
			probesite_find(path, offs[i], PROBESITE_ARG1 | PROBESITE_ARG2 | PROBESITE_ARG3,
				       &s->aoff[s->na]);
			s->acookie[s->na++] = probes[i].prog;
		}
		s->attached++;
	}
	return s->attached;
}

int exact_attach_sites(struct recorder *r, const char *path, const struct exact_sites *s, int pid)
{
	int (*attach)(struct recorder *, struct bpf_program *, const char *, const uint64_t *,
		      const uint64_t *, size_t, bool, int) = r->uprobe_multi ? multi_attach : classic_attach;
	if (r->alloc_off)
		return 0;   /* its programs were not loaded */
	/* Returns first: an entry seen before its return probe exists would leave the
	 * thread's call open (every later call from lower on the stack counted nested). */
	int err = attach(r, r->skel->progs.alloc_ret, path, s->aoff, s->acookie, s->na, true, pid);

	if (!err)
		err = attach(r, r->skel->progs.alloc_entry, path, s->aoff, s->acookie, s->na, false, pid);
	if (!err)
		err = attach(r, r->skel->progs.free_entry, path, s->foff, s->fcookie, s->nf, false, pid);
	return err;
}

int exact_attach_binary_pid(struct recorder *r, const char *path, int pid)
{
	struct exact_sites s;
	int err;

	if (r->alloc_off)
		return 0;   /* its programs were not loaded */
	if ((err = exact_sites_of(path, &s)) <= 0)
		return err;
	/* Not under the daemon's descriptor path (targets.c file_probe): that names another
	 * file once closed; the processes' maps name it. */
	if (strncmp(path, "/proc/self/fd/", 14))
		bin_register(&r->procs, path, path);
	err = exact_attach_sites(r, path, &s, pid);
	if (err)
		return log_error_errno(err, "%s: attaching uprobes to %s: %s", recorder_cmd(r), path, strerror(-err));
	return s.attached;
}

int exact_attach_pid_links(const struct recorder *r, const char *path, const struct exact_sites *s,
			   int pid, int fds[EXACT_PID_LINKS])
{
	/* The return probe first, as exact_attach_sites does: an entry without it would
	 * leave the thread's call open. */
	struct bpf_program *progs[EXACT_PID_LINKS] = {
		r->skel->progs.alloc_ret, r->skel->progs.alloc_entry, r->skel->progs.free_entry,
	};
	const uint64_t *offs[EXACT_PID_LINKS] = { s->aoff, s->aoff, s->foff };
	const uint64_t *cookies[EXACT_PID_LINKS] = { s->acookie, s->acookie, s->fcookie };
	size_t n[EXACT_PID_LINKS] = { s->na, s->na, s->nf };

	if (!r->uprobe_multi || pid <= 0 || r->alloc_off)
		return -EOPNOTSUPP;
	/* Straight to the kernel, not through r's lists: called from the hold thread too. */
	for (int k = 0; k < EXACT_PID_LINKS; k++) {
		fds[k] = n[k] ? uprobe_multi_link_pid(bpf_program__fd(progs[k]), path, offs[k], NULL,
						       cookies[k], n[k], k == 0, pid) : -1;
		if (n[k] && fds[k] < 0) {
			int err = fds[k];
			while (k-- > 0)
				if (fds[k] >= 0)
					close(fds[k]);
			return err;
		}
	}
	return 0;
}

int exact_add_target(struct recorder *r, uint32_t pid)
{
	uint64_t any = 0;

	if (bpf_map_update_elem(bpf_map__fd(r->skel->maps.targets), &pid, &any, BPF_ANY))
		return log_error_errno(-errno, "record: adding target %u: %s", pid, strerror(errno));
	return 0;
}

int exact_remove_target(struct recorder *r, uint32_t pid)
{
	if (bpf_map_delete_elem(bpf_map__fd(r->skel->maps.targets), &pid) && errno != ENOENT)
		return log_error_errno(-errno, "daemon: removing target %u: %s", pid, strerror(errno));
	return 0;
}

bool exact_is_target(struct recorder *r, uint32_t pid)
{
	uint64_t v;

	return bpf_map_lookup_elem(bpf_map__fd(r->skel->maps.targets), &pid, &v) == 0;
}

size_t exact_count_targets(struct recorder *r)
{
	int fd = bpf_map__fd(r->skel->maps.targets);
	uint32_t k, next;
	size_t n = 0;

	for (int e = bpf_map_get_next_key(fd, NULL, &next); e == 0;
	     e = bpf_map_get_next_key(fd, &k, &next)) {
		k = next;
		n++;
	}
	return n;
}

void recorder_add_mib(struct recorder *r, struct proc *p, struct istack *s, uint64_t dead_ns,
		      const struct mib *m)
{
	recorder_add_mib_hist(r, p, s, dead_ns, m, NULL, 0);
}

void recorder_add_mib_hist(struct recorder *r, struct proc *p, struct istack *s,
			   uint64_t dead_ns, const struct mib *m, const uint64_t *hist,
			   uint32_t hist_len)
{
	if (agg_add_hist(&r->aggs, s, p, agg_bucket_of((int64_t)dead_ns + r->mono_to_real_ns), m,
			 hist, hist_len) == 0)
		r->objects++;
}

void recorder_net_of_probes(struct recorder *r, struct mib *m, uint64_t probe_ns)
{
	uint64_t life = m->total_lifetime_ns;

	mib_net_of_probes(m, probe_ns);
	if (life > m->total_lifetime_ns) {
		r->probe_net_ns += life - m->total_lifetime_ns;
		r->probe_net_objects++;
	}
}

/* probe_ns: the probes' share of its lifetime (bpf/alloc.h ev_free.probe_ns). */
static void add_object(struct recorder *r, struct proc *p, uint64_t key, uint64_t addr,
		       uint64_t size, uint64_t alloc_ns, uint64_t dead_ns, uint32_t acpu,
		       uint32_t dcpu, uint64_t probe_ns)
{
	struct istack *s = key ? hmap_find(&p->stacks, stack_slot(key), NULL, NULL) : NULL;
	struct mib m;

	ustack_key_done(p, key);   /* a copied stack's key is this object's alone */
	if (!s) {
		s = r->unknown_stack;
		r->unknown_stack_objs++;
		r->unknown_stack_why[!key ? UNKNOWN_NO_KEY : key & ALLOC_USTACK_KEY ?
				     UNKNOWN_COPY_LOST : UNKNOWN_FP_LOST]++;
	}
	/* With access sampling, the object waits in attribution until no sample older
	 * than its death can still come; it is aggregated then (access.c op_object). */
	if (r->attrib && attrib_object(r->attrib, p->pid, p->start_ns, addr, size, s, alloc_ns,
				       dead_ns, acpu, dcpu, probe_ns) == 0)
		return;
	mib_from_object(&m, size, alloc_ns, dead_ns, acpu, dcpu, 0);
	recorder_net_of_probes(r, &m, probe_ns);
	if (p->exit_mono_ns && dead_ns >= p->exit_mono_ns)
		mib_mark_live_at_exit(&m);   /* reaped at its process's exit */
	recorder_add_mib(r, p, s, dead_ns, &m);
}

/* The old image's allocations die with it; at exit, the process's. */
static void reap_cb(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns,
		    uint32_t cpu)
{
	exact_reap(r, tgid, start_ns, ts_ns, cpu);
}

static int handle_event(struct recorder *r, void *data, size_t len)
{
	const struct ev_hdr *h = data;
	struct proc *p;

	r->events++;
	if (len < sizeof(*h) || !events_gate(r, data, len))
		return 0;
	if (h->type == EV_FREE) {
		const struct ev_free *e = data;
		if (len < sizeof(*e) || !(p = events_proc(r, h->tgid, h->start_ns)))
			return 0;
		add_object(r, p, e->key, e->addr, e->size, e->alloc_ns, e->free_ns, e->alloc_cpu,
			   e->free_cpu, e->probe_ns);
		return 0;
	}
	events_common(r, data, len, reap_cb);
	return 0;
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct recorder *r = ctx;

	if (r->stash.on)
		return stash_take(&r->stash, data, len);
	if (r->stop_discard) {   /* a stop past its drain deadline (service/stop.c) */
		r->stop_records++;
		return events_slice_after(r);
	}
	handle_event(ctx, data, len);
	return events_slice_after(ctx);
}

int exact_poll(struct recorder *r, int timeout_ms, bool *more)
{
	int n = events_poll(r, r->rb, timeout_ms, EVENTS_SLICE_NS, more);

	return n < 0 ? log_error_errno(n, "record: polling ring buffer: %s", strerror(-n)) : n;
}

int exact_reap(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu)
{
	int fd = bpf_map__fd(r->skel->maps.live);
	int tfd = bpf_map__fd(r->skel->maps.thread_probe_ns);
	int pfd = bpf_map__fd(r->skel->maps.proc_probe_ns);
	struct live_key *keys;
	size_t n;
	int err = events_live_keys(fd, tgid, &keys, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		struct live_val v;
		if (bpf_map_lookup_elem(fd, &keys[i], &v))
			continue;
		if (tgid && v.start_ns != start_ns)
			continue;   /* a reused PID's allocation */
		if (v.ts_ns > ts_ns)
			continue;   /* made after the event (exec): the new image's */
		struct proc *p = proc_get(&r->procs, keys[i].tgid, v.start_ns);
		/* The probes' share of its life, as bpf/alloc.bpf.c track_free takes it: the
		 * larger of its thread's (which has exited, at the process's exit; at an exec
		 * it still runs, and only the process's counts) and its process's. */
		uint64_t tprobe = 0, pclock;
		struct proc_probe pp;
		if (p && bpf_map_lookup_elem(tfd, &v.tid, &tprobe) == 0 && tprobe > v.probe_ns)
			tprobe -= v.probe_ns;
		else
			tprobe = 0;
		if (p && bpf_map_lookup_elem(pfd, &keys[i].tgid, &pp) == 0 &&
		    (pclock = pp.clock + pp.win_max) > v.proc_probe_ns &&
		    pclock - v.proc_probe_ns > tprobe)
			tprobe = pclock - v.proc_probe_ns;
		if (p)
			add_object(r, p, v.key, keys[i].addr, v.size, v.ts_ns,
				   ts_ns > v.ts_ns ? ts_ns : v.ts_ns, v.cpu, cpu, tprobe);
		bpf_map_delete_elem(fd, &keys[i]);
	}
	free(keys);
	/* Its threads' probe times start again after an exec (their states reset) and
	 * mean nothing after its exit. */
	if (tgid)
		bpf_map_delete_elem(pfd, &tgid);
	return 0;
}

void exact_counters(struct recorder *r, uint64_t out[CNT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	int fd = bpf_map__fd(r->skel->maps.counters);

	memset(out, 0, CNT_MAX * sizeof(out[0]));
	if (ncpu <= 0)
		return;
	uint64_t *v = calloc(ncpu, sizeof(*v));
	if (!v)
		return;
	for (uint32_t c = 0; c < CNT_MAX; c++) {
		if (bpf_map_lookup_elem(fd, &c, v))
			continue;
		for (int i = 0; i < ncpu; i++)
			out[c] += v[i];
	}
	free(v);
}

void exact_close(struct recorder *r)
{
	events_detach_all(r->links, r->nlinks, r->fds, r->nfds);
	free(r->fds);
	r->fds = NULL;
	r->nfds = 0;
	free(r->links);
	r->links = NULL;
	r->nlinks = 0;
	ring_buffer__free(r->rb);
	r->rb = NULL;
	stash_free(&r->stash);
	r->stash.rb = NULL;
	alloc_bpf__destroy(r->skel);
	r->skel = NULL;
}
