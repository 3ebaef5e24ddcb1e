/* In-process watches (sampler.h's memprofd:watch probe): while a tracer holds the probe's
 * semaphore, a sampled region object gets at its allocation one read/write breakpoint on
 * a random 8-byte granule, on the allocating thread only (pid 0, cpu -1), which the kernel
 * disarms by itself after SAMPLER_WATCH_HITS traps (sample_period + IOC_REFRESH 1, no
 * signal). At the free it is read (hits, time enabled), closed and reported. Costs: 4
 * syscalls per watch and at most K traps, charged to a token bucket of CPU time (ppm of
 * one CPU): syscalls as the thread's CPU clock measures them (a wall clock would charge
 * the time a loaded machine preempts them), traps at trap_ns (SAMPLER_WATCH_TRAP_NS), unused traps
 * refunded. Before the first watch, one probe checks that a breakpoint fires at all
 * (bp_fires): where it opens but never counts, watches stay off and count as errors.
 * A watch still armed SAMPLER_WATCH_LIFE_NS later is ended at the next sampled allocation
 * or free (it holds a debug register; longer lives are the daemon's windows' job), and a
 * thread holds at most SAMPLER_WATCH_PER_THREAD: a program that stops allocating keeps
 * its watches, and the daemon's windows need the other registers.
 * No allocation; a spinlock guards the table and is never held across a syscall. */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include "sampler/sampler_trap.h"
#include "sampler/sampler_watch.h"

__extension__ unsigned short memprofd_watch_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));

struct slot { uintptr_t addr; uint64_t armed_ns; int fd1; int tid; };   /* fd + 1; 0: free (zeroed memory is empty) */

static struct slot slots[SAMPLER_WATCH_MAX];
static int nlive;             /* slots in use (the free path's cheap test) */
static int lock_word;
static int off;               /* the PMU refused for good (ENOENT, EACCES...) */
static uint64_t ppm = SAMPLER_WATCH_PPM;
static int64_t trap_ns = SAMPLER_WATCH_TRAP_NS;   /* what one trap is charged */
static int64_t tokens_ns;     /* CPU time the watches may still spend */
static uint64_t last_ns;
static struct sampler_watch_stats st;
static __thread int my_tid __attribute__((tls_model("initial-exec")));   /* 0: not known yet */

#define BURST_NS(p) ((int64_t)(p) * 1000)    /* one second's worth at most */

static void lock(void)
{
	while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&lock_word, __ATOMIC_RELAXED))
			;
}

static void unlock(void)
{
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

static uint64_t clock_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static uint64_t cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

void sampler_watch_init(uint64_t p, uint64_t t)
{
	ppm = p;
	trap_ns = t ? (int64_t)t : SAMPLER_WATCH_TRAP_NS;
	tokens_ns = BURST_NS(p);
}

/* Refills the bucket and takes cost from it; false when it is short (lock held). */
static void expire(uint64_t now);

static int take(int64_t cost, uint64_t now)
{
	if (last_ns && now > last_ns) {
		tokens_ns += (int64_t)((now - last_ns) * ppm / 1000000);
		if (tokens_ns > BURST_NS(ppm))
			tokens_ns = BURST_NS(ppm);
	}
	last_ns = now;
	if (tokens_ns < cost)
		return 0;
	tokens_ns -= cost;
	return 1;
}

static int bp_open(uintptr_t at)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a),
		.bp_type = HW_BREAKPOINT_RW, .bp_addr = at, .bp_len = HW_BREAKPOINT_LEN_8,
		.sample_period = SAMPLER_WATCH_HITS, .disabled = 1,
		.exclude_kernel = 1, .exclude_hv = 1,
		.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED,
	};
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 1) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Whether a breakpoint here counts at all: a counting watch (no sample period, so no
 * trap reaches user space) on a word of ours, touched PROBE_TOUCHES times. Some
 * hypervisors accept the event and never fire it (seen on a CI host): every watch would
 * then report 0 hits and call a hot object idle. 0, -EOPNOTSUPP (blind) or -errno. */
#define PROBE_TOUCHES 2
static volatile uint64_t probe_word;

static int bp_fires(void)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a),
		.bp_type = HW_BREAKPOINT_RW, .bp_addr = (uintptr_t)&probe_word,
		.bp_len = HW_BREAKPOINT_LEN_8, .exclude_kernel = 1, .exclude_hv = 1,
	};
	uint64_t count = 0;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (int i = 0; i < PROBE_TOUCHES; i++)
		(void)probe_word;
	ssize_t n = read(fd, &count, sizeof(count));
	close(fd);
	return n == (ssize_t)sizeof(count) && count ? 0 : -EOPNOTSUPP;
}

/* The probe, once per process, by the first thread to arm (the others skip their arm
 * meanwhile): 0 when watches may be armed. Costs 3 syscalls and PROBE_TOUCHES traps. */
static int probed;            /* 0: not yet, 1: running, 2: fires, 3: blind or refused */

static int usable(void)
{
	int v = __atomic_load_n(&probed, __ATOMIC_ACQUIRE), zero = 0;

	if (v == 2)
		return 1;
	if (v || !__atomic_compare_exchange_n(&probed, &zero, 1, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED))
		return 0;
	sampler_trap_guard();
	int r = bp_fires();
	if (r < 0 && r != -ENOSPC && r != -EBUSY) {
		__atomic_fetch_add(&st.errors, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&off, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&probed, 3, __ATOMIC_RELEASE);
		return 0;
	}
	/* Registers all taken: no verdict yet; the next arm asks again. */
	__atomic_store_n(&probed, r ? 0 : 2, __ATOMIC_RELEASE);
	return !r;
}

void sampler_watch_arm(void *p, size_t n, uint64_t rnd)
{
	if (!memprofd_watch_semaphore || !ppm || __atomic_load_n(&off, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&nlive, __ATOMIC_RELAXED) >= SAMPLER_WATCH_MAX || !usable())
		return;
	uint64_t t0 = mono_ns();

	expire(t0);
	if (!my_tid)
		my_tid = (int)syscall(SYS_gettid);
	lock();
	int mine = 0;
	for (int i = 0; i < SAMPLER_WATCH_MAX; i++)
		mine += slots[i].fd1 && slots[i].tid == my_tid;
	/* Reserve K traps; the syscalls are charged once measured. */
	int ok = mine < SAMPLER_WATCH_PER_THREAD &&
		 take((int64_t)SAMPLER_WATCH_HITS * trap_ns, t0);
	unlock();
	if (mine >= SAMPLER_WATCH_PER_THREAD) {
		__atomic_fetch_add(&st.busy, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!ok) {
		__atomic_fetch_add(&st.budget, 1, __ATOMIC_RELAXED);
		return;
	}
	uint64_t granules = (n + SAMPLER_WATCH_GRANULE - 1) / SAMPLER_WATCH_GRANULE;
	uintptr_t at = ((uintptr_t)p & ~(uintptr_t)(SAMPLER_WATCH_GRANULE - 1)) +
		       (uintptr_t)(rnd % (granules ? granules : 1)) * SAMPLER_WATCH_GRANULE;

	sampler_trap_guard();   /* before the first trap can come */
	uint64_t c0 = cpu_ns();
	int fd = bp_open(at);
	uint64_t c1 = cpu_ns(), t1 = mono_ns();

	lock();
	tokens_ns -= (int64_t)(c1 - c0);
	if (fd < 0) {
		tokens_ns += (int64_t)SAMPLER_WATCH_HITS * trap_ns;
		unlock();
		if (fd == -ENOSPC || fd == -EBUSY) {   /* the 4 debug registers are taken */
			__atomic_fetch_add(&st.busy, 1, __ATOMIC_RELAXED);
		} else {
			__atomic_fetch_add(&st.errors, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&off, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	for (int i = 0; i < SAMPLER_WATCH_MAX; i++)
		if (!slots[i].fd1) {
			slots[i] = (struct slot){ .addr = (uintptr_t)p, .armed_ns = t1, .fd1 = fd + 1,
						  .tid = my_tid };
			nlive++;
			fd = -1;
			break;
		}
	unlock();
	if (fd >= 0) {          /* raced past the table's end */
		close(fd);
		return;
	}
	__atomic_fetch_add(&st.armed, 1, __ATOMIC_RELAXED);
}

/* Reads, closes and reports one watch (outside the lock). */
static void finish(int fd, uintptr_t p, unsigned extra)
{
	uint64_t t0 = cpu_ns(), v[2] = { 0, 0 };
	int got = read(fd, v, sizeof(v)) == (ssize_t)sizeof(v);

	close(fd);
	uint64_t t1 = cpu_ns();
	uint64_t hits = got ? v[0] : 0, flags = SAMPLER_WATCH_HITS | extra;

	if (hits >= SAMPLER_WATCH_HITS)
		flags |= SAMPLER_WATCH_F_CAPPED;
	if (got && memprofd_watch_semaphore)
		flags |= (uint64_t)sampler_trap_take_unreported(SAMPLER_WATCH_STRAY_MAX)
			 << SAMPLER_WATCH_STRAY_SHIFT;
	lock();
	tokens_ns -= (int64_t)(t1 - t0);
	if (hits < SAMPLER_WATCH_HITS)
		tokens_ns += (int64_t)(SAMPLER_WATCH_HITS - hits) * trap_ns;
	unlock();
	__atomic_fetch_add(&st.hits, hits, __ATOMIC_RELAXED);
	if (got && memprofd_watch_semaphore)
		STAP_PROBE5(memprofd, watch, p, hits, v[1], flags, SAMPLER_WATCH_GRANULE);
}

/* Watches armed over SAMPLER_WATCH_LIFE_NS ago end now: a disarmed watch still holds its
 * debug register, which other watches (and the daemon's windows) need. */
static void expire(uint64_t now)
{
	int fds[SAMPLER_WATCH_MAX];
	uintptr_t at[SAMPLER_WATCH_MAX];
	int n = 0;

	if (!__atomic_load_n(&nlive, __ATOMIC_RELAXED))
		return;
	lock();
	for (int i = 0; i < SAMPLER_WATCH_MAX; i++)
		if (slots[i].fd1 && now - slots[i].armed_ns > SAMPLER_WATCH_LIFE_NS) {
			fds[n] = slots[i].fd1 - 1;
			at[n++] = slots[i].addr;
			slots[i].fd1 = 0;
			nlive--;
		}
	unlock();
	for (int i = 0; i < n; i++)
		finish(fds[i], at[i], SAMPLER_WATCH_F_EXPIRED);
}

void sampler_watch_end(void *p)
{
	int fd = -1, tid = 0;

	if (!__atomic_load_n(&nlive, __ATOMIC_RELAXED))
		return;
	lock();
	for (int i = 0; i < SAMPLER_WATCH_MAX; i++)
		if (slots[i].fd1 && slots[i].addr == (uintptr_t)p) {
			fd = slots[i].fd1 - 1;
			tid = slots[i].tid;
			slots[i].fd1 = 0;
			nlive--;
			break;
		}
	unlock();
	if (fd >= 0) {
		if (!my_tid)
			my_tid = (int)syscall(SYS_gettid);
		/* Freed by another thread: the object was shared, and that thread's accesses
		 * were not watched. */
		finish(fd, (uintptr_t)p, tid != my_tid ? SAMPLER_WATCH_F_OTHER_THREAD : 0);
	}
	expire(mono_ns());
}

/* At exit, the swallowed traps no watch's report carried yet, on a report of no object. */
__attribute__((destructor)) static void report_strays(void)
{
	unsigned n;

	while (memprofd_watch_semaphore && (n = sampler_trap_take_unreported(SAMPLER_WATCH_STRAY_MAX)))
		STAP_PROBE5(memprofd, watch, 0, 0, 0, (uint64_t)n << SAMPLER_WATCH_STRAY_SHIFT,
			    SAMPLER_WATCH_GRANULE);
}

void sampler_watch_forget(void)
{
	lock_word = 0;
	my_tid = 0;            /* the child's thread has its own id */
	for (int i = 0; i < SAMPLER_WATCH_MAX; i++)
		if (slots[i].fd1) {
			close(slots[i].fd1 - 1);
			slots[i].fd1 = 0;
		}
	nlive = 0;
	if (probed == 1)       /* forked mid-probe: the prober is not in this process */
		probed = 0;
}

void sampler_watch_get_stats(struct sampler_watch_stats *out)
{
	out->armed = __atomic_load_n(&st.armed, __ATOMIC_RELAXED);
	out->busy = __atomic_load_n(&st.busy, __ATOMIC_RELAXED);
	out->budget = __atomic_load_n(&st.budget, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&st.errors, __ATOMIC_RELAXED);
	out->hits = __atomic_load_n(&st.hits, __ATOMIC_RELAXED);
}
