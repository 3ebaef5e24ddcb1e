/* src_soft: a ring record decodes into the access the instruction at its IP makes, with
 * the bytes read from this test binary's file (then from the decode cache); and, as
 * root, the real pipeline (cpu-clock per CPU -> soft.bpf.c -> ring -> decode) finds a
 * spinning thread's loads in the array it reads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "tests/unit/mpd_cmocka.h"
#include "base/stats.h"
#include "daemon/access/src_soft.h"
#include "daemon/access/soft_calib.h"

/* A known instruction at a known address: mov (%rdi),%eax. */
void probe_load(void);
__asm__(".text\n.globl probe_load\n.type probe_load,@function\nprobe_load:\n"
	"movl (%rdi), %eax\nret\n.size probe_load, .-probe_load\n");
/* rep movsb: its samples stand for bytes moved at the run's rep rate. */
void probe_rep(void);
__asm__(".text\n.globl probe_rep\n.type probe_rep,@function\nprobe_rep:\n"
	"rep movsb\nret\n.size probe_rep, .-probe_rep\n");

/* A copy then a fill in one straight-line run, as a memcpy-then-memset loop compiles:
 * rep movsb (rsi -> rdi), then rep stosq from rdx, rcx from r8. */
void probe_copy_fill(void);
__asm__(".text\n.globl probe_copy_fill\n.type probe_copy_fill,@function\nprobe_copy_fill:\n"
	"rep movsb\nmov %rdx, %rdi\nmov %r8, %rcx\nrep stosq\nret\n"
	".size probe_copy_fill, .-probe_copy_fill\n");
/* The offset of its rep stosq: rep movsb (2 bytes), two 3-byte movs. */
#define COPY_FILL_STOS 8

static volatile uint32_t target_word = 7;
#define HOT_WORDS (1 << 16)
static volatile uint64_t hot[HOT_WORDS];

struct seen { uint64_t n, in_target, in_hot, w, target_bytes, hot_bytes; uint32_t size; uint8_t rw; };
static void on_access(void *arg, const struct access_sample *a)
{
	struct seen *s = arg;

	s->n++;
	s->w = a->weight;
	s->size = a->size;
	s->rw = a->rw;
	if (a->addr == (uintptr_t)&target_word) {
		s->in_target++;
		s->target_bytes = access_sample_bytes(a);
	}
	if (a->addr >= (uintptr_t)hot && a->addr < (uintptr_t)(hot + HOT_WORDS)) {
		s->in_hot++;
		s->hot_bytes = access_sample_bytes(a);
	}
}

/* A 1 ms sample (1 ms of CPU time) at probe_load, loading target_word. */
static void load_event(struct soft_event *e)
{
	memset(e, 0, sizeof(*e));
	e->tgid = e->tid = (uint32_t)getpid();
	e->time_ns = 1000;
	e->period = 1000000;
	e->regs[offsetof(struct insn_regs, rip) / 8] = (uintptr_t)probe_load;
	e->regs[offsetof(struct insn_regs, rdi) / 8] = (uintptr_t)&target_word;
	e->regs[offsetof(struct insn_regs, rsp) / 8] = (uintptr_t)e;
}

static void test_handle_offline(void **state)
{
	struct src_soft *ss;
	struct seen seen = {0};
	struct soft_event e;
	struct src_soft_stats st;

	assert_int_equal(src_soft_open_offline(&ss, on_access, &seen), 0);
	load_event(&e);
	/* The window of a sample at probe_load: its load and its ret's stack read, each
	 * standing for half the sample's instructions. */
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 2);
	assert_int_equal(seen.in_target, 1);
	assert_int_equal(seen.w, 1000000ULL * SOFT_EST_INSNS_PER_NS / 2);
	/* bytes: the 4-byte load's width times its weight (DHAT's unit) */
	assert_int_equal(seen.target_bytes, 4 * 1000000ULL * SOFT_EST_INSNS_PER_NS / 2);
	src_soft_stats(ss, &st);
	assert_int_equal(st.from_window, 1);
	assert_int_equal(src_soft_win_stats(ss)->decoded, 1);
	/* again: from the window cache, and the code bytes BPF sent are not needed */
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 2);
	assert_int_equal(src_soft_win_stats(ss)->decoded, 1);
	assert_int_equal(src_soft_win_stats(ss)->samples, 2);
	/* an IP in no mapping, with BPF's bytes: decoded from them (ret: a stack read) */
	e.regs[offsetof(struct insn_regs, rip) / 8] = 0x10;
	e.code[0] = 0xc3;
	e.flags = SOFT_F_CODE;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 1);
	src_soft_stats(ss, &st);
	assert_int_equal(st.code_from_bpf, 1);
	assert_int_equal(st.no_mapping, 1);
	/* ... standing for the sample's instructions times the memory operands per
	 * instruction seen so far (two windows of 2 in 2, after the prior's 16 of 0.4), not
	 * one access per instruction. */
	double mpi = (2 * 1.0 + SOFT_MEM_PER_INSN * SOFT_MEM_PER_INSN_WEIGHT) /
		     (2 + SOFT_MEM_PER_INSN_WEIGHT);
	assert_int_equal(seen.w, (uint64_t)(1000000.0 * SOFT_EST_INSNS_PER_NS * mpi + 0.5));
	/* a PMU record: the address is the hardware's */
	e.flags = SOFT_F_ADDR;
	e.addr = (uintptr_t)&target_word;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 1);
	assert_int_equal(seen.in_target, 3);
	/* A PMU source's sample without a data address: dropped and counted, not decoded
	 * and weighted as a timer sample. */
	struct src_events pebs = { .n = 1 };
	pebs.ev[0].attr.type = PERF_TYPE_RAW;
	pebs.ev[0].attr.sample_period = 10007;
	pebs.ev[0].est_per_sample = 10007;
	src_soft_set_events(ss, &pebs);
	e.flags = 0;
	e.addr = 0;
	e.period = 10007;
	e.regs[offsetof(struct insn_regs, rip) / 8] = (uintptr_t)probe_load;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 0);
	src_soft_stats(ss, &st);
	assert_int_equal(st.pmu_no_addr, 1);
	e.flags = SOFT_F_ADDR;
	e.addr = (uintptr_t)&target_word;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 1);
	assert_int_equal(seen.w, 10007);
	assert_int_equal(seen.in_target, 4);
	/* short record */
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e) - 1), 0);
	src_soft_close(ss);
}

/* A 1 ms sample in probe_rep's rep movsb from hot[] to its second half, rcx left. */
static void rep_event(struct soft_event *e, uint64_t rcx)
{
	memset(e, 0, sizeof(*e));
	e->tgid = e->tid = (uint32_t)getpid();
	e->time_ns = 1000;
	e->period = 1000000;
	e->regs[offsetof(struct insn_regs, rip) / 8] = (uintptr_t)probe_rep;
	e->regs[offsetof(struct insn_regs, rsi) / 8] = (uintptr_t)&hot[0];
	e->regs[offsetof(struct insn_regs, rdi) / 8] = (uintptr_t)&hot[HOT_WORDS / 2];
	e->regs[offsetof(struct insn_regs, rcx) / 8] = rcx;
	e->regs[offsetof(struct insn_regs, rsp) / 8] = (uintptr_t)e;
}

/* A timer sample marked SOFT_F_FAULT (due during its thread's last page fault, near its
 * instruction: bpf/soft.h) is that fault's time when an access it recovers lies in the
 * fault's page: no access delivered, counted. One whose accesses lie elsewhere (a generic
 * load at the same instruction, another page) is the program's, weighed as before. */
static void test_fault_time(void **state)
{
	struct src_soft *ss;
	struct seen seen = {0};
	struct soft_event e;
	struct src_soft_stats st;

	assert_int_equal(src_soft_open_offline(&ss, on_access, &seen), 0);
	load_event(&e);
	e.flags = SOFT_F_FAULT;
	e.fault_addr = ((uintptr_t)&target_word & ~(uintptr_t)4095) + 8;   /* its page */
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 0);
	assert_int_equal(seen.n, 0);
	src_soft_stats(ss, &st);
	assert_int_equal(st.fault_time, 1);
	/* the fault was on another page: the load is the program's */
	e.fault_addr = ((uintptr_t)&target_word | 4095) + 1 + 4096;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 2);
	assert_int_equal(seen.in_target, 1);
	assert_int_equal(seen.w, 1000000ULL * SOFT_EST_INSNS_PER_NS / 2);
	/* unmarked: the same */
	e.flags = 0;
	e.fault_addr = 0;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 2);
	assert_int_equal(seen.in_target, 2);
	src_soft_stats(ss, &st);
	assert_int_equal(st.fault_time, 1);
	/* a rep movsb stopped at a fault of its destination: the fault's time */
	rep_event(&e, 4096);
	e.flags = SOFT_F_FAULT;
	e.fault_addr = (uintptr_t)&hot[HOT_WORDS / 2];
	seen.n = 0;
	assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), 0);
	assert_int_equal(seen.n, 0);
	src_soft_stats(ss, &st);
	assert_int_equal(st.fault_time, 2);
	src_soft_close(ss);
}

/* A sample in rep movsb stands for period x the rep rate in bytes, for its read and for
 * its write, whatever the operand's width; its weight counts 8-byte words. */
static void test_rep_bytes(void **state)
{
	struct src_soft *ss;
	struct seen seen = {0};
	struct soft_event e;

	assert_int_equal(src_soft_open_offline(&ss, on_access, &seen), 0);
	struct soft_rep_curve flat = { .n = 1, .size = { 16384 }, .bpns = { 16.0 } };
	src_soft_set_rep_curve(ss, &flat);
	rep_event(&e, 4096);
	assert_true(src_soft_handle(ss, &e, sizeof(e)) >= 2);
	assert_int_equal(seen.in_hot, 2);
	assert_int_equal(seen.w, 1000000ULL * 16 / SOFT_REP_WORD);
	assert_int_equal(seen.hot_bytes, 1000000ULL * 16);
	src_soft_close(ss);
}

/* The rate follows the copy's size, taken as twice what rcx has left of it: a sample
 * 1 KiB from a copy's end weighs the small copies' rate, one 8 MiB from it the largest
 * size's, and a size between two measured ones gets the rate interpolated in log size. */
static void test_rep_by_size(void **state)
{
	struct soft_rep_curve c = { .n = 2, .size = { 16384, 4194304 }, .bpns = { 100.0, 10.0 } };
	uint64_t w[2];
	struct src_soft *ss;
	struct soft_event e;

	(void)state;
	assert_true(soft_rep_rate(&c, 100) == 100.0 && soft_rep_rate(&c, 1e9) == 10.0);
	assert_true(fabs(soft_rep_rate(&c, 262144) - 55.0) < 1e-9);   /* halfway in log size */
	assert_true(soft_rep_rate(&(struct soft_rep_curve){ .n = 0 }, 4096) == 0);
	char line[128];
	soft_rep_curve_describe(&c, line, sizeof(line));
	assert_string_equal(line, "rep movs 100 bytes per ns at 16 KiB, 10 at 4096 KiB");
	soft_rep_curve_describe(&(struct soft_rep_curve){ .n = 0 }, line, sizeof(line));
	assert_string_equal(line, "rep movs not measured");
	for (int k = 0; k < 2; k++) {
		struct seen seen = {0};
		assert_int_equal(src_soft_open_offline(&ss, on_access, &seen), 0);
		src_soft_set_rep_curve(ss, &c);
		rep_event(&e, k ? 8u << 20 : 1024);
		assert_true(src_soft_handle(ss, &e, sizeof(e)) >= 2);
		assert_int_equal(seen.in_hot, 2);
		w[k] = seen.w;
		src_soft_close(ss);
	}
	assert_int_equal(w[0], 1000000ULL * 100 / SOFT_REP_WORD);
	assert_int_equal(w[1], 1000000ULL * 10 / SOFT_REP_WORD);
}

/* A sample in one rep instruction stands for that instruction's iterations alone: the
 * window around it recovers the other rep instruction of the run too (the fill's rdi
 * from rdx, the copy's source from rsi), which took none of the sample's time. Crediting
 * it a period's iterations as well counted a copy-then-fill loop ~2x (access_patterns'
 * rep: est 2.6x the words moved on an Intel host). */
static void test_rep_only_at_ip(void **state)
{
	struct soft_rep_curve flat = { .n = 1, .size = { 16384 }, .bpns = { 16.0 } };
	struct src_soft *ss;
	struct soft_event e;

	(void)state;
	for (int at_fill = 0; at_fill < 2; at_fill++) {
		struct seen seen = {0};
		assert_int_equal(src_soft_open_offline(&ss, on_access, &seen), 0);
		src_soft_set_rep_curve(ss, &flat);
		rep_event(&e, 4096);
		e.regs[offsetof(struct insn_regs, rip) / 8] =
			(uintptr_t)probe_copy_fill + (at_fill ? COPY_FILL_STOS : 0);
		e.regs[offsetof(struct insn_regs, rdx) / 8] = (uintptr_t)&hot[HOT_WORDS / 4];
		e.regs[offsetof(struct insn_regs, r8) / 8] = 512;
		/* the copy: its read and its write; the fill: its write */
		assert_int_equal(src_soft_handle(ss, &e, sizeof(e)), at_fill ? 1 : 2);
		assert_int_equal(seen.in_hot, at_fill ? 1 : 2);
		assert_int_equal(seen.rw, at_fill ? INSN_WRITE : INSN_READ);   /* the last one */
		assert_int_equal(seen.w, 1000000ULL * 16 / SOFT_REP_WORD);
		src_soft_close(ss);
	}
}

static volatile int stop;
/* Not instrumented: under ASan each load of hot[] would be wrapped in shadow-memory
 * checks, and the samples would land on those instead (seen: 40 of 1700 in hot[]). */
__attribute__((no_sanitize("address", "undefined")))
static void *spin(void *arg)
{
	uint64_t sum = 0;

	while (!stop)
		for (size_t i = 0; i < HOT_WORDS; i += 8)
			sum += hot[i];
	return (void *)(uintptr_t)sum;
}

static void test_live(void **state)
{
	/* 4 kHz per CPU: the reader keeps up under ASan too (at 10 kHz it dropped ring
	 * records in 2 of 4 ASan runs since the windows decode more per sample). */
	struct src_soft_opts o = { .period = 250000, .targets_fd = -1 };
	struct src_soft *ss;
	struct seen seen = {0};
	struct src_soft_stats st;
	char err[256];
	pthread_t th;
	struct timespec t0, t;

	if (geteuid() != 0)
		skip();
	int r = src_soft_open(&ss, &o, on_access, &seen, err, sizeof(err));
	if (r < 0)
		fail_msg("%s", err);
	assert_int_equal(src_soft_add_target(ss, (uint32_t)getpid()), 0);
	assert_int_equal(pthread_create(&th, NULL, spin, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		assert_true(src_soft_poll(ss, 50) >= 0);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 500);
	stop = 1;
	pthread_join(th, NULL);
	src_soft_poll(ss, 0);
	src_soft_stats(ss, &st);
	print_message("events %llu user %llu kernel %llu accesses %llu in_hot %llu no_access %llu\n",
		      (unsigned long long)st.events, (unsigned long long)st.bpf[SOFTCNT_USER],
		      (unsigned long long)st.bpf[SOFTCNT_KERNEL], (unsigned long long)st.accesses,
		      (unsigned long long)seen.in_hot, (unsigned long long)st.no_access);
	const struct insn_stats *is = src_soft_insn_stats(ss);
	for (int i = 0; i < INSN_STATUS_MAX; i++)
		print_message("  %s: %llu\n", insn_status_name(i), (unsigned long long)is->by_status[i]);
	print_message("  code file %llu bpf %llu none %llu no_mapping %llu\n",
		      (unsigned long long)st.code_from_file, (unsigned long long)st.code_from_bpf,
		      (unsigned long long)st.code_unavailable, (unsigned long long)st.no_mapping);
	assert_true(st.nevents_open >= 1);
	assert_true(st.bpf[SOFTCNT_USER] >= 100);
	/* Every record sent was read, but for the few the still-armed events send between
	 * the last poll and the stats read (the polling thread is a target too). */
	assert_true(st.events <= st.bpf[SOFTCNT_USER]);
	assert_true(st.bpf[SOFTCNT_USER] - st.events <= 8);
	assert_int_equal(st.bpf[SOFTCNT_DROP_RINGBUF], 0);
	assert_true(seen.in_hot >= 50);
	assert_true(src_soft_watermark(ss) > 0);
	src_soft_close(ss);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* The child of test_forget_after_exit: spins over hot[] until its parent writes a byte,
 * then for ms more, and exits. Not instrumented (see spin). */
__attribute__((no_sanitize("address", "undefined")))
static void child_spin(int go_fd, uint64_t ms)
{
	uint64_t sum = 0, end = 0;
	char b;

	for (;;) {
		for (size_t i = 0; i < HOT_WORDS; i += 8)
			sum += hot[i];
		if (!end && read(go_fd, &b, 1) == 1)
			end = now_ms() + ms;
		if (end && now_ms() >= end)
			_exit(sum == 1);
	}
}

/* A process's samples still in the ring when it exits were taken under its maps, which
 * are gone by the time the daemon reads them: src_soft_forget reads the ring before it
 * drops its cached maps. The child's first samples load the maps while it runs; then
 * nothing is read for its last 100 ms (a reader behind, as under ASan), it exits and is
 * reaped, and forget comes first. Every one of those samples must still find its
 * mapping (dropped first, each read the maps of a process gone: no_mapping). */
static void test_forget_after_exit(void **state)
{
	struct src_soft_opts o = { .period = 250000, .targets_fd = -1 };
	struct src_soft_stats st0, st1;
	struct src_soft *ss;
	struct seen seen = {0};
	char err[256];
	int go[2], status;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe2(go, O_NONBLOCK), 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		close(go[1]);
		child_spin(go[0], 100);
	}
	close(go[0]);
	int r = src_soft_open(&ss, &o, on_access, &seen, err, sizeof(err));
	if (r < 0) {
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		fail_msg("%s", err);
	}
	assert_int_equal(src_soft_add_target(ss, (uint32_t)c), 0);
	uint64_t t0 = now_ms();
	while (seen.in_hot < 20 && now_ms() - t0 < 5000)
		assert_true(src_soft_poll(ss, 20) >= 0);
	assert_true(seen.in_hot >= 20);
	src_soft_stats(ss, &st0);
	uint64_t hot0 = seen.in_hot;
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(waitpid(c, &status, 0), c);
	close(go[1]);
	src_soft_forget(ss, (uint32_t)c);
	src_soft_poll(ss, 0);
	src_soft_stats(ss, &st1);
	print_message("after the child's exit: %llu records, %llu in hot[], %llu with no mapping\n",
		      (unsigned long long)(st1.events - st0.events),
		      (unsigned long long)(seen.in_hot - hot0),
		      (unsigned long long)(st1.no_mapping - st0.no_mapping));
	assert_true(st1.events - st0.events >= 100);
	assert_int_equal(st1.no_mapping, st0.no_mapping);
	assert_true(seen.in_hot - hot0 >= 50);
	assert_int_equal(st1.bpf[SOFTCNT_DROP_RINGBUF], 0);
	src_soft_close(ss);
}

/* The clock is measured here, not assumed: on x86-64 a value in range, stable to within
 * 2x between two measurements, and the instruction rate follows it. */
static void test_calib(void **state)
{
	(void)state;
#if defined(__x86_64__)
	double a = soft_calib_cycles_per_ns(), b = soft_calib_cycles_per_ns();

	print_message("  calibrated: %.2f, %.2f cycles/ns\n", a, b);
	assert_true(a >= SOFT_CALIB_MIN && a <= SOFT_CALIB_MAX);
	assert_true(b >= SOFT_CALIB_MIN && b <= SOFT_CALIB_MAX);
	assert_true(a < 2 * b && b < 2 * a);
	double r = soft_calib_insns_per_ns(-1);
	assert_true(r > 0 && r < 2 * a * SOFT_EST_IPC && 2 * r > a * SOFT_EST_IPC);
	/* rep movsb moves at least a byte per cycle, and no more than 128, in a cache; every
	 * size is measured. */
	struct soft_rep_curve c;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	soft_calib_rep_curve(&c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("  rep movsb curve measured in %.1f ms\n",
		      (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	for (unsigned i = 0; i < c.n; i++)
		print_message("  rep movsb: %.1f bytes/ns at %.0f KiB\n", c.bpns[i], c.size[i] / 1024);
	assert_int_equal(c.n, SOFT_REP_SIZES);
	assert_true(c.bpns[0] >= a && c.bpns[0] <= 128 * a);
	for (unsigned i = 1; i < c.n; i++)
		assert_true(c.size[i] > c.size[i - 1] && c.bpns[i] >= SOFT_CALIB_REP_MIN);
#else
	assert_true(soft_calib_insns_per_ns(-1) == -1);
#endif
}

/* The rep movsb calibration measures the rate of a typical copy: within [0.75, 1.33] of the
 * median over destinations 128 + 512k bytes past the source modulo 4 KiB. Its old buffers,
 * two back-to-back mallocs, sat 16 bytes apart modulo 4 KiB, where the stores alias the
 * next loads: 0.62x of the median on the AMD EPYC of CI (76 against 123 bytes/ns). */
static void test_calib_rep_skew(void **state)
{
	(void)state;
#if defined(__x86_64__)
	/* Best of three calls each, in rounds that measure every skew in turn: a busy SMT
	 * sibling (or, in CI, a test beside this one) slows a whole call by up to 1.4x and
	 * only slows it, and a round shares whatever load there is among the skews. The
	 * calibration's skew was once measured best of three and the others best of two,
	 * in two runs of calls apart: CI's clean clone saw 1.34x the median. */
	double at[8] = { 0 }, rep = 0;

	for (int i = 0; i < 3; i++) {
		rep = fmax(rep, soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0, SOFT_CALIB_REP_SKEW));
		for (unsigned k = 0; k < 8; k++)
			at[k] = fmax(at[k], soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0,
									   128 + 512 * k));
	}
	double median = stats_median(at, 8);   /* at[] sorted */
	print_message("  rep movsb: calibrated %.1f bytes/ns; over 8 skews %.1f-%.1f, median %.1f; "
		      "16 bytes past: %.1f\n", rep, at[0], at[7], median,
		      soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0, 16));
	assert_true(at[0] > 0 && rep > 0);
	assert_true(rep >= 0.75 * median && rep <= 1.33 * median);
	assert_true(soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0, 0) == 0 &&
		    soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0, 4096) == 0 &&
		    soft_calib_rep_bytes_per_ns_at(0, SOFT_CALIB_REP_SKEW) == 0);
#else
	assert_true(soft_calib_rep_bytes_per_ns_at(SOFT_REP_SIZE0, SOFT_CALIB_REP_SKEW) == 0);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_offline),
		cmocka_unit_test(test_fault_time),
		cmocka_unit_test(test_rep_bytes),
		cmocka_unit_test(test_rep_by_size),
		cmocka_unit_test(test_rep_only_at_ip),
		cmocka_unit_test(test_calib),
		cmocka_unit_test(test_calib_rep_skew),
		cmocka_unit_test(test_live),
		cmocka_unit_test(test_forget_after_exit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
