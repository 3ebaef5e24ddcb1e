/* Tests of sampler/sampler.c through its prefixed build (mps_*), which runs beside the
 * real allocator and so under ASan/UBSan too: the estimator is unbiased, sampled objects
 * and only they live in the region, realloc/aligned paths keep contents and alignment,
 * and without a tracer nothing but the countdown runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#define SAMPLER_PREFIX 1     /* the mps_* build: it runs beside the real allocator */
#include "sampler/sampler.h"
#include "sampler/sampler_trap.h"
#include <signal.h>
#include <sys/syscall.h>

static struct memprofd_sampler_stats stats(void)
{
	struct memprofd_sampler_stats s;

	mps_memprofd_sampler_get_stats(&s);
	return s;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Log-uniform sizes from 16 B to 16 KiB: most objects far below the mean, some above. */
static size_t mixed_size(uint64_t *s)
{
	return (size_t)(16.0 * pow(1024.0, (double)(rnd(s) % 10000) / 10000.0));
}

extern unsigned short memprofd_watch_semaphore;   /* sampler/sampler_watch.c */

static void test_estimates_unbiased(void **state)
{
	const uint64_t mean = 8 << 10;
	uint64_t seeds[] = { 1, 7, 12345 };

	for (size_t k = 0; k < 3; k++) {
		mps_test_reset(mean, 1, seeds[k]);
		uint64_t s = 88172645463325252ULL + k, true_bytes = 0, true_count = 0, nsamples = 0;
		double est_bytes = 0, est_count = 0, est_small = 0, true_small = 0, expect_samples = 0;
		for (int i = 0; i < 400000; i++) {
			size_t n = mixed_size(&s);
			expect_samples += -expm1(-(double)n / (double)mean);
			uint64_t before = mps_last.nalloc;
			void *p = mps_malloc(n);
			assert_non_null(p);
			true_bytes += n;
			true_count++;
			if (n < 256)
				true_small++;
			if (mps_last.nalloc != before) {
				double w = (double)mps_last.weight_q16 / (1 << SAMPLER_WEIGHT_SHIFT);
				assert_int_equal(mps_last.size, n);
				assert_true(mps_memprofd_sampler_in_region(p));
				est_bytes += w * (double)n;
				est_count += w;
				if (n < 256)
					est_small += w;
				nsamples++;
			} else {
				assert_false(mps_memprofd_sampler_in_region(p));
			}
			mps_free(p);
		}
		double eb = fabs(est_bytes / (double)true_bytes - 1), ec = fabs(est_count / (double)true_count - 1);
		double es = fabs(est_small / true_small - 1);
		printf("seed %llu: %llu samples; bytes err %.2f%%, count err %.2f%%, small-object count err %.2f%%\n",
		       (unsigned long long)seeds[k], (unsigned long long)nsamples, 100 * eb, 100 * ec, 100 * es);
		/* Standard errors here: bytes 0.3%, count 1.4%, small objects 3.3%. */
		assert_true(eb < 0.03);
		assert_true(ec < 0.06);
		assert_true(es < 0.15);
		/* An object of n bytes is sampled with probability 1 - exp(-n/mean). */
		assert_true(fabs((double)nsamples / expect_samples - 1) < 0.03);
	}
}

static void test_region_membership(void **state)
{
	mps_test_reset(1, 1, 3);         /* mean 1: every allocation is a sample */
	struct memprofd_sampler_stats s0 = stats();
	char *p = mps_malloc(100);
	assert_true(mps_memprofd_sampler_in_region(p));
	assert_true((uintptr_t)p >= s0.region_lo && (uintptr_t)p < s0.region_lo + s0.region_size);
	assert_int_equal((uintptr_t)p % SAMPLER_PAGE, 0);
	assert_int_equal(mps_malloc_usable_size(p), 100);
	assert_int_equal(mps_last.weight_q16, 1 << SAMPLER_WEIGHT_SHIFT);
	memset(p, 0xab, 100);
	mps_free(p);
	struct memprofd_sampler_stats s1 = stats();
	assert_int_equal(s1.region_allocs - s0.region_allocs, 1);
	assert_int_equal(s1.region_frees - s0.region_frees, 1);
	assert_int_equal(s1.region_live_bytes, s0.region_live_bytes);

	mps_test_reset(0, 1, 3);         /* mean 0: sampling off */
	void *q = mps_malloc(100);
	assert_false(mps_memprofd_sampler_in_region(q));
	assert_false(mps_memprofd_sampler_in_region(NULL));
	mps_free(q);
	mps_free(NULL);
}

static void test_unsampled_free_skips_region(void **state)
{
	mps_test_reset(0, 1, 5);
	struct memprofd_sampler_stats s0 = stats();
	uint64_t frees0 = mps_last.nfree;
	for (int i = 0; i < 20000; i++) {
		void *p = mps_malloc(16 + i % 5000);
		void *q = mps_calloc(3, 40);
		mps_free(p);
		mps__ZdlPv(q);
	}
	struct memprofd_sampler_stats s1 = stats();
	assert_int_equal(s1.region_allocs, s0.region_allocs);
	assert_int_equal(s1.region_frees, s0.region_frees);
	assert_int_equal(s1.bad_frees, s0.bad_frees);
	assert_int_equal(mps_last.nfree, frees0);

	/* Sampling on: frees reach the region exactly for the sampled objects. */
	mps_test_reset(8192, 1, 5);
	s0 = stats();
	uint64_t a0 = mps_last.nalloc;
	frees0 = mps_last.nfree;
	for (int i = 0; i < 20000; i++)
		mps_free(mps_malloc(16 + i % 5000));
	s1 = stats();
	assert_true(mps_last.nalloc - a0 > 100);
	assert_int_equal(s1.region_frees - s0.region_frees, mps_last.nalloc - a0);
	assert_int_equal(mps_last.nfree - frees0, mps_last.nalloc - a0);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed);
}

static int check(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 31 + seed))
			return 0;
	return 1;
}

static void test_realloc_paths(void **state)
{
	/* unsampled -> sampled: contents copied into the region */
	mps_test_reset(0, 1, 9);
	unsigned char *p = mps_malloc(300);
	fill(p, 300, 1);
	mps_test_reset(1, 1, 9);
	p = mps_realloc(p, 5000);
	assert_true(mps_memprofd_sampler_in_region(p));
	assert_true(check(p, 300, 1));
	/* sampled -> sampled (grow), then sampled -> unsampled (shrink), copies each time */
	fill(p, 5000, 2);
	uint64_t f0 = mps_last.nfree;
	p = mps_realloc(p, 20000);
	assert_true(mps_memprofd_sampler_in_region(p));
	assert_true(check(p, 5000, 2));
	assert_int_equal(mps_last.nfree - f0, 1);      /* the old sampled object died */
	assert_true(mps_last.flags & SAMPLER_F_REALLOC);
	mps_test_reset(0, 1, 9);
	p = mps_realloc(p, 1000);
	assert_false(mps_memprofd_sampler_in_region(p));
	assert_true(check(p, 1000, 2));
	/* reallocarray overflow, realloc(NULL), realloc(sampled, 0) */
	assert_null(mps_reallocarray(p, SIZE_MAX / 2, 4));
	mps_free(p);
	mps_test_reset(1, 1, 9);
	p = mps_realloc(NULL, 64);
	assert_true(mps_memprofd_sampler_in_region(p));
	struct memprofd_sampler_stats s0 = stats();
	assert_null(mps_realloc(p, 0));
	assert_int_equal(stats().region_frees - s0.region_frees, 1);
	/* calloc from a reused, dirty extent still reads zero */
	unsigned char *d = mps_malloc(2000);
	memset(d, 0xff, 2000);
	mps_free(d);
	unsigned char *z = mps_calloc(10, 200);
	assert_true(mps_memprofd_sampler_in_region(z));
	for (int i = 0; i < 2000; i++)
		assert_int_equal(z[i], 0);
	mps_free(z);
	assert_null(mps_calloc(SIZE_MAX / 2, 3));
}

static void test_aligned_paths(void **state)
{
	static const size_t aligns[] = { 16, 64, 4096, 8192, 65536 };

	for (int sampled = 0; sampled < 2; sampled++) {
		mps_test_reset(sampled ? 1 : 0, 1, 11);
		for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
			size_t a = aligns[i];
			void *p = NULL;
			assert_int_equal(mps_posix_memalign(&p, a, 1000), 0);
			assert_int_equal((uintptr_t)p % a, 0);
			assert_int_equal(mps_memprofd_sampler_in_region(p), sampled);
			memset(p, 1, 1000);
			mps_free(p);
			p = mps_aligned_alloc(a, 3 * a);
			assert_int_equal((uintptr_t)p % a, 0);
			assert_int_equal(mps_memprofd_sampler_in_region(p), sampled);
			mps_free(p);
			p = mps_memalign(a, 10);
			assert_int_equal((uintptr_t)p % a, 0);
			mps_free(p);
			p = mps__ZnwmSt11align_val_t(100, a);
			assert_int_equal((uintptr_t)p % a, 0);
			mps__ZdlPv(p);
		}
		void *p;
		assert_int_equal(mps_posix_memalign(&p, 24, 10), 22 /* EINVAL */);
		p = mps_valloc(10);
		assert_int_equal((uintptr_t)p % SAMPLER_PAGE, 0);
		mps_free(p);
		p = mps_pvalloc(10);
		assert_int_equal((uintptr_t)p % SAMPLER_PAGE, 0);
		mps_free(p);
		p = mps__Znwm(40);
		assert_int_equal(mps_memprofd_sampler_in_region(p), sampled);
		mps__ZdlPvm(p, 40);
	}
	assert_int_equal(stats().region_live_bytes, 0);
}

static void test_no_tracer(void **state)
{
	/* force off, semaphores 0: a sample costs its countdown draw and nothing else */
	mps_test_reset(1, 0, 13);
	memprofd_alloc_semaphore = memprofd_free_semaphore = 0;
	struct memprofd_sampler_stats s0 = stats();
	for (int i = 0; i < 1000; i++)
		mps_free(mps_malloc(100));
	struct memprofd_sampler_stats s1 = stats();
	assert_int_equal(s1.samples - s0.samples, 1000);
	assert_int_equal(s1.samples_untraced - s0.samples_untraced, 1000);
	assert_int_equal(s1.region_allocs, s0.region_allocs);
	assert_int_equal(mps_last.nalloc, 0);
	/* A tracer attaches (the kernel raises the semaphore): samples go to the region. */
	memprofd_alloc_semaphore = memprofd_free_semaphore = 1;
	void *p = mps_malloc(100);
	assert_true(mps_memprofd_sampler_in_region(p));
	assert_int_equal(mps_last.nalloc, 1);
	mps_free(p);
	assert_int_equal(mps_last.nfree, 1);
	memprofd_alloc_semaphore = memprofd_free_semaphore = 0;
}

static void *churn(void *arg)
{
	uint64_t s = (uintptr_t)arg;

	for (int i = 0; i < 50000; i++) {
		size_t n = mixed_size(&s);
		unsigned char *p = mps_malloc(n);
		if (!p)
			return (void *)1;
		p[0] = 1;
		p[n - 1] = 2;
		if (i % 3 == 0)
			p = mps_realloc(p, n / 2 + 1);
		mps_free(p);
	}
	return NULL;
}

/* A SIGTRAP to this thread shaped as the kernel's (code > 0) or as tgkill's. */
static void send_trap(int code)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGTRAP;
	si.si_code = code;
	syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGTRAP, &si);
}

static volatile sig_atomic_t own_traps;
static void own_handler(int sig) { (void)sig; own_traps++; }

/* Arms one watch in a fresh child (the guard is installed once per process). */
static int arm_one(void)
{
	mps_test_reset(1, 1, 11);
	memprofd_watch_semaphore = 1;
	void *p = mps_malloc(64);
	struct memprofd_sampler_stats s = stats();

	mps_free(p);
	return s.watch_armed > 0;
}

/* The SIGTRAP guard (sampler_trap.c), each case in its own child: with SIGTRAP at
 * SIG_DFL the first watch installs it, debug traps are swallowed and counted, a tgkill'd
 * SIGTRAP still kills; a target's own handler is left alone and gets its traps. Runs
 * before test_watch (the parent must not have armed one). */
static void test_trap_guard(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	mpd_require_breakpoints();
	if ((pid = fork()) == 0) {
		if (!arm_one())
			_exit(6);        /* breakpoints fire here: the watch must arm */
		if (!sampler_trap_installed())
			_exit(2);
		send_trap(TRAP_HWBKPT);
		send_trap(TRAP_BRKPT);   /* this thread armed a watch */
		if (sampler_trap_swallowed() != 2)
			_exit(3);
		send_trap(SI_TKILL);     /* not a debug trap: the default action */
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGTRAP);
	if ((pid = fork()) == 0) {
		signal(SIGTRAP, own_handler);
		if (!arm_one())
			_exit(6);
		send_trap(TRAP_HWBKPT);
		_exit(!sampler_trap_installed() && own_traps == 1 && !sampler_trap_swallowed() ? 0 : 5);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* In-process watches (sampler_watch.c): off without memprofd:watch's semaphore; with it,
 * a sampled object gets one, which counts the allocating thread's reads up to K and is
 * read at the free; a thread holds at most SAMPLER_WATCH_PER_THREAD; a forked child has
 * none of its parent's (a free there reports nothing). Skips without the breakpoint PMU. */
static void test_watch(void **state)
{
	(void)state;
	mps_test_reset(1, 1, 7);
	memprofd_watch_semaphore = 0;
	struct memprofd_sampler_stats a = stats();
	volatile uint64_t *p = mps_malloc(256);

	assert_non_null(p);
	mps_free((void *)p);
	assert_int_equal(stats().watch_armed, a.watch_armed);    /* nobody listens: nothing */

	memprofd_watch_semaphore = 1;
	volatile uint64_t *o[3];
	for (int i = 0; i < 3; i++)
		o[i] = mps_malloc(64);
	struct memprofd_sampler_stats b = stats();
	const char *why = mpd_breakpoints_unavailable();
	if (why) {
		/* The sampler's own probe saw it too: no watch armed, an error counted. */
		assert_int_equal(b.watch_armed, a.watch_armed);
		assert_true(b.watch_errors > a.watch_errors);
		for (int i = 0; i < 3; i++)
			mps_free((void *)o[i]);
		memprofd_watch_semaphore = 0;
		print_message("skip: %s\n", why);
		skip();
	}
	assert_int_equal(b.watch_errors, a.watch_errors);
	assert_int_equal(b.watch_armed - a.watch_armed, 2);      /* per-thread cap */
	assert_true(b.watch_busy > a.watch_busy);
	uint64_t sum = 0;
	for (int r = 0; r < 100; r++)
		for (int w = 0; w < 8; w++)
			sum += o[0][w] + o[1][w] + o[2][w];   /* every granule of each */
	pid_t pid = fork();
	if (pid == 0) {
		struct memprofd_sampler_stats c0 = stats();
		for (int i = 0; i < 3; i++)
			mps_free((void *)o[i]);
		_exit(stats().watch_hits == c0.watch_hits ? 0 : 3);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < 3; i++)
		mps_free((void *)o[i]);
	struct memprofd_sampler_stats c = stats();
	/* Two watches, each disarmed at K = 16 hits (of 100 reads). */
	assert_int_equal(c.watch_hits - b.watch_hits, 32);
	memprofd_watch_semaphore = 0;
	(void)sum;
}

static void test_threads_and_fork(void **state)
{
	pthread_t t[4];

	mps_test_reset(16 << 10, 1, 0);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i * 7919 + 1));
	/* Fork while the others allocate: the child must be able to allocate (no held lock).
	 * Not under ASan: the unsampled calls go to ASan's allocator, whose lock a fork can
	 * leave held in the child (seen: 1 run in 30 hung in SizeClassAllocator64); the
	 * sampler's own fork safety is what the plain build checks here. */
#if defined(__SANITIZE_ADDRESS__)
	pid_t pid = -1;
#else
	pid_t pid = fork();
	if (pid == 0)
		_exit(churn((void *)42) ? 1 : 0);
#endif
	for (int i = 0; i < 4; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		assert_null(ret);
	}
	int ws;
	if (pid > 0) {
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	}
	struct memprofd_sampler_stats s = stats();
	assert_true(s.region_allocs > 100);
	assert_int_equal(s.region_allocs, s.region_frees);
	assert_int_equal(s.region_live_bytes, 0);
	assert_int_equal(s.bad_frees, 0);
}

int main(void)
{
	/* Before the sampler's init reads it: the watches' budget is not what test_watch
	 * checks (a process's first perf_event_open alone can take 10 ms here). */
	setenv("MEMPROFD_SAMPLER_WATCH_PPM", "1000000", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_estimates_unbiased),
		cmocka_unit_test(test_region_membership),
		cmocka_unit_test(test_unsampled_free_skips_region),
		cmocka_unit_test(test_realloc_paths),
		cmocka_unit_test(test_aligned_paths),
		cmocka_unit_test(test_no_tracer),
		cmocka_unit_test(test_threads_and_fork),
		cmocka_unit_test(test_trap_guard),
		cmocka_unit_test(test_watch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
