/* Soft access source: a perf_event program on per-CPU cpu-clock events (or a PMU event).
 * For a sample taken in user mode of a target process it sends the user registers, the
 * bytes at the IP and the fs/gs bases; kernel-mode samples of targets and samples of
 * other processes are only counted. Never blocks: a full ring buffer is a counted drop. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "soft.h"

char LICENSE[] SEC("license") = "GPL";

/* Every process, not only those in targets (the daemon's fleet mode). */
const volatile bool all_processes = false;
/* The fault window (bpf/soft.h), set from the first-touch time measured at start. */
const volatile __u64 fault_window_ns = SOFT_FAULT_WINDOW_MIN_NS;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SOFT_RINGBUF_BYTES);
} soft_events SEC(".maps");

/* Same key/value as alloc.bpf.c's targets, so user space may share one map (reuse_fd). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SOFT_TARGETS_MAX);
	__type(key, u32);
	__type(value, u64);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SOFTCNT_MAX);
	__type(key, u32);
	__type(value, u64);
} soft_counters SEC(".maps");

/* Each target thread's last user page fault (by thread: it may resume on another CPU),
 * and when and where the one before it began. */
struct last_fault {
	u64 ip;
	u64 addr;
	u64 ns;
	u64 prev_ip;
	u64 prev_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SOFT_FAULT_THREADS);
	__type(key, u32);
	__type(value, struct last_fault);
} last_fault SEC(".maps");

/* exceptions:page_fault_user's record (x86; its format file): the common fields, then
 * these. vmlinux.h need not carry the event's struct. */
struct fault_tp {
	u64 common;
	u64 address;
	u64 ip;
	u64 error_code;
};

static __always_inline void count(u32 c)
{
	u64 *v = bpf_map_lookup_elem(&soft_counters, &c);

	if (v)
		*v += 1;
}

static __always_inline bool user_mode(struct bpf_perf_event_data *ctx)
{
	/* The verifier allows only full 8-byte loads of the context's registers. */
#if defined(__TARGET_ARCH_x86)
	return (*(volatile u64 *)&ctx->regs.cs & 3) == 3;
#elif defined(__TARGET_ARCH_arm64)
	return (*(volatile u64 *)&ctx->regs.pstate & 0xf) == 0;   /* EL0 */
#else
	return false;
#endif
}

/* The reader polls on its own schedule; a wakeup per sample (an irq_work self-IPI, a VM
 * exit under a hypervisor) is paid by the sampled task. Wake it only past a quarter full. */
static __always_inline u64 rb_flags(void)
{
	return bpf_ringbuf_query(&soft_events, BPF_RB_AVAIL_DATA) > SOFT_RINGBUF_BYTES / 4 ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline bool is_target(u32 tgid)
{
	return tgid != 0 && (all_processes || bpf_map_lookup_elem(&targets, &tgid));
}

/* Attached for timer sources only, where the tracepoint exists (x86). */
SEC("tracepoint/exceptions/page_fault_user")
int on_fault(struct fault_tp *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct last_fault *f;

	if (!is_target(id >> 32))
		return 0;
	f = bpf_map_lookup_elem(&last_fault, &tid);
	if (f) {   /* in place: a thread's faults race only with its own samples' reads */
		f->prev_ip = f->ip;
		f->prev_ns = f->ns;
		f->ip = ctx->ip;
		f->addr = ctx->address;
		f->ns = bpf_ktime_get_ns();
	} else {
		struct last_fault n = { .ip = ctx->ip, .addr = ctx->address,
					.ns = bpf_ktime_get_ns() };
		bpf_map_update_elem(&last_fault, &tid, &n, BPF_ANY);
	}
	return 0;
}

/* When a timer sample was due: its hrtimer's expiry (the handler moves it on after this
 * program), else now. Its delivery comes later (~16 us here, under the hypervisor: every
 * sample); what it stands for is the thread's state at the due time. */
static __always_inline u64 due_ns(struct bpf_perf_event_data *ctx, u64 now)
{
	struct bpf_perf_event_data_kern *k = (void *)ctx;
	struct perf_event *pe = BPF_CORE_READ(k, event);
	u64 due = 0;

	if (pe && bpf_core_field_exists(pe->hw.hrtimer))
		due = BPF_CORE_READ(pe, hw.hrtimer.node.expires);
	return due && due <= now && now - due < SOFT_LATE_MAX_NS ? due : now;
}

static __always_inline bool near(u64 ip, u64 at)
{
	return ip - at + SOFT_FAULT_NEAR < 2 * SOFT_FAULT_NEAR;
}

/* The fault whose time a timer sample of tid (taken now) may stand for (bpf/soft.h):
 * near the thread's last fault's instruction, and due within the window after it began,
 * or after the fault before it began, near it too and less than the window before the
 * last (faults one after another: the sample was due during the earlier one and came
 * once the thread was in the next). NULL: none. */
static __always_inline struct last_fault *fault_of(struct bpf_perf_event_data *ctx, u32 tid,
						       u64 now)
{
	struct last_fault *f = bpf_map_lookup_elem(&last_fault, &tid);
	u64 ip = PT_REGS_IP(&ctx->regs), due;

	if (!f || !near(ip, f->ip))
		return NULL;
	due = due_ns(ctx, now);
	/* Within the window; or later in a long fault: a sample due during one comes once it
	 * ends, later after its due time than it is past the fault's start (one due after
	 * the fault, in the program's own run, comes ~the timer's latency after it). */
	if (due >= f->ns && (due - f->ns < fault_window_ns ||
			     (now - due > due - f->ns && due - f->ns < SOFT_FAULT_WINDOW_MAX_NS)))
		return f;
	if (f->prev_ns && near(ip, f->prev_ip) && due >= f->prev_ns && due < f->ns &&
	    f->ns - f->prev_ns < fault_window_ns)
		return f;
	return NULL;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct soft_event *e;

	count(SOFTCNT_SAMPLES);
	if (!is_target(tgid)) {
		count(SOFTCNT_NOT_TARGET);
		return 0;
	}
	if (!user_mode(ctx)) {
		count(SOFTCNT_KERNEL);
		return 0;
	}
	e = bpf_ringbuf_reserve(&soft_events, sizeof(*e), 0);
	if (!e) {
		count(SOFTCNT_DROP_RINGBUF);
		return 0;
	}
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	e->tgid = tgid;
	e->tid = (u32)id;
	e->start_ns = BPF_CORE_READ(t, group_leader, start_time);
	e->time_ns = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	e->flags = 0;
	e->period = ctx->sample_period;
	e->addr = ctx->addr;
	if (e->addr)
		e->flags |= SOFT_F_ADDR;
	e->fault_addr = 0;
	if (!e->addr) {   /* a timer's sample (a PMU's counts events, not time) */
		struct last_fault *f = fault_of(ctx, (u32)id, e->time_ns);
		if (f) {
			e->flags |= SOFT_F_FAULT;
			e->fault_addr = f->addr;
		}
	}
	e->fs_base = 0;
	e->gs_base = 0;
#if defined(__TARGET_ARCH_x86)
	if (bpf_core_field_exists(t->thread.fsbase)) {
		e->fs_base = BPF_CORE_READ(t, thread.fsbase);
		e->gs_base = BPF_CORE_READ(t, thread.gsbase);
		e->flags |= SOFT_F_FSBASE;
	}
#endif
	__builtin_memcpy(e->regs, &ctx->regs, sizeof(e->regs) < sizeof(ctx->regs) ?
			 sizeof(e->regs) : sizeof(ctx->regs));
	if (bpf_probe_read_user(e->code, sizeof(e->code), (void *)PT_REGS_IP(&ctx->regs)) == 0)
		e->flags |= SOFT_F_CODE;
	else
		count(SOFTCNT_CODE_UNREAD);
	count(SOFTCNT_USER);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}
