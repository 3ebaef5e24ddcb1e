/* ledger.h: a workload's own account of what it allocated, per allocation site, written
 * as the --expect JSON that tests/integration/mpdtest.py compares with `memprofd query`.
 * Invariants: the ledger never calls an allocator (its storage is mmap'd, MAP_SHARED so a
 * forked child's entries reach the parent) and never runs concurrently with itself.
 * Every object's lifetime is bracketed by CLOCK_MONOTONIC reads taken around the
 * allocator calls, so [lo, hi] surely contains what a recorder timestamps in between.
 * A recorder may take its probes' time out of a lifetime (exact mode does: bpf/
 * alloc.bpf.c), and its probes run inside allocator calls, so lo is less the time the
 * workload spent inside the allocator calls it recorded during the object's life, times
 * LEDGER_CALLS_SLACK: the recorder estimates that time (a measured cost per probe hit),
 * and an estimate good to 2% over 30,000 calls already passes the calls' own time.
 * The allocating call's own time is among those (a recorder takes its probes' time from
 * inside it, and a wait for the CPU on the way out of its return trap). A recorder may
 * also take the thread's waits for a CPU out (exact mode does): lo is less the thread's
 * run_delay over the object's life too (/proc/thread-self/schedstat, one pread a call;
 * the workloads that use the ledger are single-threaded processes).
 * Header-only, valid C11 and C++17, shared by every workload. */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* A site function: never inlined or cloned, so its symbol is the frame memprofd reports. */
#if defined(__clang__)
#define SITE __attribute__((noinline, used))
#define NOT_SITE __attribute__((noinline))
#else
#define SITE __attribute__((noinline, noclone, used))
#define NOT_SITE __attribute__((noinline, noclone))
#endif

#define LEDGER_MAX_SITES 48    /* distinct site functions per workload */
#define LEDGER_MAX_CALLERS 4   /* distinct second-frame functions per site */
#define LEDGER_MAX_OBJS (1u << 20) /* objects tracked per run (reserved, touched lazily) */
#define LEDGER_MAX_NOT_SITES 32
#define LEDGER_CALLS_SLACK 1.5 /* a recorder's probe-time estimate over the calls' time */

struct ledger_site {
	const char *function;   /* the site's ELF symbol as memprofd must print it (demangled) */
	const char *allocator;  /* for people reading the JSON */
	const char *callers[LEDGER_MAX_CALLERS]; /* distinct second-frame functions */
	unsigned ncallers;
	unsigned contexts;      /* distinct call stacks the site is reached through */
	uint64_t alloc_count, total_size, min_size, max_size;
	int64_t min_lo, min_hi, max_lo, max_hi, sum_lo, sum_hi; /* lifetime bounds, ns */
	unsigned live_at_exit;  /* objects whose lifetime ends with the process */
	unsigned ended;         /* objects whose lifetime is already folded in */
};

struct ledger_obj {
	int64_t tb, ta;         /* CLOCK_MONOTONIC before / after the allocating call */
	int64_t calls_at;       /* ledger.in_calls just before that call */
	int64_t waits_at;       /* the thread's run_delay before it (ledger_waits) */
	uint32_t site;
	int32_t pid;            /* owner, so a forked child closes only its own objects */
	uint8_t ended;
};

struct ledger {
	struct ledger_site sites[LEDGER_MAX_SITES];
	unsigned nsites;
	const char *not_sites[LEDGER_MAX_NOT_SITES]; /* workload functions that never allocate */
	unsigned nnot_sites;
	const char *workload;
	const char *source;     /* basename of the workload's source file */
	struct ledger_obj *objs;
	uint32_t nobjs;
	int64_t in_calls;       /* ns spent inside the allocator calls recorded so far */
};

static inline int64_t ledger_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void ledger_die(const char *what)
{
	dprintf(2, "workload: %s: %s\n", what, strerror(errno));
	_exit(3);
}

/* The calling thread's waits for a CPU so far, ns (the scheduler's run_delay: runnable,
 * not running); 0 where schedstat cannot be read. *before (unless NULL): the value this
 * process read at its previous call (0 at its first: a forked child's waits start from
 * 0), so that a window from it covers the call being accounted and a wait at the read's
 * own return (a preemption point). One descriptor per process, opened again in a forked child
 * (thread-self named its parent's thread). */
static inline int64_t ledger_waits(int64_t *before)
{
	static int fd = -1;
	static pid_t owner;
	static int64_t last;
	char buf[96], *end;
	pid_t me = getpid();

	if (owner != me) {
		if (fd >= 0)
			close(fd);
		fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
		owner = me;
		last = 0;
	}
	if (before)
		*before = last;
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	if (n <= 0)
		return last;
	buf[n] = '\0';
	strtoll(buf, &end, 10);   /* time on the CPU, then the waits */
	last = strtoll(end, NULL, 10);
	return last;
}

/* The ledger itself lives in shared memory so it survives into (and back from) a fork. */
#define ledger_new(workload) ledger_new_at(workload, __FILE__)
static inline struct ledger *ledger_new_at(const char *workload, const char *file)
{
	void *m = mmap(NULL, sizeof(struct ledger), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		ledger_die("mmap ledger");
	struct ledger *l = (struct ledger *)m;
	void *o = mmap(NULL, sizeof(struct ledger_obj) * (size_t)LEDGER_MAX_OBJS,
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (o == MAP_FAILED)
		ledger_die("mmap ledger objects");
	l->objs = (struct ledger_obj *)o;
	l->workload = workload;
	l->source = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	return l;
}

/* Pointer arrays for the workloads, from mmap so that bookkeeping is never traced. */
static inline void **ledger_slots(size_t n)
{
	void *m = mmap(NULL, (n ? n : 1) * sizeof(void *), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		ledger_die("mmap slots");
	return (void **)m;
}

static inline void ledger_not_site(struct ledger *l, const char *function)
{
	if (l->nnot_sites < LEDGER_MAX_NOT_SITES)
		l->not_sites[l->nnot_sites++] = function;
}

/* Declares a site; returns its index. contexts/callers say how the site is reached. */
static inline unsigned ledger_site(struct ledger *l, const char *function, const char *allocator)
{
	for (unsigned i = 0; i < l->nsites; i++)
		if (strcmp(l->sites[i].function, function) == 0)
			return i;
	if (l->nsites == LEDGER_MAX_SITES) {
		dprintf(2, "workload: too many sites\n");
		_exit(3);
	}
	struct ledger_site *s = &l->sites[l->nsites];
	memset(s, 0, sizeof(*s));
	s->function = function;
	s->allocator = allocator;
	return l->nsites++;
}

/* Adds one (caller, context) pair to a site: a caller listed twice is two contexts. */
static inline void ledger_context(struct ledger *l, unsigned site, const char *caller)
{
	struct ledger_site *s = &l->sites[site];
	s->contexts++;
	for (unsigned i = 0; i < s->ncallers; i++)
		if (strcmp(s->callers[i], caller) == 0)
			return;
	if (s->ncallers < LEDGER_MAX_CALLERS)
		s->callers[s->ncallers++] = caller;
}

/* One allocation of `size` bytes at `site`, made between tb and ta. Returns its handle. */
static inline uint32_t ledger_alloc(struct ledger *l, unsigned site, uint64_t size, int64_t tb,
				    int64_t ta)
{
	if (l->nobjs == LEDGER_MAX_OBJS) {
		dprintf(2, "workload: more than %u objects\n", LEDGER_MAX_OBJS);
		_exit(3);
	}
	struct ledger_site *s = &l->sites[site];
	if (s->alloc_count == 0 || size < s->min_size)
		s->min_size = size;
	if (size > s->max_size)
		s->max_size = size;
	s->alloc_count++;
	s->total_size += size;
	struct ledger_obj *o = &l->objs[l->nobjs];
	o->calls_at = l->in_calls;
	l->in_calls += ta - tb;
	o->tb = tb;
	o->ta = ta;
	ledger_waits(&o->waits_at);   /* as read before this call */
	o->site = site;
	o->pid = (int32_t)getpid();
	o->ended = 0;
	return l->nobjs++;
}

static inline void ledger_fold(struct ledger *l, struct ledger_obj *o, int64_t fb, int64_t fa)
{
	struct ledger_site *s = &l->sites[o->site];
	int64_t lo = fb - o->ta - (int64_t)((double)(l->in_calls - o->calls_at) * LEDGER_CALLS_SLACK) -
		     (ledger_waits(NULL) - o->waits_at);
	int64_t hi = fa - o->tb;
	if (lo < 0)
		lo = 0;
	if (s->ended == 0 || lo < s->min_lo)
		s->min_lo = lo;
	if (s->ended == 0 || hi < s->min_hi)
		s->min_hi = hi;
	if (lo > s->max_lo)
		s->max_lo = lo;
	if (hi > s->max_hi)
		s->max_hi = hi;
	s->sum_lo += lo;
	s->sum_hi += hi;
	s->ended++;
	o->ended = 1;
}

/* The object `h` was freed (or reallocated away) between fb and fa. */
static inline void ledger_free(struct ledger *l, uint32_t h, int64_t fb, int64_t fa)
{
	struct ledger_obj *o = &l->objs[h];
	if (o->ended) {
		dprintf(2, "workload: object %u freed twice\n", h);
		_exit(3);
	}
	ledger_fold(l, o, fb, fa);
	l->in_calls += fa - fb;
}

/* Ends, at `t` (taken just before the process exits), every object this process still
 * holds: MemProf counts them with their lifetime up to the exit. The checker widens
 * the upper bounds of such sites by its exit slack. */
static inline void ledger_exit(struct ledger *l, int64_t t)
{
	int32_t me = (int32_t)getpid();
	for (uint32_t i = 0; i < l->nobjs; i++) {
		struct ledger_obj *o = &l->objs[i];
		if (o->ended || o->pid != me)
			continue;
		l->sites[o->site].live_at_exit++;
		ledger_fold(l, o, t, t);
	}
}

/* JSON text is built in a static buffer with vsnprintf and written with write(2):
 * dprintf and stdio would malloc a buffer inside libc. */
struct ledger_buf {
	char text[1 << 16];
	size_t len;
};

static inline void ledger_put(struct ledger_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void ledger_put(struct ledger_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->text + b->len, sizeof(b->text) - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(b->text) - b->len) {
		static const char msg[] = "workload: expect JSON too long\n";
		if (write(2, msg, sizeof(msg) - 1) < 0) {}
		_exit(3);
	}
	b->len += (size_t)n;
}

static inline void ledger_json_str(struct ledger_buf *b, const char *s)
{
	ledger_put(b, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			ledger_put(b, "\\%c", *s);
		else
			ledger_put(b, "%c", *s);
	}
	ledger_put(b, "\"");
}

/* Writes the --expect JSON. */
static inline void ledger_write(const struct ledger *l, const char *path)
{
	static struct ledger_buf buf;
	struct ledger_buf *b = &buf;
	if (!path)
		return;
	b->len = 0;
	ledger_put(b, "{\n  \"workload\": ");
	ledger_json_str(b, l->workload);
	ledger_put(b, ",\n  \"source\": ");
	ledger_json_str(b, l->source);
	ledger_put(b, ",\n  \"pid\": %d,\n  \"not_sites\": [", (int)getpid());
	for (unsigned i = 0; i < l->nnot_sites; i++) {
		ledger_put(b, "%s", i ? ", " : "");
		ledger_json_str(b, l->not_sites[i]);
	}
	ledger_put(b, "],\n  \"sites\": [\n");
	for (unsigned i = 0; i < l->nsites; i++) {
		const struct ledger_site *s = &l->sites[i];
		ledger_put(b, "    {\"function\": ");
		ledger_json_str(b, s->function);
		ledger_put(b, ", \"allocator\": ");
		ledger_json_str(b, s->allocator);
		ledger_put(b, ", \"contexts\": %u, \"callers\": [", s->contexts);
		for (unsigned c = 0; c < s->ncallers; c++) {
			ledger_put(b, "%s", c ? ", " : "");
			ledger_json_str(b, s->callers[c]);
		}
		ledger_put(b, "],\n     \"alloc_count\": %llu, \"total_size\": %llu, "
			   "\"min_size\": %llu, \"max_size\": %llu, \"live_at_exit\": %u,\n"
			   "     \"lifetime_ns\": {\"min\": [%lld, %lld], \"max\": [%lld, %lld], "
			   "\"total\": [%lld, %lld]}}%s\n",
			   (unsigned long long)s->alloc_count, (unsigned long long)s->total_size,
			   (unsigned long long)s->min_size, (unsigned long long)s->max_size,
			   s->live_at_exit, (long long)s->min_lo, (long long)s->min_hi,
			   (long long)s->max_lo, (long long)s->max_hi, (long long)s->sum_lo,
			   (long long)s->sum_hi, i + 1 < l->nsites ? "," : "");
	}
	ledger_put(b, "  ]\n}\n");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		ledger_die(path);
	for (size_t off = 0; off < b->len;) {
		ssize_t n = write(fd, b->text + off, b->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ledger_die(path);
		off += (size_t)n;
	}
	if (close(fd) != 0)
		ledger_die(path);
}

/* Sleeps ms milliseconds, resuming after signals. */
static inline void ledger_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Workload options: `--name VALUE` pairs matched against a table of longs. */
struct ledger_opt {
	const char *name;
	long *value;
};

/* Parses argv: --expect FILE plus the table's options; exits 2 on anything else. */
static inline const char *ledger_args(int argc, char **argv, const struct ledger_opt *opts,
				      unsigned nopts)
{
	const char *expect = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--expect") == 0 && i + 1 < argc) {
			expect = argv[++i];
			continue;
		}
		unsigned k;
		for (k = 0; k < nopts; k++)
			if (a[0] == '-' && a[1] == '-' && strcmp(a + 2, opts[k].name) == 0)
				break;
		if (k == nopts || i + 1 >= argc) {
			dprintf(2, "usage: %s [--expect FILE]", argv[0]);
			for (unsigned j = 0; j < nopts; j++)
				dprintf(2, " [--%s N (%ld)]", opts[j].name, *opts[j].value);
			dprintf(2, "\n");
			_exit(2);
		}
		char *end;
		errno = 0;
		long v = strtol(argv[++i], &end, 0);
		if (errno || *end || v < 0) {
			dprintf(2, "workload: bad value for --%s\n", opts[k].name);
			_exit(2);
		}
		*opts[k].value = v;
	}
	return expect;
}
