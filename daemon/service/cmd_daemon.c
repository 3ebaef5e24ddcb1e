/* `memprofd daemon [--config PATH]`: the systemd service. One thread, one poll loop over
 * the allocation ring, the access-sample ring and a signalfd; every periodic job (flush,
 * governor, maintenance, checkpoint, /proc rescan, watchdog, targets waiting for their
 * sampler) is a deadline checked after each wake-up; names are found in a forked namer
 * (namer.c), never in the loop. Invariants: one daemon per database (an flock beside it);
 * SIGTERM ends within DAEMON_STOP_BOUND_MS of the signal whoever holds the database's
 * lock, however far behind the daemon is (stop.c counts what does not fit; a running flush
 * writes for DAEMON_FLUSH_WRITE_MS at most); a config with errors never replaces the
 * running one; maintenance never runs while a flush is failing (the recorder could
 * rewrite a bucket that compaction already folded). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "daemon/service/cmd_daemon.h"
#include "daemon/service/config.h"
#include "daemon/access/watch.h"
#include "daemon/service/governor.h"
#include "base/log.h"
#include "daemon/service/notify.h"
#include "daemon/record/recorder.h"
#include "daemon/access/access.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/access/src_soft.h"
#include "daemon/service/targets.h"
#include "daemon/service/exec_gate.h"
#include "daemon/service/db_owner.h"
#include "daemon/service/stop.h"
#include "daemon/service/namer.h"
#include "store/store.h"
#include "symbolizer/symcache.h"
#include "base/clock.h"
#include "base/cleanup.h"
#include "base/escape.h"

#define DAEMON_MAX_WAIT_MS 1000      /* longest poll, so deadlines are never late by more */
#define DAEMON_BUSY_TIMEOUT_MS 200   /* SQLite lock wait of a running flush (then: retry) */
#define DAEMON_FLUSH_RETRY_MS 100    /* pause between final flush attempts */
#define DAEMON_FLUSH_WRITE_MS 300    /* a running flush's writing, at most half an interval */
#define DAEMON_SYMBOLIZE_SHARE 5     /* naming new stacks: 1/5 of each flush interval */
#define DAEMON_SYMCACHE_BYTES ((size_t)128 << 20)  /* opened symbolizers kept (LRU) */
#define DAEMON_FIRST_MAINT_MS 60000  /* first maintenance after start: not in the start-up rush */
#define MS_PER_S 1000

static const char daemon_usage[] =
	"usage: memprofd daemon [--config PATH] [--check]\n"
	"\n"
	"Runs the memprofd service: profiles the processes the config's [target] rules\n"
	"select into the store, within the [governor] CPU budget, with retention and\n"
	"compaction. Meant to run under systemd (deploy/memprofd.service).\n"
	"  --config PATH   configuration file (default " CONFIG_DEFAULT_PATH ")\n"
	"  --check         validate the configuration and that its db can be written (a write\n"
	"                  transaction, rolled back), then exit (0 ok, 1 db not writable, 2 errors)\n"
	"Signals: SIGHUP reloads the config, SIGTERM/SIGINT flush and exit.\n";

struct daemon {
	struct config cfg;
	struct recorder r;
	struct sampled *smp;             /* alloc = sampled, else NULL (exact) */
	struct targets tg;
	struct exec_gate gate;           /* decides processes at their exec */
	struct governor gov;
	int gov_alloc, gov_access;       /* governor source indices, -1 if none */
	uint64_t gov_events_alloc, gov_events_access;   /* counters at the previous tick */
	int gov_watch;                   /* the watch's traps (index, -1 if none): the targets'
	                                  * CPU in traps counts against the budget too */
	uint64_t gov_traps;              /* the watch's traps at the previous tick (the
	                                  * daemon's windows' and the sampler's own) */
	double inproc_per_link;          /* in-process traps/s per linked process, last tick */
	uint64_t inproc_seen;            /* the sampler's traps counted at the previous tick */
	double watch_traps_full;         /* its traps/s at scale 1 */
	double keep;                     /* sampled records kept (thinning), 1 = all */
	int64_t gov_changed_ns;          /* CLOCK_REALTIME of the governor's last rate change */
	int sfd;
	struct db_owner owner;           /* one daemon per database file */
	struct namer namer;              /* names bare frames off the loop (namer.c) */
	int64_t next_flush, next_gov, next_maint, next_ckpt, next_rescan, next_wd;
	uint64_t wd_usec;
	uint64_t gov_cpu_ns;             /* at the previous governor tick */
	int64_t gov_at;
	bool stop;
	int64_t stop_at;                 /* CLOCK_MONOTONIC ms the stop signal was read */
	char stop_reason[96];
};

static void print_errors(const char *errs)
{
	for (const char *l = errs; l && *l;) {
		const char *nl = strchr(l, '\n');
		int n = nl ? (int)(nl - l) : (int)strlen(l);

		fprintf(stderr, "memprofd: %.*s\n", n, l);
		l = nl ? nl + 1 : NULL;
	}
}

/* One daemon per database: two would fail each other's flushes on SQLite's lock
 * (daemon/service/db_owner.c). 0, or -EBUSY after the one-line error. */
static int lock_db(struct daemon *d)
{
	return db_owner_lock(&d->owner, d->cfg.db) ? -EBUSY : 0;
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
	char hist[GOV_HISTORY * (GOV_TEXT + 1)], unsampled[TARGETS_UNSAMPLED_SHOWN * 300];

	if (d->r.flush_error_logged)
		return;
	targets_unsampled_list(&d->tg, unsampled, sizeof(unsampled));
	struct store_governor g = {
		.at_ns = real_ns(), .budget = d->gov.cfg.budget, .cpu = d->gov.last_usage,
		.min_scale = d->gov.cfg.min_scale, .ticks = d->gov.ticks,
		.lowered = d->gov.lowered, .raised = d->gov.raised,
		.action = governor_action_name(act), .changed_ns = d->gov_changed_ns,
		.decision = d->gov.last, .history = hist,
		.rss_bytes = self_rss_bytes(), .cache_bytes = store_cache_used(d->r.store),
		.procs_held = d->r.procs.procs.n, .aggs_held = agg_count(&d->r.aggs),
		.targets = { .traced = d->tg.ntraced, .unsampled = targets_unsampled_count(&d->tg),
			     .skipped = d->tg.skipped_full, .unsampled_list = unsampled },
	};

	governor_history(&d->gov, hist, sizeof(hist));
	for (unsigned i = 0; i < d->gov.nsrc && i < STORE_GOV_MAX_SOURCES; i++) {
		struct store_gov_source *src = &g.src[g.nsrc++];

		*src = (struct store_gov_source){ .name = d->gov.src[i].name,
			.scale = d->gov.src[i].scale, .rate = -1, .events = d->gov.src[i].events };
		if ((int)i == d->gov_alloc) {
			src->rate = d->keep * 100;
			src->unit = "% of samples kept";
		} else if ((int)i == d->gov_access) {
			src->rate = src_soft_rate(d->r.soft, &src->unit);
		} else if ((int)i == d->gov_watch) {
			struct watch_counts wc;

			watch_get_counts(d->r.watch, &wc);
			src->rate = wc.traps_per_s;
			src->unit = "traps/s allowed";
		}
	}
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

/* Events of each scaled source since the previous tick. */
static void governor_events(struct daemon *d, uint64_t ev[GOV_MAX_SOURCES])
{
	memset(ev, 0, GOV_MAX_SOURCES * sizeof(ev[0]));
	if (d->gov_alloc >= 0) {
		uint64_t n = sampled_records(d->smp);

		ev[d->gov_alloc] = n - d->gov_events_alloc;
		d->gov_events_alloc = n;
	}
	if (d->gov_access >= 0) {
		struct src_soft_stats st;

		src_soft_stats(d->r.soft, &st);
		ev[d->gov_access] = st.events - d->gov_events_access;
		d->gov_events_access = st.events;
	}
	if (d->gov_watch >= 0) {
		struct watch_counts wc;

		watch_get_counts(d->r.watch, &wc);
		uint64_t n = wc.traps + wc.inproc_traps;

		ev[d->gov_watch] = n - d->gov_traps;
		d->gov_traps = n;
	}
}

/* The governor's scales in force: thinning of the sampled records, the access source's
 * sampling rate. What it cannot lower: exact mode's traps and records, and the traps the
 * sampler's probes cost in the workloads (thinning happens after them). */
static void governor_apply(struct daemon *d)
{
	if (d->gov_alloc >= 0)
		d->keep = sampled_set_keep(d->smp, governor_scale(&d->gov, (unsigned)d->gov_alloc));
	if (d->gov_access >= 0) {
		int e = src_soft_set_scale(d->r.soft, governor_scale(&d->gov, (unsigned)d->gov_access));
		if (e < 0)
			log_warn("governor: changing the access sampling rate: %s", strerror(-e));
	}
	if (d->gov_watch >= 0) {
		double allowed = d->watch_traps_full * governor_scale(&d->gov, (unsigned)d->gov_watch);

		watch_set_budget(d->r.watch, allowed);
		/* The processes whose sampler arms watches: as many as the allowed traps pay
		 * for at the last tick's rate per process (all at full scale; at least one). */
		size_t cap = WLINKS_MAX;
		if (governor_scale(&d->gov, (unsigned)d->gov_watch) < 1 && d->inproc_per_link > 0)
			cap = allowed / d->inproc_per_link < 1 ? 1 : (size_t)(allowed / d->inproc_per_link);
		wlinks_set_cap(&d->tg.wl, cap);
	}
}

static void governor_job(struct daemon *d, int64_t now)
{
	uint64_t cpu = cpu_ns() + namer_cpu_ns(&d->namer), ev[GOV_MAX_SOURCES];

	governor_events(d, ev);
	if (d->gov_watch >= 0) {
		struct watch_counts wc;

		struct wlinks_stats ws;

		watch_get_counts(d->r.watch, &wc);
		wlinks_get_stats(&d->tg.wl, &ws);
		d->inproc_per_link = ws.n && now > d->gov_at ?
			(double)(wc.inproc_traps - d->inproc_seen) * 1000.0 / (double)(now - d->gov_at) /
			(double)ws.n : 0;
		d->inproc_seen = wc.inproc_traps;
	}
	/* The targets' time in the watch's traps is this daemon's cost as well. */
	uint64_t traps_ns = d->gov_watch >= 0 ?
		(uint64_t)(watch_cpu_of(d->r.watch, (double)ev[d->gov_watch]) * 1e9) : 0;
	enum gov_action act = governor_tick(&d->gov, (uint64_t)(now - d->gov_at) * 1000000ULL,
					    (cpu > d->gov_cpu_ns ? cpu - d->gov_cpu_ns : 0) + traps_ns,
					    ev);   /* a namer that died takes its CPU time with it */
	d->gov_cpu_ns = cpu;
	d->gov_at = now;
	if (act == GOV_LOWER || act == GOV_RAISE) {
		d->gov_changed_ns = real_ns();
		governor_apply(d);
	}
	targets_prune(&d->tg);
	governor_store(d, act);
	uint64_t bare = targets_unsampled_count(&d->tg);
	char extra[256] = "";
	if (bare)
		snprintf(extra, sizeof(extra), ", %llu without the sampler", (unsigned long long)bare);
	if (d->r.mem_dropped_aggs)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 "; %llu aggregates dropped over memory_limit",
			 (unsigned long long)d->r.mem_dropped_aggs);
	struct wlinks_stats ws;
	wlinks_get_stats(&d->tg.wl, &ws);
	if (ws.queued)            /* the in-process watches' links and what making them cost */
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 "; watch links %zu (%llu queued, %llu made, %.0f us each, %llu failed)", ws.n,
			 (unsigned long long)ws.queued, (unsigned long long)ws.attached,
			 ws.attached ? (double)ws.attach_ns / 1e3 / (double)ws.attached : 0.0,
			 (unsigned long long)ws.failed);
	notify_status("%zu processes%s, %llu events, %s", d->tg.ntraced, extra,
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
	if (nc.alloc != d->cfg.alloc || nc.access != d->cfg.access ||
	    nc.access_freq_hz != d->cfg.access_freq_hz || nc.access_period != d->cfg.access_period)
		log_warn("daemon: [sampling] alloc/access/access_freq/access_period changes take "
			 "effect on restart");
	if (nc.cache_bytes != d->cfg.cache_bytes && store_set_cache(d->r.store, nc.cache_bytes))
		log_warn("daemon: %s", store_errmsg(d->r.store));
	free(nc.db);
	nc.db = d->cfg.db;       /* keep the open store's path */
	d->cfg.db = NULL;
	nc.alloc = d->cfg.alloc;
	nc.access = d->cfg.access;
	nc.access_freq_hz = d->cfg.access_freq_hz;
	nc.access_period = d->cfg.access_period;
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
			d->stop_at = mono_ms();
			snprintf(d->stop_reason, sizeof(d->stop_reason), "stopped by %s",
				 strsignal((int)si.ssi_signo));
		}
	}
}

/* Everything queued, everything still live, one commit, within the stop's shares of
 * DAEMON_STOP_BOUND_MS from the signal (stop.h): what does not fit is counted, and SQLite
 * waits for a lock at most until the commit's deadline. */
static void final_flush(struct daemon *d, int64_t stop_ms)
{
	int64_t deadline = stop_ms + STOP_FLUSH_MS;

	stop_drain(&d->r, stop_ms);
	uint64_t end = (uint64_t)mono_ms() * 1000000ULL;
	if (d->smp)
		sampled_reap(d->smp, 0, 0, end, (uint32_t)sched_getcpu());
	else
		exact_reap(&d->r, 0, 0, end, (uint32_t)sched_getcpu());
	access_finish(&d->r, end);
	int err = -ETIMEDOUT;

	for (int64_t left; (left = deadline - mono_ms()) > 0;) {
		store_set_busy_timeout(d->r.store, (int)left);
		if (!(err = recorder_flush(&d->r, d->stop_reason)))
			break;
		if (deadline - mono_ms() > DAEMON_FLUSH_RETRY_MS)
			usleep(DAEMON_FLUSH_RETRY_MS * 1000);
		else
			break;
	}
	if (err)
		log_error("daemon: final flush failed: %s (at most %llu ms of data lost)",
			  err == -ETIMEDOUT ? "out of time" : store_errmsg(d->r.store),
			  (unsigned long long)d->cfg.flush_interval_ms);
	else if (d->r.stop_records || d->r.stop_aggs)
		log_warn("daemon: stopped within %d ms: %llu ring records and %llu aggregates "
			 "(%llu objects) dropped, counted in query status", DAEMON_STOP_BOUND_MS,
			 (unsigned long long)d->r.stop_records, (unsigned long long)d->r.stop_aggs,
			 (unsigned long long)d->r.stop_objects);
	store_set_busy_timeout(d->r.store, 0);
	/* New stacks' names, until the stop's naming deadline; the rest, the next daemon. */
	if (d->namer.pid && !namer_stop(&d->namer, stop_ms + STOP_NAME_MS))
		log_warn("daemon: the namer ran out of time: frames left bare are named by the "
			 "next daemon");
	store_checkpoint(d->r.store);
}

static int64_t min_deadline(const struct daemon *d)
{
	int64_t t = d->next_flush;
	const int64_t o[] = { d->next_gov, d->next_maint, d->next_ckpt, d->next_rescan, d->next_wd,
			      d->tg.next_recheck };

	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++)
		if (o[i] && o[i] < t)
			t = o[i];
	return t;
}

/* The allocation mode and the access source, as the config asks. 0, or -errno after the
 * error. */
static int open_sources(struct daemon *d)
{
	int r;

	d->r.cmd = "daemon";
	/* Without a namer, new stacks are named after their rows commit, for a share of each
	 * interval; a running flush writes for half an interval at most. */
	d->r.sym_slice_ms = (int64_t)d->cfg.flush_interval_ms / DAEMON_SYMBOLIZE_SHARE + 1;
	d->r.flush_write_ms = (int64_t)d->cfg.flush_interval_ms / 2 + 1;
	if (d->r.flush_write_ms > DAEMON_FLUSH_WRITE_MS)
		d->r.flush_write_ms = DAEMON_FLUSH_WRITE_MS;
	d->r.watch_all_exec = true;
	/* Contexts get file:line and inline chains as record's do, at flush (write_agg), never
	 * on the ring reader's path; the cache is bounded. Without it: ELF symbols only. */
	struct symcache_opts so = { .max_bytes = DAEMON_SYMCACHE_BYTES,
				    .debug = { .debuginfod = true } };
	if (symcache_new(&d->r.symcache, &so) < 0)
		d->r.symcache = NULL;
	d->r.mark_at_exec = d->cfg.alloc == CFG_ALLOC_SAMPLED;   /* see bpf/exec_watch.bpf.h */
	d->r.per_target_probes = d->cfg.alloc == CFG_ALLOC_EXACT && d->cfg.exact_per_process;   /* issue 18: targets.c */
	d->r.lifecycle = targets_lifecycle;
	d->r.lifecycle_arg = &d->tg;
	if (d->cfg.alloc == CFG_ALLOC_SAMPLED) {
		int e = sampled_open(&d->smp, &d->r);
		d->r.sampled = d->smp;
		if (e < 0)
			return e;
	} else {
		d->r.alloc_off = d->cfg.alloc == CFG_ALLOC_OFF;   /* no allocator probe at all */
		if ((r = exact_open(&d->r)) < 0)
			return r;
	}
	/* The sampler's in-process watches, in the selected processes only (watch_links.h);
	 * MEMPROFD_WATCH_INPROCESS=0 leaves them off, as for record. */
	const char *inproc = getenv("MEMPROFD_WATCH_INPROCESS");
	d->r.watch_inprocess = d->smp && !(inproc && !strcmp(inproc, "0"));
	/* auto falls back to no access sampling (and says why); a named source must open. */
	r = access_setup(&d->r, config_access_name(d->cfg.access), d->cfg.access != CFG_ACCESS_AUTO,
			 d->cfg.access_freq_hz, d->cfg.access_period);
	if (r < 0)
		return r;
	if (targets_init(&d->tg, &d->r, d->smp, &d->cfg) < 0)
		return log_error_errno(-ENOMEM, "daemon: out of memory");
	exec_gate_init(&d->gate, &d->r, &d->tg);
	d->r.gate = exec_gate;
	d->r.gate_arg = &d->gate;
	/* Its own sampler probed before any service preloading it starts. */
	if (d->smp)
		targets_preprobe(&d->tg, d->tg.sampler_hint);
	return 0;
}

/* The run's row in the store, with the settings the daemon runs under (JSON: the config
 * path is escaped, whatever bytes it holds). */
static int begin_run(struct daemon *d)
{
	_cleanup_free_ char *settings = NULL;
	size_t settings_len = 0;
	FILE *f = open_memstream(&settings, &settings_len);
	int err;

	if (!f)
		return log_error_errno(-ENOMEM, "daemon: out of memory");
	const char *access = d->r.attrib ? access_src_name(d->r.access.src) : "off";
	fputs("{\"config\":", f);
	fmt_json_str(f, d->cfg.path);
	fprintf(f, ",\"flush_ms\":%llu,\"bucket_s\":%d,\"cpu_budget\":%g,"
		"\"retention_s\":%llu,\"max_db_bytes\":%llu,\"access\":\"%s\",\"access_freq\":%llu,"
		"\"access_period\":%llu}",
		(unsigned long long)d->cfg.flush_interval_ms, AGG_BUCKET_SECONDS, d->cfg.cpu_budget,
		(unsigned long long)d->cfg.retention_s, (unsigned long long)d->cfg.max_db_bytes,
		access, (unsigned long long)d->cfg.access_freq_hz,
		(unsigned long long)d->cfg.access_period);
	if (fclose(f))
		return log_error_errno(-ENOMEM, "daemon: out of memory");
	struct store_run run = { .command = "daemon", .alloc_mode = config_alloc_name(d->cfg.alloc),
				 .access_mode = d->r.attrib ? config_access_name(d->cfg.access) : "off",
				 .settings = settings, .started_ns = real_ns() };
	err = store_begin(d->r.store);
	if (!err && (err = store_end_crashed_runs(d->r.store)) > 0)
		err = 0;   /* runs whose writer died, ended at their last flush */
	if (!err)
		err = store_run_begin(d->r.store, &run, &d->r.run_id);
	if (!err)
		err = store_commit(d->r.store);
	if (err) {
		store_rollback(d->r.store);
		return log_error_errno(err, "daemon: %s: %s", d->cfg.db, store_errmsg(d->r.store));
	}
	return 0;
}

/* The lock, the store, the sources and the run's row: 0 or -errno after the error. */
static int start(struct daemon *d)
{
	char errbuf[512];
	int err;

	err = lock_db(d);
	if (err < 0)
		return err;
	/* Before the store is open: no SQLite state crosses the fork. */
	const int owner_fds[] = { d->owner.db_fd, d->owner.pid_fd, d->sfd };
	if ((err = namer_start(&d->namer, d->cfg.db, owner_fds, 3)) < 0)
		log_warn("daemon: no namer (%s): frames are named in the loop", strerror(-err));
	d->r.names_elsewhere = d->namer.pid != 0;
	err = store_open(&d->r.store, d->cfg.db, STORE_RDWR, errbuf, sizeof(errbuf));
	if (err)
		return log_error_errno(err, "daemon: %s", errbuf);
	if (store_set_cache(d->r.store, d->cfg.cache_bytes))
		log_warn("daemon: %s", store_errmsg(d->r.store));
	/* A flush that finds the store locked fails soon and is retried at the next
	 * interval: the loop (and SIGTERM's deadline) never waits on SQLite for long. */
	store_set_busy_timeout(d->r.store, DAEMON_BUSY_TIMEOUT_MS);
	err = open_sources(d);
	if (err < 0)
		return err;
	if ((err = begin_run(d)) < 0)
		return err;
	namer_wake(&d->namer);   /* opens its store connection */
	return 0;
}

/* The governor's sources and every periodic job's first deadline (ms, monotonic). */
static void schedule_jobs(struct daemon *d)
{
	struct governor_cfg gc = { .budget = d->cfg.cpu_budget, .min_scale = d->cfg.min_scale };
	governor_init(&d->gov, &gc);
	/* What the governor can lower: thinning of sampled records and the access source's
	 * rate (spe's is fixed: its AUX reader decodes records at the configured interval). */
	d->keep = 1;
	d->gov_alloc = d->smp ? governor_add_source(&d->gov, "alloc") : -1;
	d->gov_access = d->r.soft ? governor_add_source(&d->gov, "access") : -1;
	d->gov_watch = -1;
	if (d->r.watch) {
		/* At full scale the traps may take half the budget, at most WATCH_CPU_SHARE. */
		double share = d->cfg.cpu_budget / 2 < WATCH_CPU_SHARE ? d->cfg.cpu_budget / 2 :
			       WATCH_CPU_SHARE;

		d->watch_traps_full = watch_traps_for(d->r.watch, share);
		watch_set_budget(d->r.watch, d->watch_traps_full);
		d->gov_watch = governor_add_source(&d->gov, "watch");
	}
	int64_t now = mono_ms();
	d->gov_at = now;
	d->gov_cpu_ns = cpu_ns() + namer_cpu_ns(&d->namer);
	d->wd_usec = notify_watchdog_usec();
	d->next_flush = now + (int64_t)d->cfg.flush_interval_ms;
	d->next_gov = now + (int64_t)d->cfg.governor_interval_s * MS_PER_S;
	d->next_maint = now + DAEMON_FIRST_MAINT_MS;
	d->next_ckpt = now + (int64_t)d->cfg.checkpoint_interval_s * MS_PER_S;
	d->next_wd = d->wd_usec ? now : 0;
	targets_rescan(&d->tg);
	d->next_rescan = d->cfg.rescan_interval_s ? now + (int64_t)d->cfg.rescan_interval_s * MS_PER_S : 0;
}

/* Every periodic job whose deadline has come, each rescheduled from now. */
static void run_due_jobs(struct daemon *d, int64_t now)
{
	targets_recheck(&d->tg, now);
	if (now >= d->next_flush) {
		/* Failures retry, logged once; meanwhile memory stays within the limit. A flush
		 * out of writing time goes on at the next wake-up, the loop's reads between. */
		bool behind = true;

		if (recorder_flush(&d->r, "running") == 0) {
			namer_wake(&d->namer);
			recorder_forget_exited(&d->r);
			behind = d->r.aggs.ndirty > 0;
		}
		if (behind)
			recorder_bound_memory(&d->r, d->cfg.memory_limit_bytes);
		d->next_flush = d->r.aggs.ndirty && !d->r.flush_error_logged ? now :
				now + (int64_t)d->cfg.flush_interval_ms;
	}
	if (now >= d->next_gov) {
		exec_gate_purge(&d->gate);   /* allocations of processes rejected at exec */
		targets_end_gone(&d->tg);    /* processes whose exit record never came */
		governor_job(d, now);
		d->next_gov = now + (int64_t)d->cfg.governor_interval_s * MS_PER_S;
	}
	if (d->next_rescan && now >= d->next_rescan) {
		targets_rescan(&d->tg);
		d->next_rescan = d->cfg.rescan_interval_s ? now + (int64_t)d->cfg.rescan_interval_s * MS_PER_S : 0;
	} else if (!d->next_rescan && d->cfg.rescan_interval_s) {
		d->next_rescan = now;         /* after a reload */
	}
	if (now >= d->next_maint) {
		maintenance_job(d);
		d->next_maint = now + (int64_t)d->cfg.maintenance_interval_s * MS_PER_S;
	}
	if (now >= d->next_ckpt) {
		store_checkpoint(d->r.store);   /* -EBUSY with a reader: next time */
		d->next_ckpt = now + (int64_t)d->cfg.checkpoint_interval_s * MS_PER_S;
	}
	if (d->next_wd && now >= d->next_wd) {
		notify_watchdog();
		d->next_wd = now + (int64_t)(d->wd_usec / 2000);
	}
}

/* Polls the rings and the signalfd until a stop: 0, or -errno if poll failed. */
static int event_loop(struct daemon *d)
{
	struct pollfd pfd[3] = {
		{ .fd = d->smp ? sampled_ring_fd(d->smp) : ring_buffer__epoll_fd(d->r.rb), .events = POLLIN },
		{ .fd = d->sfd, .events = POLLIN },
		{ .fd = d->r.soft ? src_soft_ring_fd(d->r.soft) : -1, .events = POLLIN },
	};
	bool more = false;   /* the last read ran out of its slice: read on without waiting */

	while (!d->stop) {
		int64_t wait = min_deadline(d) - mono_ms();

		if (wait < 0 || more)
			wait = 0;
		if (wait > DAEMON_MAX_WAIT_MS)
			wait = DAEMON_MAX_WAIT_MS;
		if (d->r.watch && wait > WATCH_POLL_MS)
			wait = WATCH_POLL_MS;    /* windows close (and open) at wake-ups */
		if (poll(pfd, 3, (int)wait) < 0 && errno != EINTR) {
			int e = errno;

			return log_error_errno(-e, "daemon: poll: %s", strerror(e));
		}
		/* Consume on every wake-up, not only on POLLIN: the kernel side wakes us only
		 * when the ring is a quarter full. Allocations first: their drain time is
		 * attribution's allocation watermark. */
		if ((d->smp ? sampled_poll(d->smp, 0, &more) : exact_poll(&d->r, 0, &more)) < 0) {
			snprintf(d->stop_reason, sizeof(d->stop_reason), "error: ring buffer");
			break;
		}
		if (access_poll(&d->r) < 0) {
			snprintf(d->stop_reason, sizeof(d->stop_reason), "error: access samples");
			break;
		}
		if (pfd[1].revents)
			on_signal(d);
		if (d->stop)
			break;
		run_due_jobs(d, mono_ms());
	}
	return 0;
}

static int run(struct daemon *d)
{
	int err;

	err = start(d);
	if (err < 0)
		return err;
	schedule_jobs(d);
	if (!d->cfg.ntargets)
		log_warn("daemon: %s has no [target] rules: nothing will be profiled", d->cfg.path);
	notify_ready(NULL);
	notify_status("%zu processes traced", d->tg.ntraced);
	err = event_loop(d);
	if (err < 0)
		return err;
	notify_stopping();
	final_flush(d, d->stop_at ? d->stop_at : mono_ms());
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

	if (!d) {
		log_error("daemon: out of memory");
		return 1;
	}
	d->sfd = -1;
	d->owner.db_fd = d->owner.pid_fd = -1;
	if (config_load(&d->cfg, path, &errs)) {
		print_errors(errs);
		free(errs);
		free(d);
		return 2;
	}
	if (check) {
		if (db_owner_check(d->cfg.db)) {
			config_free(&d->cfg);
			free(d);
			return 1;
		}
		printf("%s: ok\n", path);
		config_free(&d->cfg);
		free(d);
		return 0;
	}
	int rc = 1;
	if (d->cfg.alloc == CFG_ALLOC_OFF && d->cfg.access == CFG_ACCESS_OFF) {
		log_error("daemon: %s: [sampling] alloc = off with access = off records nothing", path);
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
		rc = run(d) < 0 ? 1 : 0;
	}
	namer_stop(&d->namer, 0);   /* a start that failed: none left running */
	/* Links before the objects they belong to (libbpf's USDT links use theirs). */
	targets_free(&d->tg);
	exec_gate_free(&d->gate);
	access_close(&d->r);
	sampled_close(d->smp);
	exact_close(&d->r);
	if (d->r.symcache)
		symcache_free(d->r.symcache);
	agg_free(&d->r.aggs);
	proctab_free(&d->r.procs);
	recorder_symbols_free(&d->r);
	interner_free(&d->r.in);
	store_close(d->r.store);
	if (d->sfd >= 0)
		close(d->sfd);
	db_owner_release(&d->owner);
	sigprocmask(SIG_SETMASK, &orig, NULL);
out:
	config_free(&d->cfg);
	free(d);
	return rc;
}
