/* `memprofd daemon [--config PATH]`: the systemd service. One thread, one poll loop over
 * the ring buffer's epoll fd and a signalfd; every periodic job (flush, governor,
 * maintenance, checkpoint, /proc rescan, watchdog) is a deadline checked after each
 * wake-up. Invariants: SIGTERM ends with a final flush within DAEMON_STOP_BUDGET_MS; a
 * config with errors never replaces the running one; maintenance never runs while a
 * flush is failing (the recorder could rewrite a bucket that compaction already folded).
 * Written against daemon/recorder.h's exact mode; sampled mode joins when it exists. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "daemon/cmds.h"
#include "daemon/config.h"
#include "daemon/governor.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/recorder.h"
#include "daemon/rules.h"
#include "store/store.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/maps.h"

#define DAEMON_STOP_BUDGET_MS 1500   /* SIGTERM -> exit well inside systemd's 2 s promise */
#define DAEMON_ATTACHED_MAX 4096     /* distinct allocator binaries (inodes) probed */
#define DAEMON_MAX_WAIT_MS 1000      /* longest poll, so deadlines are never late by more */


static const char daemon_usage[] =
	"usage: memprofd daemon [--config PATH] [--check]\n"
	"\n"
	"Runs the memprofd service: profiles the processes the config's [target] rules\n"
	"select into the store, within the [governor] CPU budget, with retention and\n"
	"compaction. Meant to run under systemd (deploy/memprofd.service).\n"
	"  --config PATH   configuration file (default " CONFIG_DEFAULT_PATH ")\n"
	"  --check         only validate the configuration, then exit (0 ok, 2 errors)\n"
	"Signals: SIGHUP reloads the config, SIGTERM/SIGINT flush and exit.\n";

/* An allocator binary probed once: uprobes are per inode, so a second attach of the
 * same file would count every call twice. */
struct attached {
	dev_t dev;
	ino_t ino;
};

struct daemon {
	struct config cfg;
	struct recorder r;
	struct governor gov;
	int64_t gov_changed_ns;          /* CLOCK_REALTIME of the governor's last rate change */
	int sfd;
	struct attached att[DAEMON_ATTACHED_MAX];
	size_t natt;
	size_t ntargets;                 /* processes added to the BPF targets map */
	uint64_t skipped_full;           /* matching processes not traced: max_processes */
	int64_t next_flush, next_gov, next_maint, next_ckpt, next_rescan, next_wd;
	uint64_t wd_usec;
	uint64_t gov_cpu_ns;             /* at the previous governor tick */
	int64_t gov_at;
	bool stop;
	char stop_reason[96];
};

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static int64_t real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static uint64_t self_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void print_errors(const char *errs)
{
	for (const char *l = errs; l && *l;) {
		const char *nl = strchr(l, '\n');
		int n = nl ? (int)(nl - l) : (int)strlen(l);

		fprintf(stderr, "memprofd: %.*s\n", n, l);
		l = nl ? nl + 1 : NULL;
	}
}

/* ---- targets ---- */

static bool attached_before(struct daemon *d, const struct stat *st)
{
	for (size_t i = 0; i < d->natt; i++)
		if (d->att[i].dev == st->st_dev && d->att[i].ino == st->st_ino)
			return true;
	return false;
}

/* Probes the allocator binaries pid maps (its exe and libc/libstdc++), each inode once,
 * through /proc/PID/root so that containers' own files are the ones probed. */
static int attach_process_binaries(struct daemon *d, pid_t pid)
{
	struct maps m = { 0 };
	char path[MAPS_PATH_MAX + 64];
	int err = maps_read_pid(&m, pid);

	if (err)
		return err;
	for (size_t i = 0; i < m.n; i++) {
		const char *p = m.v[i].path, *base = strrchr(p, '/');
		struct stat st;

		if (!base || (i > 0 && !strcmp(m.v[i - 1].path, p)))
			continue;
		base++;
		/* The executable may link an allocator statically; libraries by name. */
		bool exe_map = m.v[i].offset == 0 && i == 0;
		if (!exe_map && strncmp(base, "libc.so", 7) && strncmp(base, "libstdc++.so", 12) &&
		    strncmp(base, "libjemalloc.so", 14) && strncmp(base, "libtcmalloc", 11))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, p);
		if (stat(path, &st) < 0 || attached_before(d, &st))
			continue;
		if (d->natt == DAEMON_ATTACHED_MAX) {
			log_warn("daemon: %d allocator binaries probed already; not probing %s",
				 DAEMON_ATTACHED_MAX, p);
			continue;
		}
		int n = exact_attach_binary(&d->r, path);
		if (n < 0) {
			maps_free(&m);
			return n;
		}
		d->att[d->natt++] = (struct attached){ st.st_dev, st.st_ino };
	}
	maps_free(&m);
	return 0;
}

/* Whether pid still is the process that started at start_ns (monotonic): /proc's start
 * time is in clock ticks of CLOCK_BOOTTIME. */
static bool same_process(pid_t pid, uint64_t start_ns)
{
	char path[64], buf[1024];
	struct timespec bt, mt;
	unsigned long long ticks;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	/* Fields after comm: state is 3rd, starttime 22nd. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &ticks) != 1)
		return false;
	clock_gettime(CLOCK_BOOTTIME, &bt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	long hz = sysconf(_SC_CLK_TCK);
	int64_t off = (bt.tv_sec - mt.tv_sec) * 1000000000LL + (bt.tv_nsec - mt.tv_nsec);
	int64_t want = ((int64_t)start_ns + off) / (1000000000LL / (hz > 0 ? hz : 100));
	return (int64_t)ticks >= want - 1 && (int64_t)ticks <= want + 1;
}

/* start_ns: the process instance an exec event named (0: found by a rescan). */
static void consider_pid(struct daemon *d, pid_t pid, uint64_t start_ns)
{
	struct proc_identity id;
	char exe[64];

	if (pid == getpid() || rules_read_identity(pid, &id) < 0 || !id.exe[0])
		return;   /* gone, a kernel thread, or ourselves */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (elf_build_id_of(exe, id.build_id, sizeof(id.build_id)) < 0)
		id.build_id[0] = '\0';
	struct rule_match m = rules_match(&d->cfg, &id);

	if (m.verdict != RULE_TARGET)
		return;
	bool known = exact_is_target(&d->r, (uint32_t)pid);
	if (!known && d->ntargets >= d->cfg.max_processes) {
		d->skipped_full++;
		return;
	}
	if (attach_process_binaries(d, pid) < 0 || known)
		return;
	if (exact_add_target(&d->r, (uint32_t)pid))
		return;
	/* Added after its exit (no exit event will remove it) or to a successor of the
	 * PID: take it back, or a later process with this PID would be traced. */
	if (start_ns && !same_process(pid, start_ns)) {
		exact_remove_target(&d->r, (uint32_t)pid);
		return;
	}
	d->ntargets++;
}

/* Ring-buffer lifecycle records, after the recorder handled them: new processes are
 * checked against the rules at once; forks of targets were added in the kernel. */
static void on_lifecycle(void *arg, unsigned type, uint32_t tgid, uint64_t start_ns)
{
	struct daemon *d = arg;

	switch (type) {
	case EV_NEWEXEC:
	case EV_EXEC:     /* a target's new image may bring allocator binaries to probe */
		consider_pid(d, (pid_t)tgid, start_ns);
		break;
	case EV_FORK:
		d->ntargets++;
		break;
	case EV_EXIT:
		if (d->ntargets)
			d->ntargets--;
		break;
	}
}

/* Walks /proc. Already traced processes are skipped by the BPF targets map's own
 * update (BPF_ANY), so a rescan is idempotent; forks of targets are added in-kernel. */
static void rescan(struct daemon *d)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;

	if (!dir)
		return;
	while ((e = readdir(dir))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		consider_pid(d, (pid_t)pid, 0);
	}
	closedir(dir);
	d->ntargets = exact_count_targets(&d->r);   /* what lost lifecycle records skewed */
}

/* ---- periodic jobs ---- */

static uint64_t self_rss_bytes(void)
{
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The governor's record for `memprofd query status`, in its own small transaction. Not
 * while flushes fail: the store is unwritable then (the flush logs it), and the next
 * tick writes the record again anyway. */
static void governor_store(struct daemon *d, enum gov_action act)
{
	char hist[GOV_HISTORY * (GOV_TEXT + 1)];

	if (d->r.flush_error_logged)
		return;
	struct store_governor g = {
		.at_ns = real_ns(), .budget = d->gov.cfg.budget, .cpu = d->gov.last_usage,
		.min_scale = d->gov.cfg.min_scale, .ticks = d->gov.ticks,
		.lowered = d->gov.lowered, .raised = d->gov.raised,
		.action = governor_action_name(act), .changed_ns = d->gov_changed_ns,
		.decision = d->gov.last, .history = hist,
		.rss_bytes = self_rss_bytes(), .cache_bytes = store_cache_used(d->r.store),
		.procs_held = d->r.procs.procs.n, .aggs_held = agg_count(&d->r.aggs),
	};

	governor_history(&d->gov, hist, sizeof(hist));
	for (unsigned i = 0; i < d->gov.nsrc && i < STORE_GOV_MAX_SOURCES; i++)
		g.src[g.nsrc++] = (struct store_gov_source){
			.name = d->gov.src[i].name, .scale = d->gov.src[i].scale, .rate = -1,
			.events = d->gov.src[i].events,
		};
	int err = store_begin(d->r.store);

	if (!err)
		err = store_put_governor(d->r.store, d->r.run_id, &g);
	if (!err)
		err = store_commit(d->r.store);
	if (err) {
		store_rollback(d->r.store);
		log_warn("governor: %s (recorded at the next tick)", store_errmsg(d->r.store));
	}
}

static void governor_job(struct daemon *d, int64_t now)
{
	uint64_t cpu = self_cpu_ns();

	/* Exact allocation tracking has no rate to lower, so no source is registered and
	 * the governor measures and reports only. A sampled recorder registers its source
	 * in run() and applies governor_scale() here. */
	enum gov_action act = governor_tick(&d->gov, (uint64_t)(now - d->gov_at) * 1000000ULL,
					    cpu - d->gov_cpu_ns, NULL);
	d->gov_cpu_ns = cpu;
	d->gov_at = now;
	if (act == GOV_LOWER || act == GOV_RAISE)
		d->gov_changed_ns = real_ns();
	governor_store(d, act);
	if (d->r.mem_dropped_aggs)
		notify_status("%zu processes, %llu events, %s; %llu aggregates dropped over "
			      "memory_limit", d->ntargets, (unsigned long long)d->r.events,
			      d->gov.last, (unsigned long long)d->r.mem_dropped_aggs);
	else
		notify_status("%zu processes, %llu events, %s", d->ntargets,
			      (unsigned long long)d->r.events, d->gov.last);
}

static void maintenance_job(struct daemon *d)
{
	struct store_maint_stats st = {0};
	int64_t now = real_ns();
	int r = 0;

	if (d->r.flush_error_logged)
		return;   /* a pending flush may still rewrite old buckets */
	if (d->cfg.retention_s)
		r = store_retention_delete(d->r.store, now - (int64_t)d->cfg.retention_s * 1000000000LL, &st);
	for (int i = (int)d->cfg.ntiers - 1; !r && i >= 0; i--)   /* coarsest first */
		r = store_compact(d->r.store, now - (int64_t)d->cfg.tiers[i].age_s * 1000000000LL,
				  (int64_t)d->cfg.tiers[i].width_s * 1000000000LL, &st);
	if (!r)
		r = store_enforce_size(d->r.store, d->cfg.max_db_bytes, &st);
	if (r)
		log_warn("maintenance: %s (will retry)", store_errmsg(d->r.store));
}

static void reload(struct daemon *d)
{
	struct config nc;
	char *errs = NULL;

	notify_reloading();
	int r = config_load(&nc, d->cfg.path, &errs);

	if (r) {
		print_errors(errs);
		log_error("daemon: %s: reload rejected, keeping the running configuration", d->cfg.path);
		free(errs);
		notify_ready(NULL);
		notify_status("reload of %s rejected (see the log); running config kept", d->cfg.path);
		return;
	}
	if (strcmp(nc.db, d->cfg.db))
		log_warn("daemon: [store] db changed to %s: takes effect on restart", nc.db);
	if (nc.alloc != d->cfg.alloc || nc.access != d->cfg.access)
		log_warn("daemon: [sampling] alloc/access changes take effect on restart");
	if (nc.cache_bytes != d->cfg.cache_bytes && store_set_cache(d->r.store, nc.cache_bytes))
		log_warn("daemon: %s", store_errmsg(d->r.store));
	free(nc.db);
	nc.db = d->cfg.db;       /* keep the open store's path */
	d->cfg.db = NULL;
	nc.alloc = d->cfg.alloc;
	nc.access = d->cfg.access;
	config_free(&d->cfg);
	d->cfg = nc;
	d->gov.cfg.budget = nc.cpu_budget;   /* scales kept: the next tick adapts them */
	d->gov.cfg.min_scale = nc.min_scale;
	d->next_rescan = 0;                  /* new rules: look at every process again */
	notify_ready(NULL);
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			reload(d);
		} else {
			d->stop = true;
			snprintf(d->stop_reason, sizeof(d->stop_reason), "stopped by %s",
				 strsignal((int)si.ssi_signo));
		}
	}
}

static void final_flush(struct daemon *d, int64_t deadline)
{
	while (ring_buffer__consume(d->r.rb) > 0 && mono_ms() < deadline)
		;
	exact_reap(&d->r, 0, 0, (uint64_t)(mono_ms() * 1000000LL), (uint32_t)sched_getcpu());
	int err = recorder_flush(&d->r, d->stop_reason);

	while (err && mono_ms() + 100 < deadline) {
		usleep(100000);
		err = recorder_flush(&d->r, d->stop_reason);
	}
	if (err)
		log_error("daemon: final flush failed: %s (at most %llu ms of data lost)",
			  store_errmsg(d->r.store), (unsigned long long)d->cfg.flush_interval_ms);
	store_checkpoint(d->r.store);
}

static int64_t min_deadline(const struct daemon *d)
{
	int64_t t = d->next_flush;
	const int64_t o[] = { d->next_gov, d->next_maint, d->next_ckpt, d->next_rescan, d->next_wd };

	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++)
		if (o[i] && o[i] < t)
			t = o[i];
	return t;
}

static int run(struct daemon *d)
{
	char errbuf[512], settings[512];
	int err;

	err = store_open(&d->r.store, d->cfg.db, STORE_RDWR, errbuf, sizeof(errbuf));
	if (err)
		return log_error_errno(1, "daemon: %s", errbuf);
	if (store_set_cache(d->r.store, d->cfg.cache_bytes))
		log_warn("daemon: %s", store_errmsg(d->r.store));
	d->r.watch_all_exec = true;
	d->r.lifecycle = on_lifecycle;
	d->r.lifecycle_arg = d;
	if (exact_open(&d->r) < 0)
		return 1;
	snprintf(settings, sizeof(settings),
		 "{\"config\":\"%s\",\"flush_ms\":%llu,\"bucket_s\":%d,\"cpu_budget\":%g,"
		 "\"retention_s\":%llu,\"max_db_bytes\":%llu}", d->cfg.path,
		 (unsigned long long)d->cfg.flush_interval_ms, AGG_BUCKET_SECONDS, d->cfg.cpu_budget,
		 (unsigned long long)d->cfg.retention_s, (unsigned long long)d->cfg.max_db_bytes);
	struct store_run run = { .command = "daemon", .alloc_mode = config_alloc_name(d->cfg.alloc),
				 .access_mode = "off", .settings = settings, .started_ns = real_ns() };
	err = store_begin(d->r.store);
	if (!err)
		err = store_run_begin(d->r.store, &run, &d->r.run_id);
	if (!err)
		err = store_commit(d->r.store);
	if (err) {
		store_rollback(d->r.store);
		return log_error_errno(1, "daemon: %s: %s", d->cfg.db, store_errmsg(d->r.store));
	}

	struct governor_cfg gc = { .budget = d->cfg.cpu_budget, .min_scale = d->cfg.min_scale };
	governor_init(&d->gov, &gc);
	int64_t now = mono_ms();
	d->gov_at = now;
	d->gov_cpu_ns = self_cpu_ns();
	d->wd_usec = notify_watchdog_usec();
	d->next_flush = now + (int64_t)d->cfg.flush_interval_ms;
	d->next_gov = now + (int64_t)d->cfg.governor_interval_s * 1000;
	d->next_maint = now + 60000;       /* not in the start-up rush */
	d->next_ckpt = now + (int64_t)d->cfg.checkpoint_interval_s * 1000;
	d->next_wd = d->wd_usec ? now : 0;
	rescan(d);
	d->next_rescan = d->cfg.rescan_interval_s ? now + (int64_t)d->cfg.rescan_interval_s * 1000 : 0;
	if (!d->cfg.ntargets)
		log_warn("daemon: %s has no [target] rules: nothing will be profiled", d->cfg.path);
	notify_ready(NULL);
	notify_status("%zu processes traced", d->ntargets);

	struct pollfd pfd[2] = { { .fd = ring_buffer__epoll_fd(d->r.rb), .events = POLLIN },
				 { .fd = d->sfd, .events = POLLIN } };
	while (!d->stop) {
		int64_t wait = min_deadline(d) - mono_ms();

		if (wait < 0)
			wait = 0;
		if (wait > DAEMON_MAX_WAIT_MS)
			wait = DAEMON_MAX_WAIT_MS;
		if (poll(pfd, 2, (int)wait) < 0 && errno != EINTR)
			return log_error_errno(1, "daemon: poll: %s", strerror(errno));
		/* Consume on every wake-up, not only on POLLIN: the kernel side wakes us only
		 * when the ring is a quarter full. */
		if (ring_buffer__consume(d->r.rb) < 0) {
			snprintf(d->stop_reason, sizeof(d->stop_reason), "error: ring buffer");
			break;
		}
		if (pfd[1].revents)
			on_signal(d);
		if (d->stop)
			break;
		now = mono_ms();
		if (now >= d->next_flush) {
			/* Failures retry, logged once; meanwhile memory stays within the limit. */
			if (recorder_flush(&d->r, "running") == 0)
				recorder_forget_exited(&d->r);
			else
				recorder_bound_memory(&d->r, d->cfg.memory_limit_bytes);
			d->next_flush = now + (int64_t)d->cfg.flush_interval_ms;
		}
		if (now >= d->next_gov) {
			governor_job(d, now);
			d->next_gov = now + (int64_t)d->cfg.governor_interval_s * 1000;
		}
		if (d->next_rescan && now >= d->next_rescan) {
			rescan(d);
			d->next_rescan = d->cfg.rescan_interval_s ? now + (int64_t)d->cfg.rescan_interval_s * 1000 : 0;
		} else if (!d->next_rescan && d->cfg.rescan_interval_s) {
			d->next_rescan = now;         /* after a reload */
		}
		if (now >= d->next_maint) {
			maintenance_job(d);
			d->next_maint = now + (int64_t)d->cfg.maintenance_interval_s * 1000;
		}
		if (now >= d->next_ckpt) {
			store_checkpoint(d->r.store);   /* -EBUSY with a reader: next time */
			d->next_ckpt = now + (int64_t)d->cfg.checkpoint_interval_s * 1000;
		}
		if (d->next_wd && now >= d->next_wd) {
			notify_watchdog();
			d->next_wd = now + (int64_t)(d->wd_usec / 2000);
		}
	}
	notify_stopping();
	final_flush(d, mono_ms() + DAEMON_STOP_BUDGET_MS);
	return 0;
}

int cmd_daemon(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "check", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' }, { 0 },
	};
	const char *path = CONFIG_DEFAULT_PATH;
	bool check = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 'C': check = true; break;
		case 'h': fputs(daemon_usage, stdout); return 0;
		default: fputs(daemon_usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		log_error("daemon: unexpected argument '%s'", argv[optind]);
		return 2;
	}

	struct daemon *d = calloc(1, sizeof(*d));
	char *errs = NULL;

	if (!d)
		return log_error_errno(1, "daemon: out of memory");
	d->sfd = -1;
	if (config_load(&d->cfg, path, &errs)) {
		print_errors(errs);
		free(errs);
		free(d);
		return 2;
	}
	if (check) {
		printf("%s: ok\n", path);
		config_free(&d->cfg);
		free(d);
		return 0;
	}
	int rc = 1;
	if (d->cfg.alloc != CFG_ALLOC_EXACT) {
		log_error("daemon: %s: [sampling] alloc = %s is not available in this build yet; "
			  "use alloc = exact", path, config_alloc_name(d->cfg.alloc));
		goto out;
	}
	if (d->cfg.access != CFG_ACCESS_OFF && d->cfg.access != CFG_ACCESS_AUTO) {
		log_error("daemon: %s: [sampling] access = %s is not available in this build yet",
			  path, config_access_name(d->cfg.access));
		goto out;
	}

	sigset_t mask, orig;
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, &orig);
	d->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sfd < 0) {
		log_error("daemon: signalfd: %s", strerror(errno));
	} else {
		snprintf(d->stop_reason, sizeof(d->stop_reason), "ok");
		rc = run(d);
	}
	exact_close(&d->r);
	agg_free(&d->r.aggs);
	proctab_free(&d->r.procs);
	interner_free(&d->r.in);
	store_close(d->r.store);
	if (d->sfd >= 0)
		close(d->sfd);
	sigprocmask(SIG_SETMASK, &orig, NULL);
out:
	config_free(&d->cfg);
	free(d);
	return rc;
}
