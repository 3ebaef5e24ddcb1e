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
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4 ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#define STACK_SENT ALLOC_STACK_SENT
#define STACK_RETRIES ALLOC_STACK_RETRIES

enum key_use { KEY_SEND, KEY_USE, KEY_PENDING, KEY_COPY };

/* What a frame-pointer key asks for: its frames sent (first sight, or bare IPs again),
 * the key itself (checked), its frames and a copy under the allocation's own key (not
 * checked yet: the walk stands where the copy is cut short, as for an undecided
 * process), or only a copy under its own key (the walk is not the allocation's stack). */
static __always_inline enum key_use key_use(u64 key)
{
	u8 *v = bpf_map_lookup_elem(&sent_stacks, &key);

	if (!v)
		return KEY_SEND;
	if (*v == ALLOC_STACK_PENDING)
		return KEY_PENDING;
	if (*v == ALLOC_STACK_CUT)
		return KEY_COPY;
	return *v >= STACK_RETRIES ? KEY_USE : KEY_SEND;
}

/* Whether any of a stack record's first n frames came as (build id, offset): a bpf_loop
 * callback, checked until its states converge (as a counted loop, ~24k instructions of
 * every allocation program's verification). */
struct frames_scan {
	struct ev_stack *st;
	u32 n;
	u32 resolved;
};

static long frame_resolved(u64 i, void *data)
{
	struct frames_scan *fs = data;
	struct ev_stack *st = fs->st;

	if (!st || i >= fs->n || i >= ALLOC_MAX_FRAMES)
		return 1;
	if (st->frames[i].status == 1) {
		fs->resolved = 1;
		return 1;
	}
	return 0;
}

/* Sends the stack record whose first `got` bytes of frames bpf_get_stack filled in, and
 * marks its key as sent, pending user space's check against its copy. When the kernel cannot take the process's mmap lock at once
 * (threads being created hold it, say) it gives every frame as a bare IP instead of
 * (build id, offset); then the record wakes the reader now, so that it can resolve the
 * IPs from /proc/PID/maps while the process still runs, and the key is sent again by the
 * next allocations from this stack (STACK_RETRIES in all: code with no file behind it
 * never resolves); the reader keeps the best copy. */
__noinline int send_stack(struct ev_stack *st, u32 tgid, u64 start_ns, u64 key, long got)
{
	u64 sz = offsetof(struct ev_stack, frames) + (u64)got;
	u32 n = got / sizeof(struct ev_frame);
	bool bare = n > 0;
	u8 mark = ALLOC_STACK_PENDING, *tries;

	if (!st)
		return 0;
	st->h.type = EV_STACK;
	st->h.tgid = tgid;
	st->h.start_ns = start_ns;
	st->key = key;
	st->nframes = n;
	st->pad = 0;
	struct frames_scan fs = { .st = st, .n = n };
	bpf_loop(ALLOC_MAX_FRAMES, frame_resolved, &fs, 0);
	if (fs.resolved)
		bare = false;
	if (sz > sizeof(*st))
		sz = sizeof(*st);
	if (bpf_ringbuf_output(&events, st, sz, bare ? BPF_RB_FORCE_WAKEUP : rb_flags())) {
		count(CNT_DROP_RINGBUF);
		return 0;     /* user space counts the allocation under an unknown stack */
	}
	if (key & ALLOC_USTACK_KEY)
		return 0;     /* an allocation's own key: never looked up */
	if (bare) {
		tries = bpf_map_lookup_elem(&sent_stacks, &key);
		mark = tries ? *tries + 1 : 1;
	}
	bpf_map_update_elem(&sent_stacks, &key, &mark, BPF_ANY);
	return 0;
}

/* The unwinding mode of each process (enum unwind_mode), decided by user space from the
 * objects it maps: frame-pointer walks here, the fast path, only once every object was
 * found to keep frame pointers; until then stacks are copied (the safe default). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_MODES_MAX);
	__type(key, u32);
	__type(value, struct unwind_mode_val);
} unwind_modes SEC(".maps");

struct ustack_scratch {
	struct ev_ustack u;
	/* The page-wise copy's progress (ustack_page): kept here, not on the stack, so
	 * the verifier reads it back as any value and each iteration's state is the last's. */
	u64 pg_off, pg_n, pg_len;
};

/* One scratch record per CPU (indexed by CPU: a per-CPU value is at most 32 KiB); user
 * space sizes it to the possible CPUs before load (ustack_size_scratch). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ustack_scratch);
} ustack_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} ustack_seq SEC(".maps");

static __always_inline u32 unwind_mode(u32 tgid, u64 start_ns)
{
	struct unwind_mode_val *v = bpf_map_lookup_elem(&unwind_modes, &tgid);

	return v && v->start_ns == start_ns ? v->mode : UNWIND_UNDECIDED;
}

/* An allocation's own stack key: ALLOC_USTACK_KEY | per-CPU sequence | CPU. */
static __always_inline u64 ustack_key(void)
{
	u32 zero = 0, cpu = bpf_get_smp_processor_id();
	u64 *seq = bpf_map_lookup_elem(&ustack_seq, &zero);

	if (!seq)
		return 0;
	*seq += 1;
	return ALLOC_USTACK_KEY | ((*seq & 0xffffffffffULL) << 12) | ((u64)(cpu & 0x7ff) << 1) | 1;
}

#define USTACK_PAGES (ALLOC_USTACK_DEEP_MAX / 4096 + 1)   /* page-wise copies after a failed one */
#define USTACK_RING_RESERVE (2 << 20)   /* ring bytes kept for small records (~30k frees) */
#define USTACK_SHRINK_FILL 2            /* past 1/this of the copies' room in use, copies
                                         * shrink linearly to ALLOC_USTACK_MIN at full */
#define USTACK_DEEP_SHARE 16            /* a copy past ALLOC_USTACK_MAX takes at most this
                                         * fraction of the ring's room above the reserve */
#define USTACK_DEEP_FILL 4              /* and only while the ring is under 1/this full (the
                                         * reader keeps up: g++'s cc1plus, exact, lost 60%
                                         * of its records to a reader behind long copies) */

struct ustack_req {
	u64 start_ns;
	u64 stack_hi;      /* end of the mapping holding the stack (0: unknown) */
	u64 caller;        /* sampled mode: the sampler's caller (0: none) */
	u64 key;           /* the key its frame-pointer stack was sent under (an undecided
	                    * process), or 0: make the allocation's own key */
	u32 tgid;
	u32 wake;          /* wake the reader (an undecided process) */
};

/* The page-wise copy of a stack whose one-piece copy failed: a bpf_loop callback, checked
 * until its states converge instead of once per page and path (issue 18: as a counted
 * loop it was ~110k of the ~150k instructions the verifier walked per allocation program,
 * ~0.1 s of every recording's start-up). */
struct ustack_pages {
	u64 sp, cap;       /* the stack pointer, the copy's cap */
	u32 cpu;           /* this CPU's scratch record, which holds the progress */
};

static long ustack_page(u64 i, void *data)
{
	struct ustack_pages *pg = data;
	struct ustack_scratch *s = bpf_map_lookup_elem(&ustack_map, &pg->cpu);
	u64 off, n;

	if (!s)
		return 1;
	off = s->pg_off;
	n = s->pg_n;
	if (off >= pg->cap || n > 4096)
		return 1;
	asm volatile("" : "+r"(off));   /* bounds checked on off itself, */
	if (off >= ALLOC_USTACK_DEEP_MAX) /* not on a derived pointer */
		return 1;
	/* data has a page of slack past ALLOC_USTACK_DEEP_MAX for this */
	if (bpf_probe_read_user(s->u.data + off, n, (void *)(pg->sp + off)))
		return 1;
	off += n;
	s->pg_off = off;
	s->pg_len = off < pg->cap ? off : pg->cap;
	s->pg_n = 4096;
	return 0;
}

/* Sends the registers and the user stack from SP up to stack_hi (at most
 * ALLOC_USTACK_MAX bytes) for unwinding in user space; returns the key it was sent
 * under (q->key, or ALLOC_USTACK_KEY | per-CPU sequence | CPU), or 0 when nothing could
 * be sent. */
__noinline u64 send_ustack(struct pt_regs *ctx, struct ustack_req *q)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct ustack_scratch *s = bpf_map_lookup_elem(&ustack_map, &cpu);
	u64 sp, len, key, stack_hi, cap = ALLOC_USTACK_MAX, room;
	u32 tgid;
	bool wake;

	if (!s || !ctx || !q)
		return 0;
	/* Copies are large: within USTACK_RING_RESERVE of a full ring, the small records
	 * (frees, lifecycle) that keep the counts right go first; the allocation's stack
	 * is counted lost. */
	room = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) - USTACK_RING_RESERVE;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > room) {
		count(CNT_DROP_STACK);
		return 0;
	}
	/* A reader falling behind (a busy machine, a process allocating from deep stacks)
	 * would otherwise see every copy dropped once the ring is full: shorter ones keep the
	 * innermost frames and cost it less to unwind, so the ring drains. */
	u64 used = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA), calm = room / USTACK_SHRINK_FILL;
	if (used > room)
		used = room;
	bool shrink = used > calm;
	if (shrink) {
		cap = ALLOC_USTACK_MAX * (room - used) / (room - calm);
		if (cap < ALLOC_USTACK_MIN)
			cap = ALLOC_USTACK_MIN;
	}
	room -= bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	stack_hi = q->stack_hi;
	tgid = q->tgid;
	wake = q->wake;
	sp = PT_REGS_SP(ctx);
	/* The main thread's stack above its outermost frame (argv, environment) is never
	 * read: user space says where that frame is once it has seen it. */
	struct unwind_mode_val *mv = bpf_map_lookup_elem(&unwind_modes, &tgid);
	bool topped = false;
	if (mv && mv->start_ns == q->start_ns && mv->stack_top > sp && mv->stack_top <= stack_hi) {
		stack_hi = mv->stack_top;
		topped = true;
	}
	/* The first copy of a process wakes the reader: its modules are read from /proc
	 * while it lives (a short-lived one is gone by the next poll). */
	if (mv && mv->start_ns == q->start_ns && !mv->woke) {
		mv->woke = 1;
		wake = true;
	}
	/* A copy that ends at the main thread's known outermost frame holds frames only, and
	 * a process whose walks ran past the usual copy (deep recursion) gets a longer one:
	 * as far as the ring's room allows; past it the walk stops and says `truncated`. */
	if ((topped || (mv && mv->start_ns == q->start_ns && mv->deep)) &&
	    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) <
	    bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / USTACK_DEEP_FILL) {
		cap = room / USTACK_DEEP_SHARE;
		if (cap > ALLOC_USTACK_DEEP_MAX)
			cap = ALLOC_USTACK_DEEP_MAX;
		if (cap < ALLOC_USTACK_MAX)
			cap = ALLOC_USTACK_MAX;
	}
	len = stack_hi > sp ? stack_hi - sp : cap;
	if (len > cap) {
		len = cap;
		if (shrink)
			count(CNT_USTACK_SHORT);
	}
	len &= ALLOC_USTACK_DEEP_MAX * 2 - 1;   /* a bound the verifier can see */
	if (len > ALLOC_USTACK_DEEP_MAX)
		len = ALLOC_USTACK_DEEP_MAX;
	if (len && bpf_probe_read_user(s->u.data, len, (void *)sp)) {
		/* No stack bound known (the mm lock was contended: the copy ran past the
		 * stack's top) or a page not present: copy page by page up to the first
		 * that fails. */
		struct ustack_pages pg = { .sp = sp, .cap = cap, .cpu = cpu };
		s->pg_off = 0;
		s->pg_n = 4096 - (sp & 4095);
		s->pg_len = 0;
		bpf_loop(USTACK_PAGES, ustack_page, &pg, 0);
		len = s->pg_len;
	}
	key = q->key ? q->key : ustack_key();
	if (!key)
		return 0;
	s->u.h.type = EV_USTACK;
	s->u.h.tgid = tgid;
	s->u.h.start_ns = q->start_ns;
	s->u.key = key;
	s->u.caller = q->caller;
	s->u.regs[0] = ctx->ax;
	s->u.regs[1] = ctx->dx;
	s->u.regs[2] = ctx->cx;
	s->u.regs[3] = ctx->bx;
	s->u.regs[4] = ctx->si;
	s->u.regs[5] = ctx->di;
	s->u.regs[6] = ctx->bp;
	s->u.regs[7] = sp;
	s->u.regs[8] = ctx->r8;
	s->u.regs[9] = ctx->r9;
	s->u.regs[10] = ctx->r10;
	s->u.regs[11] = ctx->r11;
	s->u.regs[12] = ctx->r12;
	s->u.regs[13] = ctx->r13;
	s->u.regs[14] = ctx->r14;
	s->u.regs[15] = ctx->r15;
	s->u.regs[16] = PT_REGS_IP(ctx);
	s->u.sp = sp;
	s->u.len = len;
	s->u.pad = 0;
	len += offsetof(struct ev_ustack, data);
	if (len > sizeof(s->u))
		len = sizeof(s->u);
	/* An undecided process wakes the reader: its decision may let BPF walk frame
	 * pointers instead of copying every stack. */
	if (bpf_ringbuf_output(&events, &s->u, len, wake ? BPF_RB_FORCE_WAKEUP : rb_flags())) {
		count(CNT_DROP_RINGBUF);
		return 0;
	}
	count(CNT_USTACKS);
	return key;
}

/* The bounds of the mapping that holds the user SP (the thread's stack). */
struct vma_range {
	u64 lo, hi;
};

static long vma_bounds(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_range *r = data;

	r->lo = vma->vm_start;
	r->hi = vma->vm_end;
	return 0;
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

#include "exec_watch.bpf.h"
#include "mmap_watch.bpf.h"

SEC("raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 ctgid = BPF_CORE_READ(child, tgid);
	u64 start = BPF_CORE_READ(child, start_time);
	struct ev_fork *e;

	if (ctgid == ptgid || !is_target(ptgid))
		return 0;   /* a new thread, or not ours */
	bpf_map_update_elem(&targets, &ctgid, &start, BPF_ANY);
	/* The child runs the parent's image: its stacks are taken the same way. */
	struct unwind_mode_val *pm = bpf_map_lookup_elem(&unwind_modes, &ptgid);
	if (pm && pm->start_ns == BPF_CORE_READ(parent, group_leader, start_time)) {
		struct unwind_mode_val cm = { .start_ns = start, .mode = pm->mode,
					      .stack_top = pm->stack_top };
		bpf_map_update_elem(&unwind_modes, &ctgid, &cm, BPF_ANY);
	}
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

SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	struct ev_exec *e;

	if (!is_target(tgid))
		return watch_all_exec ? exec_watch(p, bprm, tgid) : 0;
	bpf_map_delete_elem(&unwind_modes, &tgid);   /* a new image: its objects are unchecked */
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
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
	e->mm = (u64)BPF_CORE_READ(p, mm);
	/* Wake the reader: it decides from the new image how its stacks are taken. */
	u64 start_ns = e->h.start_ns;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	exec_mappings(tgid, start_ns);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	struct ev_exit *e;

	if (!is_target(tgid))
		return 0;
#ifdef ALLOC_ON_THREAD_EXIT
	ALLOC_ON_THREAD_EXIT();   /* every thread's exit (the current task), before the process's */
#endif
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;   /* other threads of the process still run */
	bpf_map_delete_elem(&targets, &tgid);
	bpf_map_delete_elem(&unwind_modes, &tgid);
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
