/* `memprofd record`: profiles one command (started so that nothing is missed) or one
 * running process until it ends, a signal arrives, or --duration passes. Order of work:
 * validate everything that can fail cheaply (arguments, command, capability, DB) before
 * loading BPF, and load BPF before the child runs its first instruction. */
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
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "daemon/record/child.h"
#include "cli/cmds.h"
#include "base/log.h"
#include "daemon/record/recorder.h"
#include "store/store.h"
#include "symbolizer/maps.h"
#include "symbolizer/symcache.h"

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
	"                       [--duration SEC] (--pid PID | -- CMD [ARG...])\n"
	"\n"
	"Profiles the allocations of CMD (started so that none is missed) or of the running\n"
	"process PID, per allocation context, into the SQLite store (default ./memprofd.db).\n"
	"  --alloc sampled  (default) libmemprofd_sampler in the process, USDT probes on\n"
	"                   sampled allocations only (estimated counts; about 1% overhead)\n"
	"  --alloc exact    uprobes on every allocator call (exact counts; high overhead)\n"
	"  --access SRC     data-access sampling (default auto): auto tries pebs, ibs, spe,\n"
	"                   soft in that order and says which it uses; soft works without a\n"
	"                   PMU; off records allocations only. Accesses are attributed to\n"
	"                   the heap object (sampled or exact) or static symbol they touch\n"
	"  --freq HZ        samples per second per CPU of the soft source (default 100)\n"
	"  --period N       events per sample of the PMU sources\n"
	"  --duration SEC   stop after SEC seconds (default: when the process ends)\n";

static int64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int64_t real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

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

static int attach_libs_standard(struct recorder *r)
{
	static const char *const libs[] = { "libc.so.6", "libstdc++.so.6" };
	char path[PATH_MAX];
	int total = 0;

	for (size_t i = 0; i < 2; i++) {
		if (find_lib(libs[i], path, sizeof(path)) < 0)
			continue;
		int n = exact_attach_binary(r, path);
		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

/* For a running process: the libc/libstdc++ it really maps, through its root. */
static int attach_libs_of_pid(struct recorder *r, pid_t pid)
{
	struct maps m = { 0 };
	char path[PATH_MAX + 64];
	int total = 0, err;

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
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, p);
		int n = exact_attach_binary(r, path);
		if (n < 0) {
			maps_free(&m);
			return n;
		}
		total += n;
	}
	maps_free(&m);
	return total;
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

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' }, { "alloc", required_argument, NULL, 'a' },
		{ "access", required_argument, NULL, 'A' }, { "freq", required_argument, NULL, 'f' },
		{ "period", required_argument, NULL, 'P' }, { "duration", required_argument, NULL, 'D' },
		{ "pid", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *db = "./memprofd.db", *alloc = "sampled", *access_mode = "auto";
	bool access_given = false;
	unsigned long long duration = 0, pid = 0, v, freq = 0, period = 0;
	int c, err;

	optind = 1;
	opterr = 0;   /* one-line errors of our own, not getopt's */
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db = optarg; break;
		case 'a': alloc = optarg; break;
		case 'A': access_mode = optarg; access_given = true; break;
		case 'f': case 'P':
			if (parse_uint(optarg, UINT32_MAX, &v) || v == 0) {
				log_error("record: --%s: expected a positive integer, got '%s'",
					  c == 'f' ? "freq" : "period", optarg);
				return 2;
			}
			*(c == 'f' ? &freq : &period) = v;
			break;
		case 'D':
			if (parse_uint(optarg, 365ULL * 86400, &duration) || duration == 0) {
				log_error("record: --duration: expected seconds > 0, got '%s'", optarg);
				return 2;
			}
			break;
		case 'p':
			if (parse_uint(optarg, INT32_MAX, &pid) || pid == 0) {
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
	char **cmd = argv + optind;
	if ((pid != 0) == (*cmd != NULL)) {
		log_error("record: give exactly one of --pid PID or -- CMD [ARG...]");
		return 2;
	}
	if (strcmp(alloc, "exact") && strcmp(alloc, "sampled") && strcmp(alloc, "off")) {
		log_error("record: --alloc: expected exact, sampled or off, got '%s'", alloc);
		return 2;
	}
	if (!strcmp(alloc, "off")) {
		log_error("record: --alloc off: not available in this build yet; use --alloc sampled or exact");
		return 1;
	}
	bool sampled = !strcmp(alloc, "sampled");
	static const char *const sources[] = { "auto", "pebs", "ibs", "spe", "soft", "off" };
	bool known = false;
	for (size_t i = 0; i < 6; i++)
		known |= strcmp(access_mode, sources[i]) == 0;
	if (!known) {
		log_error("record: --access: expected auto, pebs, ibs, spe, soft or off, got '%s'", access_mode);
		return 2;
	}

	char exe[PATH_MAX];
	if (*cmd) {
		err = child_find_command(cmd[0], exe, sizeof(exe));
		if (err) {
			log_error("record: %s: %s", cmd[0], err == -ENOENT ? "command not found" : strerror(-err));
			return 1;
		}
	} else if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
		log_error("record: --pid %llu: no such process", pid);
		return 1;
	}
	const char *cap = missing_capability();
	if (cap) {
		log_error("record: missing capability %s (BPF tracing needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; run as root)", cap);
		return 1;
	}

	char sampler_path[PATH_MAX] = "";
	if (sampled && *cmd && sampled_find_library(sampler_path, sizeof(sampler_path)) < 0) {
		log_error("record: --alloc sampled: libmemprofd_sampler.so not found (set MEMPROFD_SAMPLER=PATH, or use --alloc exact)");
		return 1;
	}

	char errbuf[512];
	struct recorder r = { 0 };
	struct sampled *smp = NULL;
	err = store_open(&r.store, db, STORE_RDWR, errbuf, sizeof(errbuf));
	if (err) {
		log_error("record: %s", errbuf);   /* names the file */
		return 1;
	}

	/* Frames get their DWARF lines (separate debug files, debuginfod when
	 * DEBUGINFOD_URLS is set); without it they keep their ELF symbols only. */
	struct symcache_opts so = { .debug = { .debuginfod = true } };
	if (symcache_new(&r.symcache, &so) < 0)
		r.symcache = NULL;

	/* SIGINT/SIGTERM stop the recording; the child gets our original mask back. */
	sigset_t mask, orig;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, &orig);
	int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

	int rc = 1;
	struct child ch = { .pid = 0, .go_fd = -1, .err_fd = -1 };
	char *cmdline = NULL;
	const char *status = "ok";
	char status_buf[128];

	if (sampled) {
		int n;
		err = sampled_open(&smp, &r);
		r.sampled = smp;
		if (err < 0)
			goto out;
		if (*cmd) {
			/* The injected library, for every process that maps it; and the
			 * executable itself in case it links the sampler statically. */
			n = sampled_attach_binary(smp, sampler_path, -1);
			if (n == 0)
				log_error("record: %s: no memprofd USDT probes in it (not a memprofd sampler?)", sampler_path);
			if (n <= 0)
				goto out;
			if (sampled_attach_binary(smp, exe, -1) < 0)
				goto out;
			if (access_setup(&r, access_mode, access_given, freq, period) < 0)
				goto out;
			char **envp = NULL, **saved = environ;
			if (sampled_setup_child_env(&envp, sampler_path) < 0) {
				log_error("record: out of memory");
				goto out;
			}
			environ = envp;   /* child_spawn's execv passes environ */
			err = child_spawn(&ch, exe, cmd, &orig);
			environ = saved;
			sampled_free_env(envp);
			if (err) {
				log_error("record: starting %s: %s", cmd[0], strerror(-err));
				goto out;
			}
			if (sampled_add_target(smp, ch.pid) < 0)
				goto out;
			err = child_release(&ch);
			if (err) {
				log_error("record: cannot run %s: %s", cmd[0], strerror(-err));
				waitpid(ch.pid, NULL, 0);
				ch.pid = 0;
				goto out;
			}
			cmdline = join_argv(cmd);
		} else {
			n = sampled_attach_pid(smp, (int)pid);
			if (n < 0)
				goto out;
			if (n == 0) {
				sampled_find_library(sampler_path, sizeof(sampler_path));
				sampled_report_missing((int)pid, sampler_path);
				goto out;
			}
			if (access_setup(&r, access_mode, access_given, freq, period) < 0)
				goto out;
			if (sampled_add_target(smp, (uint32_t)pid) < 0)
				goto out;
			cmdline = malloc(32);
			if (cmdline)
				snprintf(cmdline, 32, "pid %llu", pid);
		}
	} else if (exact_open(&r) < 0) {
		goto out;
	} else if (*cmd) {
		/* An executable that links an allocator statically gets probes of its own; a
		 * script or a stripped one fails here harmlessly and allocates through libc. */
		exact_attach_binary(&r, exe);
		if (access_setup(&r, access_mode, access_given, freq, period) < 0)
			goto out;
		if (attach_libs_standard(&r) < 0)
			goto out;
		err = child_spawn(&ch, exe, cmd, &orig);
		if (err) {
			log_error("record: starting %s: %s", cmd[0], strerror(-err));
			goto out;
		}
		if (exact_add_target(&r, ch.pid) < 0)
			goto out;
		err = child_release(&ch);
		if (err) {
			log_error("record: cannot run %s: %s", cmd[0], strerror(-err));
			waitpid(ch.pid, NULL, 0);
			ch.pid = 0;
			goto out;
		}
		cmdline = join_argv(cmd);
	} else {
		char link[64], path[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/%llu/exe", pid);
		ssize_t n = readlink(link, path, sizeof(path) - 1);
		if (n > 0) {
			path[n] = '\0';
			snprintf(link, sizeof(link), "/proc/%llu/exe", pid);
			exact_attach_binary(&r, link);
		}
		if (attach_libs_of_pid(&r, (pid_t)pid) < 0)
			goto out;
		if (access_setup(&r, access_mode, access_given, freq, period) < 0)
			goto out;
		if (exact_add_target(&r, (uint32_t)pid) < 0)
			goto out;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			log_error("record: --pid %llu: process exited before it could be traced", pid);
			goto out;
		}
		cmdline = malloc(32);
		if (cmdline)
			snprintf(cmdline, 32, "pid %llu", pid);
	}

	char settings[256];
	snprintf(settings, sizeof(settings),
		 "{\"flush_ms\":%d,\"bucket_s\":%d,\"max_frames\":%d,\"duration_s\":%llu}",
		 RECORD_FLUSH_MS, AGG_BUCKET_SECONDS, ALLOC_MAX_FRAMES, duration);
	struct store_run run = { .command = cmdline ? cmdline : "", .alloc_mode = alloc,
				 .access_mode = r.attrib ? access_mode : "off", .settings = settings,
				 .started_ns = real_ns() };
	err = store_begin(r.store);
	if (!err)
		err = store_run_begin(r.store, &run, &r.run_id);
	if (!err)
		err = store_commit(r.store);
	if (err) {
		store_rollback(r.store);
		log_error("record: %s: %s", db, store_errmsg(r.store));
		goto out;
	}

	int64_t start = mono_ns(), last_flush = start;
	bool stop = false;
	while (!stop) {
		if ((smp ? sampled_poll(smp, RECORD_POLL_MS) : exact_poll(&r, RECORD_POLL_MS)) < 0) {
			status = "error: ring buffer";
			break;
		}
		if (access_poll(&r) < 0) {
			status = "error: access samples";
			break;
		}
		struct signalfd_siginfo si;
		if (sfd >= 0 && read(sfd, &si, sizeof(si)) == sizeof(si)) {
			snprintf(status_buf, sizeof(status_buf), "stopped by %s", strsignal(si.ssi_signo));
			status = status_buf;
			stop = true;
		}
		if (ch.pid > 0) {
			int ws;
			if (waitpid(ch.pid, &ws, WNOHANG) == ch.pid) {
				if (WIFEXITED(ws))
					snprintf(status_buf, sizeof(status_buf), "ok: child exited %d", WEXITSTATUS(ws));
				else
					snprintf(status_buf, sizeof(status_buf), "ok: child killed by signal %d", WTERMSIG(ws));
				status = status_buf;
				ch.pid = 0;
				stop = true;
			}
		} else if (pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			status = "ok: process exited";
			stop = true;
		}
		int64_t now = mono_ns();
		if (duration && now - start >= (int64_t)duration * 1000000000LL) {
			status = "ok: duration reached";
			stop = true;
		}
		if (!stop && now - last_flush >= RECORD_FLUSH_MS * 1000000LL) {
			recorder_flush(&r, "running");
			last_flush = now;
		}
	}
	/* Everything the kernel queued before the end is in the ring buffer: drain it. */
	if (smp) {
		uint64_t end = (uint64_t)mono_ns();
		sampled_drain(smp);
		sampled_reap(smp, 0, 0, end, (uint32_t)sched_getcpu());
		access_finish(&r, end);
	} else {
		while (ring_buffer__consume(r.rb) > 0)
			;
		/* What is still live when recording stops counts with its lifetime up to now. */
		uint64_t end = (uint64_t)mono_ns();
		exact_reap(&r, 0, 0, end, (uint32_t)sched_getcpu());
		access_finish(&r, end);
	}
	err = recorder_flush(&r, status);
	for (int i = 0; err && i < 20; i++) {   /* e.g. a reader holding a lock: retry briefly */
		usleep(100000);
		err = recorder_flush(&r, status);
	}
	if (err) {
		log_error("record: %s: final flush failed: %s", db, store_errmsg(r.store));
		goto out;
	}
	uint64_t cnt[SCNT_MAX];
	struct rusage ru;
	if (smp) {
		uint64_t ns;
		double est;
		sampled_counters(smp, cnt);
		sampled_stats(smp, &ns, &est);
		fprintf(stderr, "memprofd: sampled: %llu samples standing for ~%.0f objects "
			"(%llu outside the region, %llu frees of objects sampled before attach)\n",
			(unsigned long long)ns, est, (unsigned long long)cnt[SCNT_NO_REGION],
			(unsigned long long)cnt[CNT_UNMATCHED_FREE]);
	} else {
		exact_counters(&r, cnt);
	}
	access_report(&r);
	getrusage(RUSAGE_SELF, &ru);   /* our own CPU, not the child's */
	double cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	fprintf(stderr, "memprofd: recorded %llu objects in %zu contexts (%llu events; drops: "
		"ringbuf %llu, live-map %llu, thread-map %llu, stack %llu) into %s; "
		"memprofd cpu %.0f ms, peak rss %ld KiB\n",
		(unsigned long long)r.objects, r.in.stacks.n - (r.unknown_stack_objs ? 0 : 1),
		(unsigned long long)r.events,
		(unsigned long long)cnt[CNT_DROP_RINGBUF], (unsigned long long)cnt[CNT_DROP_LIVE_FULL],
		(unsigned long long)cnt[CNT_DROP_STATE_FULL], (unsigned long long)cnt[CNT_DROP_STACK], db,
		cpu_ms, ru.ru_maxrss);
	rc = 0;
out:
	if (ch.pid > 0 && ch.go_fd >= 0) {
		kill(ch.pid, SIGKILL);   /* never released: it must not run untraced */
		waitpid(ch.pid, NULL, 0);
	}
	sampled_close(smp);
	access_close(&r);
	exact_close(&r);
	if (r.symcache)
		symcache_free(r.symcache);
	agg_free(&r.aggs);
	proctab_free(&r.procs);
	interner_free(&r.in);
	store_close(r.store);
	free(cmdline);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &orig, NULL);
	return rc;
}
