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

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct soft_event *e;

	count(SOFTCNT_SAMPLES);
	if (tgid == 0 || (!all_processes && !bpf_map_lookup_elem(&targets, &tgid))) {
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
