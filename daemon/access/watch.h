/* Access rates of the sampler's objects by hardware watchpoints (PERF_TYPE_BREAKPOINT,
 * read/write, WATCH_GRANULE bytes): a window watches one random granule of one live
 * object in every thread its process had when the window opened, for about WATCH_WINDOW_NS, each thread's watch disarming itself after max_hits traps
 * (PERF_EVENT_IOC_REFRESH). The rate of a window is hits per second of watched time,
 * less the time the traps themselves took (calibrated at open); objects are watched in
 * turn. Costs: one trap per watched access (~11-50 us under a hypervisor) on the target,
 * bounded by a token bucket of traps_per_s; on the daemon, one perf_event_open, read and
 * close per thread per window. At most WATCH_SLOTS windows at once (debug registers). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define WATCH_GRANULE 8                    /* bytes one x86 debug register watches */
#define WATCH_SLOTS 4                      /* x86 has 4 debug registers per thread */
#define WATCH_SLOTS_BESIDE_SAMPLER 2       /* windows at once while the sampler arms its own
                                            * watches (sampler_watch.h's PER_THREAD: 2) */
#define WATCH_WINDOW_NS 20000000ull        /* a window's length (closed at the next tick) */
#define WATCH_MAX_HITS 16                  /* traps per thread per window, then disarmed:
                                            * enough to tell a rate at the trap limit */
#define WATCH_CPU_SHARE 0.01               /* default budget: traps may take 1% of one CPU
                                            * (traps/s = share / calibrated trap cost) */
#define WATCH_POLL_MS 20                   /* a recorder with windows wakes this often */
#define WATCH_OBJECTS_MAX 4096             /* objects tracked at once (linear lookups) */
#define WATCH_THREADS_MAX 64               /* threads watched per window (the first found) */
#define WATCH_RING_PAGES 2                 /* per watch: header + one page for its sample */
#define WATCH_CALIBRATE_HITS 100           /* traps per run of the self-test timing a trap */
#define WATCH_CALIBRATE_RUNS 8             /* runs at most; the cheapest is kept (preemption
					      only adds) */
#define WATCH_CALIBRATE_AGREE 0.10         /* ... and it stops once two runs agree this well */
#define WATCH_UNDO 4                       /* windows per object kept to be undone when they
                                            * turn out to have closed after its free */
#define WATCH_Z 1.96                       /* intervals: 95% (normal approximation) */
#define WATCH_INPROC_LIFE_NS 20000000ull  /* sampler_watch.h's SAMPLER_WATCH_LIFE_NS: the
                                            * sampler's watch covers an object's first 20 ms */
#define WATCH_SATURATED 2.0                /* a disarmed watch whose time besides its traps was
                                            * under this many times the traps' is saturated */

struct watch_opts {
	uint32_t max_hits;        /* 0: WATCH_MAX_HITS */
	uint64_t window_ns;       /* 0: WATCH_WINDOW_NS */
	double traps_per_s;       /* 0: WATCH_CPU_SHARE / the calibrated trap cost */
	unsigned slots;           /* windows open at once, at most WATCH_SLOTS; 0: WATCH_SLOTS */
	uint64_t min_age_ns;      /* objects get windows from this age on (the sampler's own
	                           * watch covers them before: WATCH_INPROC_LIFE_NS); 0: at once */
};

/* What the windows on one object say. rate is accesses per second per WATCH_GRANULE
 * bytes, [lo, hi] its 95% interval (Poisson on the hits; with no hit, hi is 3 hits
 * over the time watched). saturated: windows whose traps took most of their time (the
 * true rate is higher than the trap rate could show). */
struct watch_est {
	uint64_t windows, hits, saturated;
	double watched_s;         /* seconds of watched time, trap time removed */
	double rate, lo, hi;
	/* The sampler's watch from the allocation: its traps and the span it covered; the
	 * rate given to the rest of the life (the recorder's later windows', else its own). */
	double early_hits, early_span_s, rest_rate;
	bool early_capped;        /* its K traps disarmed the sampler's watch before the free */
};

struct watch_counts {
	uint64_t windows, traps, objects, dropped_objects, open_errors;
	double trap_ns;           /* calibrated cost of one trap */
	double traps_per_s;       /* the budget in force */
	uint64_t inproc, inproc_traps;   /* the sampler's own watches (watch_report) */
	uint64_t inproc_shared;   /* ... on objects freed by another thread than their maker */
	uint64_t late_windows;    /* dropped: still open at their object's free (watch_freed) */
	uint64_t inproc_stray;    /* debug traps the sampler's SIGTRAP guard swallowed */
};

struct watch;

/* n debug traps the sampler's SIGTRAP guard swallowed (memprofd:watch's flags >> 24). */
void watch_count_stray(struct watch *w, unsigned n);

/* Calibrates the trap cost on the calling thread; -ENOENT/-EACCES/-EOPNOTSUPP when the
 * breakpoint PMU is missing or refused. */
int watch_open(struct watch **out, const struct watch_opts *o);
void watch_close(struct watch *w);

/* A sampled object is live: it takes its turn in the windows. 0 or -ENOSPC. */
int watch_add(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t size);
/* The object was freed: a window on it ends now (its memory may be reused). */
void watch_free(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr);
/* The object settled: its estimate, and it is forgotten. false if it was never watched
 * (or never added). */
bool watch_take(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		struct watch_est *out);
/* The same, knowing when it was freed (CLOCK_MONOTONIC): a window that was still open at
 * free_ns may have watched reused memory (another object's) and is dropped, not counted. */
void watch_freed(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t free_ns);
/* The sampler's in-process watch on a live object ended (memprofd:watch): hits traps of
 * the allocating thread over watched_ns enabled, capped when the kernel disarmed it at k.
 * Counts as one window of one thread. other_thread: freed by another thread, whose
 * accesses the watch did not see (counted). -ENOENT when the object is not followed. */
int watch_report(struct watch *w, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		 uint64_t hits, uint64_t watched_ns, uint32_t k, bool capped, bool other_thread);
/* A process ended: its objects stay until taken, but are no longer watched. */
void watch_process_exit(struct watch *w, uint32_t tgid, uint64_t start_ns);

/* Closes the windows that lasted window_ns and opens new ones, within the trap budget.
 * Returns windows closed, or -errno. */
int watch_tick(struct watch *w, uint64_t now_ns);

/* The governor's knob: traps per second allowed from now on (at least 1). */
void watch_set_budget(struct watch *w, double traps_per_s);
/* CPU (fraction of one CPU) the targets spend in traps at traps_per_s, and back. */
double watch_cpu_of(const struct watch *w, double traps_per_s);
double watch_traps_for(const struct watch *w, double cpu);
void watch_get_counts(const struct watch *w, struct watch_counts *out);

/* Accesses an object of size bytes alive lifetime_ns made, by the estimate. */
double watch_est_accesses(const struct watch_est *e, uint64_t size, uint64_t lifetime_ns);
