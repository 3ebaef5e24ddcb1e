/* Hardware-watchpoint windows over the sampler's objects (watch.h). Invariants: at most
 * WATCH_SLOTS windows are open, each on a live object of a live process; a window's
 * traps are bounded by max_hits per thread and reserved from the token bucket before it
 * opens (unused ones are given back when it closes), so the traps taken never exceed
 * the budget plus one window's worth. Lookups are linear over WATCH_OBJECTS_MAX objects:
 * the sampler keeps about one object per 512 KiB live, so the table stays short. */
#include <dirent.h>
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "daemon/access/watch.h"

struct wobj {
	uint32_t tgid;
	uint64_t start_ns, addr, size;
	bool dead;                /* freed or its process ended: not watched any more */
	uint64_t seq;             /* order of watch_add */
	struct watch_est est;
	double rate_sum;          /* sum of the windows' rates */
	uint64_t added_ns;        /* when watch_add saw it (CLOCK_MONOTONIC) */
	bool in_capped;           /* the sampler's watch took its K traps (disarmed) */
	uint64_t in_hits;         /* the sampler's watch from its allocation: traps, */
	double in_span_s;         /* ... the wall time it covered (traps included), */
	double in_watched_s;      /* ... and that time less the traps' */
	uint64_t late_windows, late_hits;   /* the recorder's windows (later in its life) */
	double late_watched_s;
	struct wpart {            /* its last windows, undone if opened after its free */
		uint64_t closed_ns, hits;
		double rate, watched_s;
		bool sat;
	} last[WATCH_UNDO];
	unsigned nlast;           /* entries of last in use (newest at nlast - 1) */
};

struct window {
	int obj;                  /* index in objs, -1: slot free */
	uint64_t opened_ns;
	int fds[WATCH_THREADS_MAX];
	void *rings[WATCH_THREADS_MAX];     /* each watch's ring: the time of its max_hits-th trap */
	uint64_t armed_ns[WATCH_THREADS_MAX];
	unsigned nfds;
};

struct watch {
	struct watch_opts o;
	double trap_s;            /* one trap's cost in seconds */
	struct wobj *objs;
	unsigned nobjs;
	unsigned next;            /* round-robin cursor over objs */
	struct window win[WATCH_SLOTS];
	double tokens;            /* traps that may still be spent */
	uint64_t last_tick_ns;
	uint64_t rng;
	uint64_t seq;             /* objects added so far */
	struct watch_counts c;
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One read/write watch of WATCH_GRANULE bytes at addr in thread tid (0: the caller),
 * disarming itself after max_hits traps once enabled by PERF_EVENT_IOC_REFRESH (which the
 * kernel refuses for inherited events: threads born during a window are not watched). */
static int bp_open(pid_t tid, uint64_t addr, uint32_t max_hits)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a),
		.bp_type = HW_BREAKPOINT_RW, .bp_addr = addr, .bp_len = HW_BREAKPOINT_LEN_8,
		.sample_period = max_hits, .disabled = 1,
		.sample_type = PERF_SAMPLE_TIME, .use_clockid = 1, .clockid = CLOCK_MONOTONIC,
		.exclude_kernel = 1, .exclude_hv = 1,
		.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
	};
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 1) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static volatile uint64_t calib_word;

/* One run of the self-test: seconds per trap of a loop of accesses under a watch, less
 * the same loop without it. */
static int calibrate_run(double *trap_s)
{
	uint64_t t0 = now_ns();

	for (int i = 0; i < WATCH_CALIBRATE_HITS; i++)
		calib_word = calib_word + 1;
	uint64_t plain = now_ns() - t0;
	int fd = bp_open(0, (uint64_t)(uintptr_t)&calib_word, 2 * WATCH_CALIBRATE_HITS + 1);

	if (fd < 0)
		return fd;
	t0 = now_ns();
	for (int i = 0; i < WATCH_CALIBRATE_HITS; i++)
		calib_word = calib_word + 1;
	uint64_t watched = now_ns() - t0, v[3] = { 0 };
	ssize_t n = read(fd, v, sizeof(v));

	close(fd);
	if (n != sizeof(v) || !v[0])
		return -EOPNOTSUPP;     /* armed but blind: no usable breakpoint PMU */
	*trap_s = (double)(watched > plain ? watched - plain : 1) / 1e9 / (double)v[0];
	return 0;
}

/* The cost of one trap: the cheapest run, after the first two runs that agree within
 * WATCH_CALIBRATE_AGREE (at most WATCH_CALIBRATE_RUNS). It runs in record's start-up:
 * on an idle machine two runs of WATCH_CALIBRATE_HITS traps (~5 ms), more under load. */
static int calibrate(struct watch *w)
{
	double prev = INFINITY;

	w->trap_s = INFINITY;
	for (int i = 0; i < WATCH_CALIBRATE_RUNS; i++) {
		double t;
		int r = calibrate_run(&t);

		if (r < 0)
			return r;
		if (t < w->trap_s)
			w->trap_s = t;
		if (fabs(t - prev) <= WATCH_CALIBRATE_AGREE * fmin(t, prev))
			break;
		prev = t;
	}
	w->c.trap_ns = w->trap_s * 1e9;
	return 0;
}

int watch_open(struct watch **out, const struct watch_opts *o)
{
	struct watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	if (o)
		w->o = *o;
	if (!w->o.max_hits)
		w->o.max_hits = WATCH_MAX_HITS;
	if (!w->o.window_ns)
		w->o.window_ns = WATCH_WINDOW_NS;
	if (!w->o.slots || w->o.slots > WATCH_SLOTS)
		w->o.slots = WATCH_SLOTS;
	w->objs = calloc(WATCH_OBJECTS_MAX, sizeof(*w->objs));
	for (int i = 0; i < WATCH_SLOTS; i++)
		w->win[i].obj = -1;
	w->rng = now_ns() | 1;
	if (!w->objs) {
		free(w);
		return -ENOMEM;
	}
	if ((r = calibrate(w)) < 0) {
		watch_close(w);
		return r;
	}
	watch_set_budget(w, w->o.traps_per_s > 0 ? w->o.traps_per_s :
			 watch_traps_for(w, WATCH_CPU_SHARE));
	*out = w;
	return 0;
}

static size_t ring_bytes(void)
{
	return (size_t)WATCH_RING_PAGES * (size_t)sysconf(_SC_PAGESIZE);
}

static void window_close_fds(struct window *win)
{
	for (unsigned i = 0; i < win->nfds; i++) {
		if (win->rings[i])
			munmap(win->rings[i], ring_bytes());
		close(win->fds[i]);
	}
	win->nfds = 0;
	win->obj = -1;
}

/* The time of the first sample in a watch's ring (the trap that disarmed it), 0 if none. */
static uint64_t ring_first_time(const void *ring)
{
	const struct perf_event_mmap_page *pg = ring;
	const uint8_t *data = (const uint8_t *)ring + pg->data_offset;
	uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE), off = pg->data_tail;

	while (off + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		uint64_t t;
		size_t at = (size_t)(off % pg->data_size);

		if (at + sizeof(h) + sizeof(t) > pg->data_size)
			return 0;   /* wrapped: one sample per window never wraps a page */
		memcpy(&h, data + at, sizeof(h));
		if (h.size < sizeof(h))
			return 0;
		if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + sizeof(t)) {
			memcpy(&t, data + at + sizeof(h), sizeof(t));
			return t;
		}
		off += h.size;
	}
	return 0;
}

void watch_close(struct watch *w)
{
	if (!w)
		return;
	for (int i = 0; i < WATCH_SLOTS; i++)
		window_close_fds(&w->win[i]);
	free(w->objs);
	free(w);
}

/* The live entry at addr (the region reuses a freed object's pages at once, so a dead one
 * waiting to be taken may share its address); with dead, the oldest dead one, else the
 * live one. */
static int find(const struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr, bool dead)
{
	int best = -1;

	for (unsigned i = 0; i < w->nobjs; i++) {
		const struct wobj *o = &w->objs[i];

		if (o->addr != addr || o->tgid != tgid || o->start_ns != start_ns)
			continue;
		if (!dead && !o->dead)
			return (int)i;
		if (dead && (best < 0 || (o->dead && (!w->objs[best].dead || o->seq < w->objs[best].seq))))
			best = (int)i;
	}
	return best;
}

int watch_add(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t size)
{
	if (w->nobjs == WATCH_OBJECTS_MAX) {
		w->c.dropped_objects++;
		return -ENOSPC;
	}
	w->objs[w->nobjs++] = (struct wobj){ .tgid = tgid, .start_ns = start_ns, .addr = addr,
					     .size = size ? size : 1, .seq = ++w->seq,
					     .added_ns = now_ns() };
	w->c.objects++;
	return 0;
}

/* Per thread: hits over the wall time it was watched, less the traps' own time. A watch
 * that disarmed (max_hits reached) was watched until its last trap (t_k, from its ring);
 * one that did not, for the whole window. Returns the rate; *sat when traps took most
 * of the time (the rate is then a lower bound). */
static double thread_rate(const struct watch *w, uint32_t k, const uint64_t v[3], double wall_s,
			  double to_k_s, uint64_t *hits, double *watched_s, bool *sat)
{
	double h = (double)v[0], t = v[0] >= k && to_k_s > 0 ? to_k_s : wall_s;
	double trap = h * w->trap_s, eff = t - trap;

	/* Traps took most of the time (a target's trap can cost more than the calibration
	 * loop's, hence the margin): the thread was trapping back to back, and the true rate
	 * is at least what one trap per trap cost shows. */
	if (v[0] >= k && eff < WATCH_SATURATED * trap) {
		*sat = true;
		eff = trap;
	} else if (eff < trap) {
		eff = trap > 0 ? trap : t;
	}
	if (eff <= 0)
		return 0;
	*hits += v[0];
	*watched_s += eff;
	return h / eff;
}

/* Reads and closes a window: the object gets one more rate (the sum over its threads). */
static void window_end(struct watch *w, struct window *win, uint64_t now)
{
	struct wobj *o = &w->objs[win->obj];
	double wall_s = (double)(now - win->opened_ns) / 1e9, rate = 0, watched = 0;
	uint64_t hits = 0;
	bool sat = false;

	for (unsigned i = 0; i < win->nfds; i++) {
		uint64_t v[3], tk = win->rings[i] ? ring_first_time(win->rings[i]) : 0;
		double to_k = tk > win->armed_ns[i] ? (double)(tk - win->armed_ns[i]) / 1e9 : 0;

		if (read(win->fds[i], v, sizeof(v)) == sizeof(v))
			rate += thread_rate(w, w->o.max_hits, v, wall_s, to_k, &hits, &watched, &sat);
	}
	/* Unused reservations go back to the bucket. */
	w->tokens += (double)win->nfds * w->o.max_hits - (double)hits;
	w->c.traps += hits;
	w->c.windows++;
	o->est.windows++;
	o->est.hits += hits;
	o->est.saturated += sat;
	o->est.watched_s += win->nfds ? watched / win->nfds : 0;
	o->rate_sum += rate;
	o->late_windows++;
	o->late_hits += hits;
	o->late_watched_s += win->nfds ? watched / win->nfds : 0;
	if (o->nlast == WATCH_UNDO)
		memmove(o->last, o->last + 1, (WATCH_UNDO - 1) * sizeof(o->last[0])), o->nlast--;
	o->last[o->nlast++] = (struct wpart){ .closed_ns = now, .hits = hits, .rate = rate,
					      .watched_s = win->nfds ? watched / win->nfds : 0, .sat = sat };
	window_close_fds(win);
}

int watch_report(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		 uint64_t hits, uint64_t watched_ns, uint32_t k, bool capped, bool other_thread)
{
	int i = find(w, tgid, start_ns, addr, false);
	uint64_t v[3] = { hits, watched_ns, watched_ns }, got = 0;
	double s = (double)watched_ns / 1e9, watched = 0, rate;
	bool sat = false;

	if (i < 0)
		return -ENOENT;
	if (!k || (capped && hits < k))
		k = hits ? (uint32_t)hits : 1;
	rate = thread_rate(w, k, v, s, capped ? s : 0, &got, &watched, &sat);
	struct wobj *o = &w->objs[i];

	o->est.windows++;
	o->est.hits += got;
	o->est.saturated += sat;
	o->est.watched_s += watched;
	o->rate_sum += rate;
	o->in_hits += got;
	o->in_capped |= capped;
	o->in_span_s += s;
	o->in_watched_s += watched;
	w->c.inproc++;
	w->c.inproc_traps += hits;
	w->c.inproc_shared += other_thread;
	return 0;
}

void watch_count_stray(struct watch *w, unsigned n)
{
	w->c.inproc_stray += n;
}

static void free_at(struct watch *w, int i)
{
	w->objs[i].dead = true;
	for (int s = 0; s < WATCH_SLOTS; s++)
		if (w->win[s].obj == i)
			window_end(w, &w->win[s], now_ns());
}

void watch_free(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr)
{
	int i = find(w, tgid, start_ns, addr, false);

	if (i >= 0)
		free_at(w, i);
}

void watch_freed(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t free_ns)
{
	int i = find(w, tgid, start_ns, addr, false);

	for (int s = 0; i >= 0 && s < WATCH_SLOTS; s++)
		if (w->win[s].obj == i) {
			/* Still open after the free: part of its traps may be another object's
			 * (the region reuses pages at once). Dropped; reservations go back. */
			w->tokens += (double)w->win[s].nfds * w->o.max_hits;
			w->c.late_windows++;
			window_close_fds(&w->win[s]);
		}
	/* Windows closed (at a tick) after the free, before it was read: the same. */
	for (struct wobj *o = i >= 0 ? &w->objs[i] : NULL; o && o->nlast &&
	     o->last[o->nlast - 1].closed_ns > free_ns; o->nlast--) {
		const struct wpart *l = &o->last[o->nlast - 1];

		o->est.windows--;
		o->est.hits -= l->hits;
		o->est.saturated -= l->sat;
		o->est.watched_s -= l->watched_s;
		o->rate_sum -= l->rate;
		o->late_windows--;
		o->late_hits -= l->hits;
		o->late_watched_s -= l->watched_s;
		w->c.late_windows++;
	}
	if (i >= 0)
		free_at(w, i);
}

void watch_process_exit(struct watch *w, uint32_t tgid, uint64_t start_ns)
{
	for (unsigned i = 0; i < w->nobjs; i++)
		if (w->objs[i].tgid == tgid && w->objs[i].start_ns == start_ns)
			watch_free(w, tgid, start_ns, w->objs[i].addr);
}

static void fill_est(const struct wobj *o, struct watch_est *e)
{
	*e = o->est;
	e->rate = e->windows ? o->rate_sum / (double)e->windows : 0;
	/* The sampler's watch saw the start of its life; the rest is rated by the recorder's
	 * later windows when it had any (a table built then left alone is not rated by
	 * its construction), else by the start's rate. */
	e->early_hits = (double)o->in_hits;
	e->early_span_s = o->in_span_s;
	e->early_capped = o->in_capped;
	e->rest_rate = o->late_watched_s > 0 ? (double)o->late_hits / o->late_watched_s :
		       o->in_watched_s > 0 ? (double)o->in_hits / o->in_watched_s : e->rate;
	if (e->hits) {
		double rel = WATCH_Z / sqrt((double)e->hits);

		e->lo = e->rate * (rel < 1 ? 1 - rel : 0);
		e->hi = e->rate * (1 + rel);
	} else {
		e->lo = 0;
		e->hi = e->watched_s > 0 ? 3.0 / e->watched_s : INFINITY;
	}
}

bool watch_take(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		struct watch_est *out)
{
	int i = find(w, tgid, start_ns, addr, true);

	if (i < 0)
		return false;
	free_at(w, i);
	fill_est(&w->objs[i], out);
	/* Swap-remove; a window on the moved object follows it. */
	unsigned last = --w->nobjs;

	if ((unsigned)i != last) {
		w->objs[i] = w->objs[last];
		for (int s = 0; s < WATCH_SLOTS; s++)
			if (w->win[s].obj == (int)last)
				w->win[s].obj = i;
	}
	if (w->next > w->nobjs)
		w->next = 0;
	return out->windows > 0;
}

/* Opens a window on object i: one watch per thread of its process. */
static int window_open(struct watch *w, struct window *win, int i, uint64_t now)
{
	const struct wobj *o = &w->objs[i];
	char path[64];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%u/task", o->tgid);
	if (!(d = opendir(path)))
		return -errno;
	w->rng ^= w->rng << 13, w->rng ^= w->rng >> 7, w->rng ^= w->rng << 17;
	uint64_t granules = (o->size + WATCH_GRANULE - 1) / WATCH_GRANULE;
	uint64_t at = (o->addr & ~(uint64_t)(WATCH_GRANULE - 1)) + (w->rng % granules) * WATCH_GRANULE;

	win->nfds = 0;
	int busy = 0;
	while ((de = readdir(d)) && win->nfds < WATCH_THREADS_MAX) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end || tid <= 0)
			continue;
		int fd = bp_open((pid_t)tid, at, w->o.max_hits);

		if (fd < 0) {
			w->c.open_errors++;
			busy += fd == -ENOSPC || fd == -EBUSY;   /* its debug registers are taken */
			continue;
		}
		void *ring = mmap(NULL, ring_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		win->rings[win->nfds] = ring == MAP_FAILED ? NULL : ring;
		win->armed_ns[win->nfds] = now_ns();
		win->fds[win->nfds++] = fd;
	}
	closedir(d);
	if (!win->nfds)
		return busy ? -EBUSY : -ESRCH;
	win->obj = i;
	win->opened_ns = now;
	return 0;
}

static bool watched_now(const struct watch *w, int i)
{
	for (int s = 0; s < WATCH_SLOTS; s++)
		if (w->win[s].obj == i)
			return true;
	return false;
}

/* The live object not in a window with the fewest windows so far, the largest among
 * equals (round-robin among equal sizes), so that the budget reaches every object before
 * any gets a second and the bytes first; with the sampler's watches on, objects younger
 * than min_age_ns (their own watch covers them) wait, and only the windows that came
 * after theirs count. -1 if none. */
static int next_object(struct watch *w, uint64_t now)
{
	int best = -1;

	for (unsigned k = 0; k < w->nobjs; k++) {
		unsigned i = (w->next + k) % w->nobjs;
		const struct wobj *o = &w->objs[i], *b = best >= 0 ? &w->objs[best] : NULL;

		if (o->dead || watched_now(w, (int)i) || now - o->added_ns < w->o.min_age_ns)
			continue;
		uint64_t n = w->o.min_age_ns ? o->late_windows : o->est.windows;
		uint64_t bn = !b ? 0 : w->o.min_age_ns ? b->late_windows : b->est.windows;
		if (!b || n < bn || (n == bn && o->size > b->size))
			best = (int)i;
	}
	if (best >= 0)
		w->next = ((unsigned)best + 1) % w->nobjs;
	return best;
}

int watch_tick(struct watch *w, uint64_t now)
{
	int closed = 0;

	if (w->last_tick_ns) {
		double cap = w->o.traps_per_s;   /* at most one second's worth saved up */

		w->tokens += w->o.traps_per_s * (double)(now - w->last_tick_ns) / 1e9;
		if (w->tokens > cap)
			w->tokens = cap;
	}
	w->last_tick_ns = now;
	for (int s = 0; s < WATCH_SLOTS; s++)
		if (w->win[s].obj >= 0 && now - w->win[s].opened_ns >= w->o.window_ns) {
			window_end(w, &w->win[s], now);
			closed++;
		}
	for (int s = 0; s < (int)w->o.slots; s++) {
		if (w->win[s].obj >= 0)
			continue;
		int i = next_object(w, now);

		if (i < 0 || w->tokens < w->o.max_hits)
			break;
		int e = window_open(w, &w->win[s], i, now);

		if (e == -EBUSY)
			continue;                   /* e.g. the sampler's own watches: later */
		if (e < 0) {
			w->objs[i].dead = true;     /* its process is gone */
			continue;
		}
		w->tokens -= (double)w->win[s].nfds * w->o.max_hits;
	}
	return closed;
}

void watch_set_budget(struct watch *w, double traps_per_s)
{
	w->o.traps_per_s = traps_per_s < 1 ? 1 : traps_per_s;
	w->c.traps_per_s = w->o.traps_per_s;
}

double watch_cpu_of(const struct watch *w, double traps_per_s)
{
	return traps_per_s * w->trap_s;
}

double watch_traps_for(const struct watch *w, double cpu)
{
	return cpu / w->trap_s;
}

void watch_get_counts(const struct watch *w, struct watch_counts *out)
{
	*out = w->c;
}

double watch_est_accesses(const struct watch_est *e, uint64_t size, uint64_t lifetime_ns)
{
	double granules = (double)((size + WATCH_GRANULE - 1) / WATCH_GRANULE);
	double life = (double)lifetime_ns / 1e9;

	if (e->early_span_s <= 0)
		return e->rate * granules * life;
	double rest = life > e->early_span_s ? life - e->early_span_s : 0;

	return granules * (e->early_hits + e->rest_rate * rest);
}
