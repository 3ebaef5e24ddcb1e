/* watch_cost: what one in-process watch costs its thread, piece by piece (issue 15), in
 * the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and wall time: arming (perf_event_open
 * + PERF_EVENT_IOC_REFRESH), ending (read + close), one trap, and a context switch while
 * the thread holds a watch (armed on a word nobody touches) against one without. Prints
 * one JSON object. Usage: watch_cost [--n N] (N watches, traps and switches per part). */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WATCH_COST_N 2000           /* default per part */
#define WATCH_COST_PERIOD 1000000   /* traps before the kernel disarms (never, here) */

static volatile uint64_t word, idle_word;

static uint64_t ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int bp_open(volatile uint64_t *at, uint64_t period)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a), .bp_type = HW_BREAKPOINT_RW,
		.bp_addr = (uintptr_t)at, .bp_len = HW_BREAKPOINT_LEN_8, .sample_period = period,
		.disabled = 1, .exclude_kernel = 1, .exclude_hv = 1,
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

struct spinner { volatile int stop; volatile int tid; uint64_t iters, cpu_ns; };

/* Counts loop iterations until told to stop: a running target. */
static void *spin(void *arg)
{
	struct spinner *s = arg;
	uint64_t n = 0;

	uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);

	s->tid = (int)syscall(SYS_gettid);
	while (!s->stop)
		n++;
	s->iters = n;
	s->cpu_ns = ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	return NULL;
}

/* A running thread's loop iterations per second of its own CPU time while another thread opens and closes
 * a watch on it (a daemon-side window: the kernel installs it on the target's CPU) every
 * gap_us, or never (gap_us 0); ms long. Returns iterations/s; *windows the watches made. */
static double remote(int ms, int gap_us, int *windows)
{
	struct spinner s = { 0 };
	pthread_t t;

	pthread_create(&t, NULL, spin, &s);
	while (!s.tid)
		;
	uint64_t w0 = ns(CLOCK_MONOTONIC), end = w0 + (uint64_t)ms * 1000000ull;
	*windows = 0;
	while (ns(CLOCK_MONOTONIC) < end) {
		if (gap_us) {
			struct perf_event_attr a = {
				.type = PERF_TYPE_BREAKPOINT, .size = sizeof(a),
				.bp_type = HW_BREAKPOINT_RW, .bp_addr = (uintptr_t)&idle_word,
				.bp_len = HW_BREAKPOINT_LEN_8, .sample_period = 16, .disabled = 1,
				.exclude_kernel = 1, .exclude_hv = 1,
			};
			int fd = (int)syscall(SYS_perf_event_open, &a, s.tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
			if (fd >= 0) {
				ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
				close(fd);
				(*windows)++;
			}
		}
		usleep(gap_us ? gap_us : 1000);
	}
	s.stop = 1;
	pthread_join(t, NULL);
	return (double)s.iters / ((double)s.cpu_ns / 1e9);
}

struct pingpong { int in, out, n, watch; double cpu_ns; };

/* Passes a byte back and forth n times: every pass is a context switch on each side. */
static void *pong(void *arg)
{
	struct pingpong *p = arg;
	int fd = p->watch ? bp_open(&idle_word, WATCH_COST_PERIOD) : -1;
	uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);
	char b = 0;

	for (int i = 0; i < p->n; i++)
		if (read(p->in, &b, 1) != 1 || write(p->out, &b, 1) != 1)
			break;
	p->cpu_ns = (double)(ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* CPU ns per switch pair (both threads), each thread holding a watch or not. */
static double switches(int n, int watch)
{
	int a[2], b[2];
	struct pingpong p1, p2;
	pthread_t t1, t2;

	if (pipe(a) || pipe(b))
		return -1;
	p1 = (struct pingpong){ .in = a[0], .out = b[1], .n = n, .watch = watch };
	p2 = (struct pingpong){ .in = b[0], .out = a[1], .n = n, .watch = watch };
	pthread_create(&t1, NULL, pong, &p1);
	pthread_create(&t2, NULL, pong, &p2);
	char c = 0;
	if (write(a[1], &c, 1) != 1)
		return -1;
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	for (int i = 0; i < 2; i++)
		close(a[i]), close(b[i]);
	return (p1.cpu_ns + p2.cpu_ns) / n;
}

int main(int argc, char **argv)
{
	int n = WATCH_COST_N;

	if (argc == 3 && !strcmp(argv[1], "--n"))
		n = atoi(argv[2]);
	if (n <= 0) {
		fprintf(stderr, "usage: watch_cost [--n N]\n");
		return 2;
	}
	/* Arming and ending; the waits (voluntary switches) each part takes. */
	uint64_t arm = 0, end = 0, arm_w = 0;
	long arm_sw = 0, end_sw = 0;
	for (int i = 0; i < n; i++) {
		struct rusage r0, r1, r2;

		getrusage(RUSAGE_THREAD, &r0);
		uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
		int fd = bp_open(&word, 16);
		uint64_t c1 = ns(CLOCK_THREAD_CPUTIME_ID), w1 = ns(CLOCK_MONOTONIC);
		uint64_t v[2];

		getrusage(RUSAGE_THREAD, &r1);
		arm_sw += r1.ru_nvcsw - r0.ru_nvcsw;

		if (fd < 0) {
			fprintf(stderr, "watch_cost: perf_event_open: %s\n", strerror(-fd));
			return fd == -ENOENT || fd == -EOPNOTSUPP ? 77 : 1;
		}
		if (read(fd, v, sizeof(v)) < 0)
			perror("watch_cost: read");
		close(fd);
		arm += c1 - c0;
		arm_w += w1 - w0;
		end += ns(CLOCK_THREAD_CPUTIME_ID) - c1;
		getrusage(RUSAGE_THREAD, &r2);
		end_sw += r2.ru_nvcsw - r1.ru_nvcsw;
	}
	/* A trap: n accesses under a watch, less n without. */
	uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);
	for (int i = 0; i < n; i++)
		word = word + 1;
	uint64_t plain = ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	int fd = bp_open(&word, WATCH_COST_PERIOD);
	c0 = ns(CLOCK_THREAD_CPUTIME_ID);
	for (int i = 0; i < n; i++)
		word = word + 1;
	uint64_t watched = ns(CLOCK_THREAD_CPUTIME_ID) - c0, v[2] = { 0, 0 };
	if (fd >= 0 && read(fd, v, sizeof(v)) < 0)
		perror("watch_cost: read");
	if (fd >= 0)
		close(fd);
	double sw_off = switches(n, 0), sw_on = switches(n, 1);
	double sw_off2 = switches(n, 0), sw_on2 = switches(n, 1);   /* twice, alternated */

	int wa, wb, wc, wd;
	double r_off = remote(1000, 0, &wa), r_on = remote(1000, 1000, &wb), r_off2 = remote(1000, 0, &wc);
	double r_on2 = remote(1000, 1000, &wd);

	printf("{\"remote_iters_per_s_off\": [%.4g, %.4g], \"remote_iters_per_s_1000_windows\": %.4g, "
	       "\"remote_windows\": %d, ", r_off, r_off2, r_on, wb);
	printf("\"remote_iters_per_s_1000_windows_2\": %.4g, \"remote_windows_2\": %d, ", r_on2, wd);
	printf("\"arm_waits\": %ld, \"end_waits\": %ld, ", arm_sw, end_sw);
	printf("\"n\": %d, \"arm_cpu_ns\": %.0f, \"arm_wall_ns\": %.0f, \"end_cpu_ns\": %.0f, "
	       "\"trap_cpu_ns\": %.0f, \"traps\": %llu, \"switch_pair_cpu_ns_off\": [%.0f, %.0f], "
	       "\"switch_pair_cpu_ns_watching\": [%.0f, %.0f]}\n", n, (double)arm / n,
	       (double)arm_w / n, (double)end / n,
	       v[0] ? (double)(watched - (watched > plain ? plain : 0)) / (double)v[0] : 0,
	       (unsigned long long)v[0], sw_off, sw_off2, sw_on, sw_on2);
	return 0;
}
