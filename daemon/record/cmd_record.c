/* `memprofd record`: profiles one command (started so that nothing is missed) or one
 * running process until it ends, a signal arrives, or --duration passes. Order of work:
 * validate everything that can fail cheaply (arguments, command, capability) before
 * loading BPF; open the DB on a thread meanwhile (store_bg.h); load BPF and open the DB
 * before the child runs its first instruction. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <bpf/libbpf.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "daemon/record/child.h"
#include "daemon/record/phases.h"
#include "daemon/record/private_libs.h"
#include "daemon/record/release_later.h"
#include "daemon/record/store_bg.h"
#include "daemon/record/exact_prep.h"
#include "daemon/record/namecache.h"
#include "daemon/record/ring_bg.h"
#include "daemon/record/sym_warm.h"
#include "daemon/record/watch_targets.h"
#include "daemon/record/cmd_record.h"
#include "base/log.h"
#include "daemon/record/recorder.h"
#include "daemon/access/access.h"
#include "daemon/access/src_soft.h"
#include "daemon/access/watch.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/unwind.h"
#include "store/store.h"
#include "symbolizer/elfstatic.h"
#include "symbolizer/maps.h"
#include "symbolizer/rootfs.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"
#include "base/clock.h"

extern char **environ;

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static const char record_usage[] =
	"usage: memprofd record [--db PATH] [--alloc exact|sampled|off]\n"
	"                       [--access auto|pebs|ibs|spe|soft|off] [--freq HZ] [--period N]\n"
	"                       [--watch on|off] [--duration SEC] (--pid PID | -- CMD [ARG...])\n"
	"\n"
	"Profiles the allocations of CMD (started so that none is missed) or of the running\n"
	"process PID, per allocation context, into the SQLite store (default ./memprofd.db).\n"
	"  --alloc sampled  (default) libmemprofd_sampler in the process, USDT probes on\n"
	"                   sampled allocations only (estimated counts; 1.061x on\n"
	"                   bench/kvcache with soft access sampling: README, Performance)\n"
	"  --alloc exact    uprobes on every allocator call (exact counts; high overhead)\n"
	"  --alloc off      no allocator probe: access sampling only (static data, stack,\n"
	"                   TLS, anonymous memory; heap accesses counted as heap_untracked),\n"
	"                   enough for export ld-script and symbol-order; the cheapest mode\n"
	"  --access SRC     data-access sampling (default auto): auto tries pebs, ibs, spe,\n"
	"                   soft in that order and says which it uses; soft works without a\n"
	"                   PMU; off records allocations only. Accesses are attributed to\n"
	"                   the heap object (sampled or exact) or static symbol they touch\n"
	"  --freq HZ        samples per second per CPU of the soft source (default 100)\n"
	"  --period N       events per sample of the PMU sources\n"
	"  --watch on|off   --alloc sampled with access sampling: hardware watchpoints on\n"
	"                   the sampled objects measure their access rates (default on;\n"
	"                   traps cost the target at most 1% of a CPU); the sampler also\n"
	"                   arms its own at allocation (MEMPROFD_WATCH_INPROCESS=0: not)\n"
	"  --duration SEC   stop after SEC seconds (default: when the process ends)\n"
	"\n"
	"CMD may be a script or a wrapper: probes follow exec to what it finally runs. When\n"
	"recording stops first (--duration, SIGINT, SIGTERM), CMD gets SIGTERM and is reaped\n"
	"(SIGKILL after 5 s); a --pid process is left running.\n"
	"Exit status: CMD's own (128+N when signal N killed it); 0 for --pid; 1 when\n"
	"memprofd failed before CMD ran (then no store is left behind), 2 on bad usage.\n";

/* Names the capability that is missing, or returns 0 when BPF and perf may be used. */
static const char *missing_capability(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capget, &h, d) < 0)
		return NULL;   /* cannot tell: let the BPF load report it */
#define HAS(c) (d[(c) / 32].effective & (1u << ((c) % 32)))
	if (HAS(CAP_SYS_ADMIN))
		return NULL;
	if (!HAS(CAP_BPF))
		return "CAP_BPF";
	if (!HAS(CAP_PERFMON))
		return "CAP_PERFMON";
#undef HAS
	return NULL;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Standard library directories, for the libc and libstdc++ a started command will map. */
static int find_lib(const char *name, char *out, size_t outsz)
{
	static const char *const dirs[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
	};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(out, outsz, "%s/%s", dirs[i], name);
		if (access(out, R_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* For a command: private copies of libc/libstdc++ (private_libs.h), probed so that only
 * the command and its descendants trap; symbols come from the system's files (same
 * build-id), which stay after the copies are removed. The copies and their probe sites
 * were made on a thread beside the BPF load (exact_prep.h). */
static int attach_libs_private(struct recorder *r, struct exact_prep *prep)
{
	struct private_libs *pl = prep->pl;
	int err = exact_prep_join(prep), total = 0;

	phase_mark("private libc copies (waited for)");
	if (err < 0)
		return log_error_errno(err, "record: private copies of the allocator libraries: %s",
				       strerror(-err));
	for (size_t i = 0; i < pl->n; i++) {
		int n = prep->nsites[i];

		bin_register(&r->procs, pl->orig[i], pl->orig[i]);
		if (n < 0)
			return n;
		if (!n)
			continue;
		bin_register(&r->procs, pl->copy[i], pl->copy[i]);
		if ((err = exact_attach_sites(r, pl->copy[i], &prep->sites[i], 0)))
			return log_error_errno(err, "%s: attaching uprobes to %s: %s", recorder_cmd(r),
					       pl->copy[i], strerror(-err));
		total += n;
	}
	return total;
}

/* --pid in exact mode: the probes trap the target alone (multi-uprobe links filtered by
 * pid), so each child it forks gets probes of its own, on every library file probed so
 * far, when its fork record is read (a child reading its maps then may be between exec
 * and its libc's mapping). What a child allocates before that (its first milliseconds)
 * is not seen; a child that never execs traps meanwhile in the probes it inherited,
 * unrecorded. Past RECORD_PID_CHILDREN_MAX children, further ones are not probed. */
#define RECORD_PID_CHILDREN_MAX 1024
#define RECORD_PID_FILES_MAX 16         /* distinct libc/libstdc++ files held for children */
struct pid_follow {
	struct recorder *r;
	struct sampled *smp;            /* --alloc sampled: children get sampler links */
	unsigned children;
	unsigned gone;                  /* sampled: children gone before they were linked */
	bool warned;
	int fds[RECORD_PID_FILES_MAX];  /* the probed files, open: /proc/self/fd/N for links */
	dev_t dev[RECORD_PID_FILES_MAX];
	ino_t ino[RECORD_PID_FILES_MAX];
	unsigned nfiles;
};

/* Probes the file open at fd for pid; a file seen before was probed for pid already. */
static int probe_lib(struct pid_follow *f, int fd, pid_t pid)
{
	char path[64];
	struct stat st;

	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	for (unsigned i = 0; i < f->nfiles; i++)
		if (f->dev[i] == st.st_dev && f->ino[i] == st.st_ino) {
			close(fd);
			return 0;
		}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int n = exact_attach_binary_pid(f->r, path, pid);
	if (n <= 0 || f->nfiles == RECORD_PID_FILES_MAX) {
		close(fd);
		return n;
	}
	f->fds[f->nfiles] = fd;
	f->dev[f->nfiles] = st.st_dev;
	f->ino[f->nfiles++] = st.st_ino;
	return n;
}

/* For a running process: the files probed so far, and the libc/libstdc++ it really maps
 * (through its root), probed for that process alone (exact_attach_binary_pid). */
static int attach_libs_of_pid(struct pid_follow *f, pid_t pid)
{
	struct maps m = { 0 };
	char path[64];
	int total = 0, err;

	for (unsigned i = 0; i < f->nfiles; i++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fds[i]);
		if ((err = exact_attach_binary_pid(f->r, path, pid)) < 0)
			return err;
		total += err;
	}
	err = maps_read_pid(&m, pid);
	if (err)
		return log_error_errno(err, "record: --pid %d: reading maps: %s", pid, strerror(-err));
	for (size_t i = 0; i < m.n; i++) {
		const char *p = m.v[i].path, *base = strrchr(p, '/');
		if (!base || (i > 0 && strcmp(m.v[i - 1].path, p) == 0))
			continue;
		base++;
		if (strncmp(base, "libc.so", 7) && strncmp(base, "libstdc++.so", 12))
			continue;
		/* Resolved inside the target's root: its links never reach our files. */
		int fd = rootfs_open(pid, p);
		if (fd < 0) {
			log_error_errno(fd, "record: --pid %d: %s inside its root: %s", pid, p,
					strerror(-fd));
			maps_free(&m);   /* p points into m */
			return fd;
		}
		int n = probe_lib(f, fd, pid);
		if (n < 0) {
			maps_free(&m);
			return n;
		}
		total += n;
	}
	maps_free(&m);
	return total;
}

static void pid_follow_free(struct pid_follow *f)
{
	for (unsigned i = 0; i < f->nfiles; i++)
		close(f->fds[i]);
	f->nfiles = 0;
}

/* Counts one more child of the target; false past RECORD_PID_CHILDREN_MAX (said once). */
static bool child_quota(struct pid_follow *f)
{
	if (f->children == RECORD_PID_CHILDREN_MAX) {
		if (!f->warned)
			log_warn("record: %d children of the target probed; further ones are not",
				 RECORD_PID_CHILDREN_MAX);
		f->warned = true;
		return false;
	}
	f->children++;
	return true;
}

static void follow_fork(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	struct pid_follow *f = arg;
	char exe[64];

	(void)start_ns;
	/* Classic uprobes (no multi links) are every process's already: a child's second
	 * set would record each of its calls twice. */
	if (type != EV_FORK || !f->r->uprobe_multi)
		return;
	if (!child_quota(f))
		return;
	snprintf(exe, sizeof(exe), "/proc/%u/exe", tgid);
	exact_attach_binary_pid(f->r, exe, (int)tgid);
	attach_libs_of_pid(f, (pid_t)tgid);
}

/* --pid in sampled mode: the sampler's probes are filtered to the target's pid (a link
 * per process), so each child it forks gets links of its own on the sampler its maps
 * show, when its fork record is read; BPF made it a target at the fork already. What a
 * child allocates before then is not seen, and one gone by then is counted, not linked.
 * Past RECORD_PID_CHILDREN_MAX children, further ones are not linked. */
static void follow_fork_sampled(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	struct pid_follow *f = arg;

	(void)start_ns;
	if (type != EV_FORK || !child_quota(f))
		return;
	int n = sampled_attach_child(f->smp, (int)tgid);
	if (n == -ENOENT || n == -ESRCH)
		f->gone++;
	else if (n < 0)
		log_warn("record: child %u of the target: its sampler's probes: %s", tgid,
			 strerror(-n));
}

/* Whether path is an ELF file (a script or wrapper is not: its interpreter is). */
static bool is_elf(const char *path)
{
	unsigned char m[4];
	FILE *f = fopen(path, "re");
	bool elf = f && fread(m, 1, 4, f) == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F';

	if (f)
		fclose(f);
	return elf;
}

/* Probes follow exec: a command that is a script or a wrapper (a pyenv shim, env, sh -c)
 * becomes what it finally runs, whose executable may define allocators (exact) or link
 * the sampler (sampled) itself; each new executable is probed once, by inode. */
#define RECORD_FOLLOW_MAX 64
struct follow {
	struct recorder *r;
	struct sampled *smp;
	dev_t dev[RECORD_FOLLOW_MAX];
	ino_t ino[RECORD_FOLLOW_MAX];
	unsigned n;
};

static void follow_probe(struct follow *f, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0 || !is_elf(path))
		return;
	for (unsigned i = 0; i < f->n; i++)
		if (f->dev[i] == st.st_dev && f->ino[i] == st.st_ino)
			return;
	if (f->n == RECORD_FOLLOW_MAX)
		return;
	f->dev[f->n] = st.st_dev;
	f->ino[f->n++] = st.st_ino;
	if (f->smp)
		sampled_attach_binary(f->smp, path, -1);
	else if (!f->r->alloc_off)
		exact_attach_binary(f->r, path);
}

/* The executable's own path when it still names the file /proc/PID/exe is: probing
 * registers the path for symbols, and /proc/PID/exe is gone by the time the process's
 * frames are symbolized (they came back as bare offsets). */
static void follow_exec(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	char link[64], real[PATH_MAX];
	struct stat a, b;
	ssize_t n;

	(void)start_ns;
	if (type != EV_EXEC)
		return;
	snprintf(link, sizeof(link), "/proc/%u/exe", tgid);
	n = readlink(link, real, sizeof(real) - 1);
	if (n > 0) {
		real[n] = '\0';
		if (real[0] == '/' && stat(link, &a) == 0 && stat(real, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			follow_probe(arg, real);
			return;
		}
	}
	follow_probe(arg, link);
}

/* A failed start leaves no store behind: the file is removed if this run created it. */
static void remove_new_store(const char *db)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[PATH_MAX + 16];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", db, sfx[i]);
		unlink(p);
	}
}

static char *join_argv(char **argv)
{
	size_t len = 1;
	for (char **a = argv; *a; a++)
		len += strlen(*a) + 1;
	char *s = calloc(1, len), *p = s;
	if (!s)
		return NULL;
	for (char **a = argv; *a; a++)
		p += sprintf(p, "%s%s", a == argv ? "" : " ", *a);
	return s;
}

/* What the command line asked for, validated. */
struct record_opts {
	const char *db, *alloc, *access_mode;
	bool access_given, sampled;
	bool alloc_off;                  /* --alloc off: no allocator probe, access sampling only */
	bool no_watch;                   /* --watch off */
	unsigned long long duration, pid, freq, period;
	char **cmd;                      /* the command to start, or NULL with pid */
	char exe[PATH_MAX];              /* cmd[0] resolved */
	char sampler_path[PATH_MAX];     /* --alloc sampled with a command: the library to inject */
};

/* One recording, from the first probe to the summary line. */
struct record {
	const struct record_opts *o;
	struct recorder r;
	struct sampled *smp;
	struct child ch;
	char *cmdline;
	sigset_t orig;                   /* our signal mask before SIGINT/SIGTERM were blocked */
	int sfd;                         /* signalfd of SIGINT/SIGTERM, or -1 */
	const char *status;              /* the run's final status */
	char status_buf[128];
	struct follow follow;            /* a command's execs, probed as they come */
	struct pid_follow pid_follow;    /* --pid, exact mode: the target's children */
	struct private_libs libs;        /* exact mode's private libc/libstdc++ copies */
	struct store_bg store_bg;        /* the store, opened while BPF loads */
	struct sym_warm sym_warm;        /* libc's DWARF, opened while the command runs */
	struct exact_prep prep;          /* exact mode: libs' copies and sites, on a thread */
	struct ring_bg ring_bg;          /* the event ring, made on a thread */
	struct rec_wtargets wt;          /* sampled, a command: memprofd:watch per target */
	int ws;                          /* the command's wait status, once child_ended */
	bool child_ended;
	bool db_existed, run_begun;      /* a failed start removes a store it created */
};

/* Returned by the argument checks when recording may go on (anything else is an exit code). */
#define RECORD_GO (-1)
#define RECORD_MAX_DURATION_S (365ULL * 86400)
#define RECORD_WATCH_INPROCESS_ENV "MEMPROFD_WATCH_INPROCESS"   /* "0": no sampler-armed watches */
/* A final flush that fails (e.g. a reader holding a lock) is retried this often... */
#define RECORD_FINAL_FLUSH_RETRIES 20
/* ... this many microseconds apart. */
#define RECORD_FINAL_FLUSH_RETRY_US 100000
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int parse_options(int argc, char **argv, struct record_opts *o)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' }, { "alloc", required_argument, NULL, 'a' },
		{ "access", required_argument, NULL, 'A' }, { "freq", required_argument, NULL, 'f' },
		{ "period", required_argument, NULL, 'P' }, { "duration", required_argument, NULL, 'D' },
		{ "pid", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' },
		{ "watch", required_argument, NULL, 'W' },
		{ 0 },
	};
	unsigned long long v;
	int c;

	optind = 1;
	opterr = 0;   /* one-line errors of our own, not getopt's */
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o->db = optarg; break;
		case 'a': o->alloc = optarg; break;
		case 'A': o->access_mode = optarg; o->access_given = true; break;
		case 'W':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				log_error("record: --watch: expected on or off, got '%s'", optarg);
				return 2;
			}
			o->no_watch = !strcmp(optarg, "off");
			break;
		case 'f': case 'P':
			if (parse_uint(optarg, UINT32_MAX, &v) || v == 0) {
				log_error("record: --%s: expected a positive integer, got '%s'",
					  c == 'f' ? "freq" : "period", optarg);
				return 2;
			}
			*(c == 'f' ? &o->freq : &o->period) = v;
			break;
		case 'D':
			if (parse_uint(optarg, RECORD_MAX_DURATION_S, &o->duration) || o->duration == 0) {
				log_error("record: --duration: expected seconds > 0, got '%s'", optarg);
				return 2;
			}
			break;
		case 'p':
			if (parse_uint(optarg, INT32_MAX, &o->pid) || o->pid == 0) {
				log_error("record: --pid: expected a process id, got '%s'", optarg);
				return 2;
			}
			break;
		case 'h': fputs(record_usage, stdout); return 0;
		case ':':
			log_error("record: %s: needs a value (see memprofd record --help)", argv[optind - 1]);
			return 2;
		default:
			log_error("record: %s: unknown option (see memprofd record --help)", argv[optind - 1]);
			return 2;
		}
	}
	o->cmd = argv + optind;
	return RECORD_GO;
}

/* The options' combinations and names. */
static int check_options(struct record_opts *o)
{
	static const char *const sources[] = { "auto", "pebs", "ibs", "spe", "soft", "off" };
	bool known = false;

	if ((o->pid != 0) == (*o->cmd != NULL)) {
		log_error("record: give exactly one of --pid PID or -- CMD [ARG...]");
		return 2;
	}
	if (strcmp(o->alloc, "exact") && strcmp(o->alloc, "sampled") && strcmp(o->alloc, "off")) {
		log_error("record: --alloc: expected exact, sampled or off, got '%s'", o->alloc);
		return 2;
	}
	o->sampled = !strcmp(o->alloc, "sampled");
	/* --alloc off: exact mode's process tracking (fork/exec/exit) with no allocator
	 * probe, for access sampling of static data, stack, TLS and anonymous memory. */
	o->alloc_off = !strcmp(o->alloc, "off");
	for (size_t i = 0; i < ARRAY_LEN(sources); i++)
		known |= strcmp(o->access_mode, sources[i]) == 0;
	if (!known) {
		log_error("record: --access: expected auto, pebs, ibs, spe, soft or off, got '%s'", o->access_mode);
		return 2;
	}
	if (o->alloc_off && !strcmp(o->access_mode, "off")) {
		log_error("record: --alloc off --access off: nothing to record");
		return 2;
	}
	return RECORD_GO;
}

/* What can fail cheaply before BPF is loaded: the command or process, the capabilities,
 * the sampler library. */
static int check_environment(struct record_opts *o)
{
	const char *cap;
	int err;

	if (*o->cmd) {
		err = child_find_command(o->cmd[0], o->exe, sizeof(o->exe));
		if (err) {
			log_error("record: %s: %s", o->cmd[0], err == -ENOENT ? "command not found" : strerror(-err));
			return 1;
		}
	} else if (kill((pid_t)o->pid, 0) < 0 && errno == ESRCH) {
		log_error("record: --pid %llu: no such process", o->pid);
		return 1;
	}
	cap = missing_capability();
	if (cap) {
		log_error("record: missing capability %s (BPF tracing needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; run as root)", cap);
		return 1;
	}
	if (o->sampled && *o->cmd && sampled_find_library(o->sampler_path, sizeof(o->sampler_path)) < 0) {
		log_error("record: --alloc sampled: libmemprofd_sampler.so not found (set MEMPROFD_SAMPLER=PATH, or use --alloc exact)");
		return 1;
	}
	return RECORD_GO;
}

/* The run's command column for a process recorded by pid. */
static char *pid_cmdline(unsigned long long pid)
{
	char *s;

	return asprintf(&s, "pid %llu", pid) < 0 ? NULL : s;
}

static int join_store(struct record *rec);
static int begin_run(struct record *rec);

static int access_open(struct record *rec)
{
	const struct record_opts *o = rec->o;
	/* The store first: a store that cannot open is the one line a failed start prints,
	 * not after the access source's choice (the BPF load hid its open already). */
	int err = join_store(rec);

	if (err)
		return err;
	const char *inproc = getenv(RECORD_WATCH_INPROCESS_ENV);

	rec->r.no_watch = o->no_watch;
	/* On with the watch unless MEMPROFD_WATCH_INPROCESS=0 (the sampler guards the
	 * targets' SIGTRAP: sampler/sampler_trap.c). */
	rec->r.watch_inprocess = !o->no_watch && !(inproc && !strcmp(inproc, "0"));
	err = access_setup(&rec->r, o->access_mode, o->access_given, o->freq, o->period);

	if (err >= 0 && rec->smp)
		sampled_attach_watch(rec->smp);   /* the samplers queued before the watch opened */
	phase_mark(rec->r.soft && src_soft_core_btf_used(rec->r.soft) ?
		   "access source (soft: CO-RE on the cached minimized BTF)" : "access source");
	return err;
}

/* The store opened in the background, once it is needed (before the command runs, so
 * that a store that cannot open fails the start as before). */
static int join_store(struct record *rec)
{
	struct store *s;
	int err;

	if (rec->r.store)
		return 0;
	err = store_bg_join(&rec->store_bg, &s);
	phase_mark("store open (waited for)");
	if (err) {
		log_error("record: %s", rec->store_bg.errbuf);   /* names the file */
		return err;
	}
	rec->r.store = s;
	return 0;
}

/* Starts the command (stopped before its first instruction, with envp as its environment
 * when given), makes it a target of the allocation mode in use, then lets it run. */
static int spawn_traced(struct record *rec, char **envp)
{
	const struct record_opts *o = rec->o;
	char **saved = environ;
	int err = join_store(rec);

	if (err)
		return err;
	if (envp)
		environ = envp;   /* child_spawn's execv passes environ */
	err = child_spawn(&rec->ch, o->exe, o->cmd, &rec->orig);
	environ = saved;
	phase_mark("fork");
	if (err) {
		log_error("record: starting %s: %s", o->cmd[0], strerror(-err));
		return err;
	}
	err = rec->smp ? sampled_add_target(rec->smp, rec->ch.pid) :
			 exact_add_target(&rec->r, rec->ch.pid);
	if (err >= 0 && rec->smp && rwt_add(&rec->wt, rec->ch.pid) < 0)
		log_warn("record: no in-process watches in %s", o->cmd[0]);
	if (err < 0)
		return err;
	/* The run's row before the command runs: a store that cannot take it fails the
	 * start (exit 1, the command never ran), not a command already under way. */
	rec->cmdline = join_argv(o->cmd);
	if ((err = begin_run(rec)))
		return err;
	err = child_release(&rec->ch);
	phase_mark("exec");
	if (err) {
		log_error("record: cannot run %s: %s", o->cmd[0], strerror(-err));
		waitpid(rec->ch.pid, NULL, 0);
		rec->ch.pid = 0;
		return err;
	}
	return 0;
}

/* A static executable that was given no probe of its own (stripped of its allocator's
 * symbols, or without a sampler linked in) allocates unseen: said once, not recorded as
 * an empty profile in silence. */
static void warn_static_unprobed(const char *exe, const char *why)
{
	if (elfstatic_path(exe) == 1)
		log_warn("record: %s: statically linked and %s: its allocations are not recorded",
			 exe, why);
}

/* --alloc sampled, a command: the injected library's probes, for every process that maps
 * it, and the executable's own in case it links the sampler statically. */
static int start_sampled_command(struct record *rec)
{
	const struct record_opts *o = rec->o;
	char **envp = NULL;
	int n, err;

	sampled_watch_per_target(rec->smp);   /* memprofd:watch per target: rwt_add */
	n = sampled_attach_binary(rec->smp, o->sampler_path, -1);
	phase_mark("attach sampler USDT");
	if (n == 0)
		log_error("record: %s: no memprofd USDT probes in it (not a memprofd sampler?)", o->sampler_path);
	if (n <= 0)
		return n ? n : -ENOENT;
	int own = is_elf(o->exe) ? sampled_attach_binary(rec->smp, o->exe, -1) : 0;
	if (own == 0)
		warn_static_unprobed(o->exe, "links no sampler (a preloaded one cannot load)");
	err = own < 0 ? own : access_open(rec);
	if (err >= 0)
		err = rwt_open(&rec->wt, &rec->r, rec->smp, o->sampler_path);
	if (err < 0)
		return err;
	/* A command with its own otel_memory sampler is recorded through it: a second
	 * sampler under it would count its allocations twice. */
	if (own != SAMPLED_OTEL && sampled_setup_child_env(&envp, o->sampler_path) < 0) {
		log_error("record: out of memory");
		return -ENOMEM;
	}
	err = spawn_traced(rec, envp);
	sampled_free_env(envp);
	return err;
}

/* --alloc sampled, --pid: the sampler the process already has. */
static int start_sampled_pid(struct record *rec)
{
	const struct record_opts *o = rec->o;
	char sampler_path[PATH_MAX] = "";
	int n, err;

	n = sampled_attach_pid(rec->smp, (int)o->pid);
	if (n < 0)
		return n;
	if (n == 0) {
		sampled_find_library(sampler_path, sizeof(sampler_path));
		sampled_report_missing((int)o->pid, sampler_path);
		return -ENOENT;
	}
	err = access_open(rec);
	if (err >= 0)
		err = sampled_add_target(rec->smp, (uint32_t)o->pid);
	if (err < 0)
		return err;
	rec->cmdline = pid_cmdline(o->pid);
	return 0;
}

/* --alloc exact, a command. An executable that links an allocator statically gets probes
 * of its own; a script or a stripped one fails here harmlessly and allocates through libc. */
static int start_exact_command(struct record *rec)
{
	int err;

	if (!rec->o->alloc_off && exact_attach_binary(&rec->r, rec->o->exe) <= 0)
		warn_static_unprobed(rec->o->exe, "no allocator symbol to probe (stripped)");
	phase_mark("attach executable");
	err = access_open(rec);
	if (err >= 0 && !rec->o->alloc_off)
		err = attach_libs_private(&rec->r, &rec->prep);
	if (err < 0)
		return err;
	if (rec->o->alloc_off)
		return spawn_traced(rec, NULL);

	char **envp = NULL;
	if (private_libs_env(&rec->libs, &envp) < 0) {
		log_error("record: out of memory");
		return -ENOMEM;
	}
	err = spawn_traced(rec, envp);
	private_libs_free_env(envp);
	return err;
}

/* --alloc exact, --pid: its executable and the libraries it really maps. */
static int start_exact_pid(struct record *rec)
{
	unsigned long long pid = rec->o->pid;
	char link[64], path[PATH_MAX];
	ssize_t n;
	int err;

	snprintf(link, sizeof(link), "/proc/%llu/exe", pid);
	n = readlink(link, path, sizeof(path) - 1);
	if (n > 0 && !rec->o->alloc_off) {
		path[n] = '\0';
		exact_attach_binary_pid(&rec->r, link, (int)pid);
	}
	err = rec->o->alloc_off ? 0 : attach_libs_of_pid(&rec->pid_follow, (pid_t)pid);
	if (err >= 0)
		err = access_open(rec);
	if (err >= 0)
		err = exact_add_target(&rec->r, (uint32_t)pid);
	if (err < 0)
		return err;
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
		log_error("record: --pid %llu: process exited before it could be traced", pid);
		return -ESRCH;
	}
	rec->cmdline = pid_cmdline(pid);
	return 0;
}

/* The ring made beside the load (ring_bg.h), for the load to adopt; where it could not be
 * made the load makes its own, as before. */
static void adopt_ring(struct record *rec)
{
	int fd = ring_bg_join(&rec->ring_bg);

	rec->r.ring_fd = fd > 0 ? fd : 0;
}

/* The object holds its own descriptor of the ring now. */
static void drop_ring(struct record *rec)
{
	if (rec->r.ring_fd > 0)
		close(rec->r.ring_fd);
	rec->r.ring_fd = 0;
}

/* Loads the allocation mode's BPF, the access source, and starts or joins the target. */
static int start_tracing(struct record *rec)
{
	const struct record_opts *o = rec->o;
	int err;

	if (*o->cmd) {
		rec->follow.r = &rec->r;
		rec->r.lifecycle = follow_exec;
		rec->r.lifecycle_arg = &rec->follow;
	}
	/* record's ring holds a burst of stack copies while the reader unwinds (deep
	 * C++ stacks: clang-19 -fsyntax-only lost half its samples at the default) */
	rec->r.ring_bytes = ALLOC_RECORD_RINGBUF_BYTES;
	if (o->alloc_off)
		rec->r.ring_bytes = 0;   /* lifecycle records only: the default ring (16 MiB, ~4 of
					  * the 64 MiB one's ~15 ms to allocate) */
	if (o->sampled) {
		/* A command's own otel_memory sampler is in its executable (a compile-time
		 * wrapper); without one, those programs are not even loaded. */
		rec->r.no_otel = *o->cmd && !sampled_may_have_otel(o->exe);
		/* Attached only with a watch and the sampler's own (access_open): else its
		 * program is not loaded either. */
		const char *inproc = getenv(RECORD_WATCH_INPROCESS_ENV);
		rec->r.no_watch_usdt = o->no_watch || !strcmp(o->access_mode, "off") ||
				       (inproc && !strcmp(inproc, "0"));
		adopt_ring(rec);
		err = sampled_open(&rec->smp, &rec->r);
		drop_ring(rec);
		phase_mark(rec->r.core_btf_used ? "BPF open+load (CO-RE on the cached minimized BTF)" :
			   "BPF open+load");
		rec->r.sampled = rec->smp;
		rec->follow.smp = rec->smp;
		if (err < 0)
			return err;
		if (!*o->cmd) {
			rec->pid_follow.r = &rec->r;
			rec->pid_follow.smp = rec->smp;
			rec->r.lifecycle = follow_fork_sampled;
			rec->r.lifecycle_arg = &rec->pid_follow;
		}
		return *o->cmd ? start_sampled_command(rec) : start_sampled_pid(rec);
	}
	rec->r.alloc_off = o->alloc_off;
	if (!*o->cmd && !o->alloc_off) {
		rec->pid_follow.r = &rec->r;
		rec->r.lifecycle = follow_fork;
		rec->r.lifecycle_arg = &rec->pid_follow;
	}
	adopt_ring(rec);
	err = exact_open(&rec->r);
	drop_ring(rec);
	phase_mark(rec->r.core_btf_used ? "BPF open+load (CO-RE on the cached minimized BTF)" :
		   "BPF open+load");
	if (err < 0)
		return err;
	return *o->cmd ? start_exact_command(rec) : start_exact_pid(rec);
}

/* The run's row in the store, with the settings it records under (once: a command's
 * is written before it is released, spawn_traced). */
static int begin_run(struct record *rec)
{
	const struct record_opts *o = rec->o;
	char settings[256];
	int err;

	if (rec->run_begun)
		return 0;

	snprintf(settings, sizeof(settings),
		 "{\"flush_ms\":%d,\"bucket_s\":%d,\"max_frames\":%d,\"duration_s\":%llu}",
		 RECORD_FLUSH_MS, AGG_BUCKET_SECONDS, ALLOC_MAX_UFRAMES, o->duration);
	struct store_run run = { .command = rec->cmdline ? rec->cmdline : "", .alloc_mode = o->alloc,
				 .access_mode = rec->r.attrib ? o->access_mode : "off", .settings = settings,
				 .started_ns = real_ns() };
	if ((err = join_store(rec)))
		return err;
	err = store_begin(rec->r.store);
	if (!err && (err = store_end_crashed_runs(rec->r.store)) > 0)
		err = 0;   /* runs whose writer died, ended at their last flush */
	if (!err)
		err = store_run_begin(rec->r.store, &run, &rec->r.run_id);
	if (!err)
		err = store_commit(rec->r.store);
	if (err) {
		store_rollback(rec->r.store);
		log_error("record: %s: %s", o->db, store_errmsg(rec->r.store));
		return err;
	}
	rec->run_begun = true;
	phase_mark("run row");
	return 0;
}

/* Whether recording should stop now: a signal, the child or process ended, the duration
 * reached (elapsed_ns since the start). Sets rec->status when it should. */
static bool should_stop(struct record *rec, int64_t elapsed_ns)
{
	struct signalfd_siginfo si;
	bool stop = false;

	if (rec->sfd >= 0 && read(rec->sfd, &si, sizeof(si)) == sizeof(si)) {
		snprintf(rec->status_buf, sizeof(rec->status_buf), "stopped SIG%s",
			 sigabbrev_np((int)si.ssi_signo) ? sigabbrev_np((int)si.ssi_signo) : "?");
		rec->status = rec->status_buf;
		stop = true;
	}
	if (rec->ch.pid > 0) {
		if (waitpid(rec->ch.pid, &rec->ws, WNOHANG) == rec->ch.pid) {
			child_describe(rec->ws, rec->status_buf, sizeof(rec->status_buf));
			rec->status = rec->status_buf;
			rec->ch.pid = 0;
			rec->child_ended = true;
			stop = true;
		}
	} else if (rec->o->pid && kill((pid_t)rec->o->pid, 0) < 0 && errno == ESRCH) {
		rec->status = "process exited";
		stop = true;
	}
	if (rec->o->duration && elapsed_ns >= (int64_t)rec->o->duration * 1000000000LL) {
		rec->status = "duration";
		stop = true;
	}
	return stop;
}

/* Polls the rings until should_stop(), flushing every RECORD_FLUSH_MS. Woken by the
 * ring, the command's exit (pidfd) or a signal: ending costs no poll interval. Then a
 * command still running gets SIGTERM and is reaped (not a --pid process: that one is not
 * ours); its exit is the last thing recorded. */
static void record_loop(struct record *rec)
{
	int64_t start = mono_ns(), last_flush = start;
	bool stop = false;
	struct pollfd pfd[3] = {
		{ .fd = rec->smp ? sampled_ring_fd(rec->smp) : ring_buffer__epoll_fd(rec->r.rb),
		  .events = POLLIN },
		{ .fd = rec->ch.pid > 0 ? (int)syscall(SYS_pidfd_open, rec->ch.pid, 0) : -1,
		  .events = POLLIN },
		{ .fd = rec->sfd, .events = POLLIN },
	};

	bool more = false;   /* the last read ran out of its slice: read on without waiting */

	while (!stop) {
		poll(pfd, 3, more ? 0 : rec->r.watch ? WATCH_POLL_MS : RECORD_POLL_MS);
		if ((rec->smp ? sampled_poll(rec->smp, 0, &more) : exact_poll(&rec->r, 0, &more)) < 0) {
			rec->status = "error: ring buffer";
			break;
		}
		if (access_poll(&rec->r) < 0) {
			rec->status = "error: access samples";
			break;
		}
		int64_t now = mono_ns();
		stop = should_stop(rec, now - start);
		if (!stop && now - last_flush >= RECORD_FLUSH_MS * 1000000LL) {
			recorder_flush(&rec->r, "running");
			last_flush = now;
		}
	}
	if (pfd[1].fd >= 0)
		close(pfd[1].fd);
	if (rec->ch.pid > 0 && child_stop(&rec->ch, &rec->ws) == 0) {
		rec->child_ended = true;
		do {
			if ((rec->smp ? sampled_poll(rec->smp, 0, &more) :
			     exact_poll(&rec->r, 0, &more)) < 0)
				break;
		} while (more);
	}
}

/* Everything the kernel queued before the end is in the ring buffer: drains it, settles
 * what is still live (its lifetime up to now), and writes the last flush. */
static int finish_run(struct record *rec)
{
	uint64_t end;
	int err;

	if (rec->smp) {
		end = (uint64_t)mono_ns();
		sampled_drain(rec->smp);
		sampled_reap(rec->smp, 0, 0, end, (uint32_t)sched_getcpu());
	} else {
		while (ring_buffer__consume(rec->r.rb) > 0)
			;
		end = (uint64_t)mono_ns();
		exact_reap(&rec->r, 0, 0, end, (uint32_t)sched_getcpu());
	}
	access_finish(&rec->r, end);
	phase_mark("drain");
	err = recorder_flush(&rec->r, rec->status);
	for (int i = 0; err && i < RECORD_FINAL_FLUSH_RETRIES; i++) {
		usleep(RECORD_FINAL_FLUSH_RETRY_US);
		err = recorder_flush(&rec->r, rec->status);
	}
	if (err)
		log_error("record: %s: final flush failed: %s", rec->o->db, store_errmsg(rec->r.store));
	return err;
}

/* The summary lines on stderr: samples (sampled mode), accesses, objects, drops, our cost. */
static void print_summary(struct record *rec)
{
	const struct recorder *r = &rec->r;
	uint64_t cnt[SCNT_MAX];
	struct rusage ru;

	if (rec->smp) {
		uint64_t ns;
		double est;
		sampled_counters(rec->smp, cnt);
		sampled_stats(rec->smp, &ns, &est);
		fprintf(stderr, "memprofd: sampled: %llu samples standing for ~%.0f objects "
			"(%llu outside the region, %llu frees of objects sampled before attach)\n",
			(unsigned long long)ns, est, (unsigned long long)cnt[SCNT_NO_REGION],
			(unsigned long long)cnt[CNT_UNMATCHED_FREE]);
	} else {
		exact_counters(&rec->r, cnt);
		if (!r->alloc_off)   /* no allocator probe, no lifetime */
			fprintf(stderr, "memprofd: exact: lifetimes net of the probes: %llu "
				"objects' lifetimes shortened, by %.3f s summed over them (a hit "
				"costs %llu ns at entry, %llu at return, beyond its program; %llu "
				"outside a call's gap; scaled by the targets' gaps against %llu)\n",
				(unsigned long long)r->probe_net_objects,
				(double)r->probe_net_ns / 1e9, (unsigned long long)r->hit_entry_ns,
				(unsigned long long)r->hit_ret_ns, (unsigned long long)r->hit_edges_ns,
				(unsigned long long)r->calib_gap_ns);
	}
	access_report(&rec->r);
	getrusage(RUSAGE_SELF, &ru);   /* our own CPU, not the child's */
	double cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	fprintf(stderr, "memprofd: recorded %llu objects in %zu contexts (%llu events; drops: "
		"ringbuf %llu, live-map %llu, thread-map %llu, stack %llu; stack copies shortened %llu) "
		"into %s; memprofd cpu %.0f ms, peak rss %ld KiB\n",
		(unsigned long long)r->objects, r->in.stacks.n - (r->unknown_stack_objs ? 0 : 1),
		(unsigned long long)r->events,
		(unsigned long long)cnt[CNT_DROP_RINGBUF], (unsigned long long)cnt[CNT_DROP_LIVE_FULL],
		(unsigned long long)cnt[CNT_DROP_STATE_FULL], (unsigned long long)cnt[CNT_DROP_STACK],
		(unsigned long long)cnt[CNT_USTACK_SHORT], rec->o->db,
		cpu_ms, ru.ru_maxrss);
	if (r->unknown_stack_objs)
		fprintf(stderr, "memprofd: %llu objects in the context without frames: their stacks "
			"were lost (dropped, or their process gone before they could be read; "
			"no key %llu, copy lost %llu, frame-pointer stack lost %llu)\n",
			(unsigned long long)r->unknown_stack_objs,
			(unsigned long long)r->unknown_stack_why[UNKNOWN_NO_KEY],
			(unsigned long long)r->unknown_stack_why[UNKNOWN_COPY_LOST],
			(unsigned long long)r->unknown_stack_why[UNKNOWN_FP_LOST]);
	if (r->ustacks)
		fprintf(stderr, "memprofd: %llu stacks unwound from DWARF CFI (%llu cut short: "
			"truncated; at the copy's end %llu, the frame cap %llu, other %llu)\n",
			(unsigned long long)r->ustacks, (unsigned long long)r->ustacks_truncated,
			(unsigned long long)r->ustack_stops[UNWIND_STOP_COPY],
			(unsigned long long)r->ustack_stops[UNWIND_STOP_FRAMES],
			(unsigned long long)r->ustack_stops[UNWIND_STOP_CFI]);
	if (r->fp_keys_checked[0] + r->fp_keys_checked[1])
		fprintf(stderr, "memprofd: %llu frame-pointer stacks checked against their DWARF "
			"copies: %llu kept, %llu cut or skipping a frame (copied per allocation)\n",
			(unsigned long long)(r->fp_keys_checked[0] + r->fp_keys_checked[1]),
			(unsigned long long)r->fp_keys_checked[1], (unsigned long long)r->fp_keys_checked[0]);
}

/* Exact mode: the command's allocation stacks nearly all pass through libc, so its DWARF
 * (libc6-dbg's, compressed) is opened on a thread while the command runs rather than by
 * the final flush (sampled mode may have no sample to name: it would wait for nothing).
 * Not earlier: beside the BPF load on a loaded machine it delayed the start-up (exact:
 * 0.27 -> 0.40 s at load 14) more than it saved at the end. */
static void warm_libc(struct record *rec)
{
	char libc[PATH_MAX], id[2 * ELFSYM_BUILD_ID_MAX + 1];

	if (!*rec->o->cmd || rec->o->sampled || rec->o->alloc_off || !rec->r.symcache ||
	    find_lib("libc.so.6", libc, sizeof(libc)) < 0)
		return;
	/* Earlier runs' names of libc's frames (namecache.h): most likely all it needs. */
	if (elf_build_id_of(libc, id, sizeof(id)) == 0 && namecache_has(rec->r.names, id))
		return;
	sym_warm_start(&rec->sym_warm, rec->r.symcache, libc);
	if (rec->sym_warm.running)
		rec->r.sym_warm = &rec->sym_warm;
}

/* Keeps the chains this run found for the next (namecache.h); a cache that cannot be
 * written is no failure of the recording: the trace says so. */
static void save_names(struct record *rec)
{
	struct namecache_stats st;
	int err;

	if (!rec->r.names)
		return;
	err = namecache_save(rec->r.names);
	namecache_get_stats(rec->r.names, &st);
	if (phases_on())
		fprintf(stderr, "memprofd: name cache: %llu hits, %llu misses, %llu files read, "
			"%llu damaged (ignored), %llu written%s%s\n", (unsigned long long)st.hits,
			(unsigned long long)st.misses, (unsigned long long)st.files_read,
			(unsigned long long)st.files_bad, (unsigned long long)st.files_written,
			err ? ", saving: " : "", err ? strerror(-err) : "");
	namecache_free(rec->r.names);
	rec->r.names = NULL;
	phase_mark("name cache saved");
}

/* Ends what the recording holds; returns rc, or the command's exit status once it ran
 * (DESIGN.md: ours only when it never did). */
static int record_free(struct record *rec, int rc)
{
	if (rec->ch.pid > 0 && rec->ch.go_fd >= 0) {
		kill(rec->ch.pid, SIGKILL);   /* never released: it must not run untraced */
		waitpid(rec->ch.pid, NULL, 0);
	} else if (rec->ch.pid > 0 && child_stop(&rec->ch, &rec->ws) == 0) {
		rec->child_ended = true;      /* a failure of ours after it ran: it does not outlive us */
	}
	if (rec->child_ended)
		rc = child_exit_code(rec->ws);
	if (!rec->r.store)
		store_bg_join(&rec->store_bg, &rec->r.store);   /* a start that failed before */
	if (!rec->run_begun && !rec->db_existed && rec->r.store) {
		store_close(rec->r.store);
		rec->r.store = NULL;
		remove_new_store(rec->o->db);
	}
	/* The probes' detach (a grace period each) is paid by a helper after we exit. */
	if ((rec->smp || rec->r.skel) && release_later() < 0)
		log_warn("record: no helper to detach the probes: detaching them here");
	phase_mark("release helper");
	rwt_close(&rec->wt);
	sampled_close(rec->smp);
	access_close(&rec->r);
	exact_close(&rec->r);
	exact_prep_join(&rec->prep);     /* the copies are the thread's until then */
	adopt_ring(rec);                 /* a start that failed before the load: never adopted */
	drop_ring(rec);
	private_libs_remove(&rec->libs);
	if (rec->pid_follow.gone)
		log_warn("record: %u children of the target exited before their sampler's probes "
			 "were linked: their allocations are not recorded", rec->pid_follow.gone);
	pid_follow_free(&rec->pid_follow);
	/* A warm-up that no name waited for (no allocation stack: `record -- true`) is not
	 * waited for at the end either: its thread and symcache end with the process, which
	 * exits after this. Not so where its thread could meet exit's library cleanup
	 * (debuginfod's curl and TLS) or a leak checker (which would report the symcache). */
	bool abandon = rec->r.sym_warm && !getenv("DEBUGINFOD_URLS");
#ifdef __SANITIZE_ADDRESS__
	abandon = false;
#endif
	if (abandon)
		sym_warm_abandon(&rec->sym_warm);
	else
		sym_warm_join(&rec->sym_warm);
	if (rec->r.symcache && !abandon)
		symcache_free(rec->r.symcache);
	save_names(rec);
	agg_free(&rec->r.aggs);
	proctab_free(&rec->r.procs);
	recorder_symbols_free(&rec->r);
	interner_free(&rec->r.in);
	store_close(rec->r.store);
	free(rec->cmdline);
	if (rec->sfd >= 0)
		close(rec->sfd);
	sigprocmask(SIG_SETMASK, &rec->orig, NULL);
	phase_mark("closes");
	return rc;
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o = { .db = "./memprofd.db", .alloc = "sampled", .access_mode = "auto" };
	struct record rec = { .o = &o, .ch = { .pid = 0, .go_fd = -1, .err_fd = -1 }, .status = "ok",
			      .wt = { .fd = -1 } };
	struct stat dbst;
	sigset_t mask;
	int rc;

	phases_start();
	rc = parse_options(argc, argv, &o);
	if (rc == RECORD_GO)
		rc = check_options(&o);
	if (rc == RECORD_GO)
		rc = check_environment(&o);
	if (rc != RECORD_GO)
		return rc;
	phase_mark("options");
	rec.db_existed = stat(o.db, &dbst) == 0;
	store_bg_start(&rec.store_bg, o.db);
	if (*o.cmd && !o.sampled && !o.alloc_off)   /* exact mode's libraries, beside the load */
		exact_prep_start(&rec.prep, &rec.libs, find_lib);
	/* The ring start_tracing sizes: record's larger one unless no allocator is probed. */
	ring_bg_start(&rec.ring_bg, o.alloc_off ? ALLOC_RINGBUF_BYTES : ALLOC_RECORD_RINGBUF_BYTES);
	/* Frames get their DWARF lines (separate debug files, debuginfod when
	 * DEBUGINFOD_URLS is set); without it they keep their ELF symbols only. */
	struct symcache_opts so = { .debug = { .debuginfod = true } };
	if (symcache_new(&rec.r.symcache, &so) < 0)
		rec.r.symcache = NULL;
	if (rec.r.symcache && namecache_new(&rec.r.names, NULL) < 0)
		rec.r.names = NULL;   /* no HOME nor XDG_CACHE_HOME: every name looked up */
	phase_mark("symbol cache");

	/* SIGINT/SIGTERM stop the recording; the child gets our original mask back. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, &rec.orig);
	rec.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

	rc = 1;
	if (start_tracing(&rec) == 0 && begin_run(&rec) == 0) {
		warm_libc(&rec);
		record_loop(&rec);
		phase_mark("command ran");
		if (finish_run(&rec) == 0) {
			print_summary(&rec);
			phase_mark("summary");
			rc = 0;
		}
	}
	return record_free(&rec, rc);
}
