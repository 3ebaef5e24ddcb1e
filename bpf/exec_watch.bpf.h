/* The daemon's exec watch (watch_all_exec): a process that is not a target is made one
 * at its exec, in the kernel, and an EV_NEWEXEC record carries what the daemon needs to
 * decide (file, comm, parent) without /proc, which a 2 ms process has left before the
 * record is read. Nothing the process does is lost to that latency: the decision takes
 * back what it rejects. Reserve first, mark after: a process is never marked without
 * its record, so an unmarked exec (ring or map full) is counted, never left undecided.
 * Included by alloc_common.bpf.h after the maps and count(). */
#pragma once

/* Set by the daemon before load (sampled mode): mark at exec. Without it (exact mode,
 * where a marked process would trap into the allocation programs on every malloc until
 * rejected, for every exec on the host) the record is sent and nothing is marked. */
const volatile bool mark_at_exec = false;

/* Exact mode: an exec of a file the daemon's rules name (hold_files) is stopped (SIGSTOP)
 * before its first instruction, made a target (as mark_at_exec does), listed in held and
 * announced on the holds ring, whose own thread in the daemon attaches the process's
 * probes and sends SIGCONT; the daemon's watchdog continues a hold older than its bound,
 * and every hold when the daemon dies. Other execs are never held. */
const volatile bool hold_at_exec = false;
#define HOLD_SIGSTOP 19

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_HOLD_FILES_MAX);
	__type(key, struct hold_key);
	__type(value, u8);
} hold_files SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_HELD_MAX);
	__type(key, u32);
	__type(value, struct hold_val);
} held SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ALLOC_HOLDS_RING_BYTES);
} holds SEC(".maps");

/* Holds the watchdog ended late (written by it alone, read by the daemon). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} hold_late SEC(".maps");

static __always_inline bool hold(struct linux_binprm *bprm, u32 tgid, u64 start)
{
	struct hold_key k = {
		.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev),
		.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino),
	};
	struct hold_val v = { .start_ns = start, .held_ns = bpf_ktime_get_ns() };
	struct ev_hold *e;

	if (!bpf_map_lookup_elem(&hold_files, &k))
		return false;
	if (!(e = bpf_ringbuf_reserve(&holds, sizeof(*e), 0)))
		return false;   /* full: not held (its first allocations may be missed) */
	if (bpf_map_update_elem(&held, &tgid, &v, BPF_ANY))
		goto undo;
	if (bpf_map_update_elem(&targets, &tgid, &start, BPF_ANY))
		goto unheld;
	if (bpf_send_signal(HOLD_SIGSTOP)) {
		bpf_map_delete_elem(&targets, &tgid);
		goto unheld;
	}
	e->pid = tgid;
	e->pad = 0;
	e->start_ns = start;
	e->held_ns = v.held_ns;
	e->file = k;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return true;
unheld:
	bpf_map_delete_elem(&held, &tgid);
undo:
	bpf_ringbuf_discard(e, 0);
	return false;
}

static __always_inline int exec_watch(struct task_struct *p, struct linux_binprm *bprm, u32 tgid)
{
	struct ev_newexec *n = bpf_ringbuf_reserve(&events, sizeof(*n), 0);
	u64 start = BPF_CORE_READ(p, group_leader, start_time);
	const char *file;

	if (!n) {
		count(CNT_EXEC_LOST);
		return 0;
	}
	if (mark_at_exec && bpf_map_update_elem(&targets, &tgid, &start, BPF_NOEXIST)) {
		bpf_ringbuf_discard(n, 0);
		count(CNT_EXEC_LOST);
		return 0;
	}
	n->h.type = EV_NEWEXEC;
	n->h.tgid = tgid;
	n->h.start_ns = start;
	n->ts_ns = bpf_ktime_get_ns();
	n->ppid = BPF_CORE_READ(p, real_parent, tgid);
	n->pad = hold_at_exec && hold(bprm, tgid, start) ? NEWEXEC_HELD : 0;
	bpf_probe_read_kernel_str(n->comm, sizeof(n->comm), p->comm);
	/* The file run: a script's interpreter (interp), as /proc/PID/exe shows it. */
	file = BPF_CORE_READ(bprm, interp);
	if (!file)
		file = BPF_CORE_READ(bprm, filename);
	bpf_probe_read_kernel_str(n->filename, sizeof(n->filename), file);
	/* Wake the daemon: the process is traced until it is decided. */
	bpf_ringbuf_submit(n, BPF_RB_FORCE_WAKEUP);
	return 0;
}
