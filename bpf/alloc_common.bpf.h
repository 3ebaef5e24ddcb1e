/* What the two allocation programs (alloc.bpf.c: exact, sampled.bpf.c: sampled) share:
 * the ring buffer, the target set, the sent-stack set and the drop counters, the helpers
 * on them, the stack-key hash step, and the process lifecycle (sched fork/exec/exit
 * tracepoint programs: children of targets become targets; exec and exit are reported).
 * Include it once, after vmlinux.h, the libbpf headers and alloc.h (or sampled.h); define
 * ALLOC_COUNTERS first to size `counters` for a longer counter enum (default CNT_MAX).
 * The map names are the user-space contract (daemon/alloc/events.c reads them by name). */
#pragma once

#ifndef ALLOC_COUNTERS
#define ALLOC_COUNTERS CNT_MAX
#endif

#define EEXIST 17  /* errno values are not in vmlinux.h */

char LICENSE[] SEC("license") = "GPL";

/* Set by the daemon before load: report every exec (EV_NEWEXEC), not only targets'.
 * `memprofd record` leaves it false. */
const volatile bool watch_all_exec = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ALLOC_RINGBUF_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_TARGETS_MAX);
	__type(key, u32);
	__type(value, u64);            /* process start_ns, 0 = any (set by user space) */
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ALLOC_STACKS_MAX);
	__type(key, u64);
	__type(value, u8);
} sent_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ALLOC_COUNTERS);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void count(u32 c)
{
	u64 *v = bpf_map_lookup_elem(&counters, &c);

	if (v)
		*v += 1;
}

/* Wake the reader only when the ring is a quarter full: a wakeup per record costs an
 * IPI and a context switch, more than the probe itself. The reader consumes after
 * every poll timeout (RECORD_POLL_MS), so records never wait longer than that. */
static __always_inline u64 rb_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ALLOC_RINGBUF_BYTES / 4 ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#define STACK_SENT 0xff       /* sent_stacks value: sent whole */
#define STACK_RETRIES 4       /* sends of a stack whose frames all came back as bare IPs */

/* Whether the stack with this key needs no (more) sending. */
static __always_inline bool stack_sent(u64 key)
{
	u8 *v = bpf_map_lookup_elem(&sent_stacks, &key);

	return v && (*v == STACK_SENT || *v >= STACK_RETRIES);
}

/* Sends the stack record whose first `got` bytes of frames bpf_get_stack filled in, and
 * marks its key as sent. When the kernel cannot take the process's mmap lock at once
 * (threads being created hold it, say) it gives every frame as a bare IP instead of
 * (build id, offset); then the record wakes the reader now, so that it can resolve the
 * IPs from /proc/PID/maps while the process still runs, and the key is sent again by the
 * next allocations from this stack (STACK_RETRIES in all: code with no file behind it
 * never resolves); the reader keeps the best copy. */
static __always_inline void send_stack(struct ev_stack *st, u32 tgid, u64 start_ns, u64 key,
				       long got)
{
	u64 sz = offsetof(struct ev_stack, frames) + (u64)got;
	u32 n = got / sizeof(struct ev_frame);
	bool bare = n > 0;
	u8 mark = STACK_SENT, *tries;

	st->h.type = EV_STACK;
	st->h.tgid = tgid;
	st->h.start_ns = start_ns;
	st->key = key;
	st->nframes = n;
	st->pad = 0;
	for (u32 i = 0; i < ALLOC_MAX_FRAMES; i++) {
		if (i >= n)
			break;
		if (st->frames[i].status == 1)
			bare = false;
	}
	if (sz > sizeof(*st))
		sz = sizeof(*st);
	if (bpf_ringbuf_output(&events, st, sz, bare ? BPF_RB_FORCE_WAKEUP : rb_flags())) {
		count(CNT_DROP_RINGBUF);
		return;       /* user space counts the allocation under an unknown stack */
	}
	if (bare) {
		tries = bpf_map_lookup_elem(&sent_stacks, &key);
		mark = tries ? *tries + 1 : 1;
	}
	bpf_map_update_elem(&sent_stacks, &key, &mark, BPF_ANY);
}

static __always_inline u64 proc_start_ns(void)
{
	return bpf_get_current_task_btf()->group_leader->start_time;
}

static __always_inline bool is_target(u32 tgid)
{
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

/* A stack key hashes its return addresses one at a time from HASH_SEED ^ the process;
 * key | 1, since 0 means "no stack". */
#define HASH_SEED 0xcbf29ce484222325ULL

static __always_inline u64 hash_ip(u64 h, u64 ip)
{
	h ^= ip;
	h *= 0x100000001b3ULL;
	return h ^ (h >> 29);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 ctgid = BPF_CORE_READ(child, tgid);
	u64 start = BPF_CORE_READ(child, start_time);
	struct ev_fork *e;

	if (ctgid == ptgid || !is_target(ptgid))
		return 0;   /* a new thread, or not ours */
	bpf_map_update_elem(&targets, &ctgid, &start, BPF_ANY);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
		return 0;
	}
	e->h.type = EV_FORK;
	e->h.tgid = ctgid;
	e->h.start_ns = start;
	e->ppid = ptgid;
	e->pad = 0;
	e->parent_start_ns = BPF_CORE_READ(parent, group_leader, start_time);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	struct ev_exec *e;

	if (!is_target(tgid)) {
		if (watch_all_exec) {
			struct ev_newexec *n = bpf_ringbuf_reserve(&events, sizeof(*n), 0);
			if (!n) {
				count(CNT_DROP_RINGBUF);
				return 0;
			}
			n->h.type = EV_NEWEXEC;
			n->h.tgid = tgid;
			n->h.start_ns = BPF_CORE_READ(p, group_leader, start_time);
			/* Wake the daemon: the new process runs unprofiled until it is added. */
			bpf_ringbuf_submit(n, BPF_RB_FORCE_WAKEUP);
		}
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
		return 0;
	}
	e->h.type = EV_EXEC;
	e->h.tgid = tgid;
	e->h.start_ns = BPF_CORE_READ(p, group_leader, start_time);
	e->ts_ns = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	e->pad = 0;
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	struct ev_exit *e;

	if (!is_target(tgid))
		return 0;
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;   /* other threads of the process still run */
	bpf_map_delete_elem(&targets, &tgid);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
		return 0;
	}
	e->h.type = EV_EXIT;
	e->h.tgid = tgid;
	e->h.start_ns = BPF_CORE_READ(p, group_leader, start_time);
	e->ts_ns = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	e->exit_code = BPF_CORE_READ(p, exit_code);
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}
