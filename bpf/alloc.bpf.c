/* Exact allocation tracking: uprobes on the malloc family and operator new/delete,
 * uretprobes for results. Invariants: only processes in `targets` are traced; the
 * outermost allocator call of a thread is the one recorded (nested calls, e.g. operator
 * new -> malloc, are skipped); every lost record or untracked call is counted in
 * `counters`, never dropped silently. The stack is taken at the uretprobe, where the
 * user IP is the return address into the allocator's caller. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "alloc.h"
/* alloc_common.bpf.h's exit program keeps each exiting thread's probe time (below). */
static __always_inline void thread_exit_probe_time(void);
#define ALLOC_ON_THREAD_EXIT() thread_exit_probe_time()
#include "alloc_common.bpf.h"
/* libbpf 1.1 has no BPF_UPROBE: BPF_KPROBE reads pt_regs the same way for uprobes. */

/* Per-thread state, in task-local storage: found from the task in a few loads, written
 * in place, freed by the kernel with the thread (a hash keyed by thread id cost a
 * lookup plus a copying update on every call). */
struct tstate {
	unsigned long long depth;
	unsigned long long kind;
	unsigned long long size;
	unsigned long long old;       /* realloc: the old pointer */
	unsigned long long memptr;    /* posix_memalign: where the result is written */
	unsigned long long sp;        /* user SP at the outermost entry */
	unsigned long long freed;     /* last pointer freed by operator delete (skip its inner free) */
	unsigned long long stack_lo;  /* the mapping that holds the thread's stack: bounds the */
	unsigned long long stack_hi;  /* frame-pointer walk (0, 0: not looked up yet) */
	unsigned long long exec_id;   /* the image it was written under (task's self_exec_id) */
	unsigned long long probe_ns;  /* time this thread has spent in our probes (below) */
	unsigned long long entry_end; /* when its last entry program ended (0: consumed) */
	unsigned long long proc_seen; /* probe_ns when it last went to the process's clock */
	unsigned long long win_start; /* the process window its win_probe is of */
	unsigned long long win_probe; /* its probe time in that window */
	unsigned long long gap_lo;    /* its calls' gaps, a low running estimate (gap_lo_step) */
	unsigned long long entry_flt; /* its page faults (minor + major) at entry_end */
	unsigned long long waits_seen;/* its run_delay + 1 when last looked at (0: not yet) */
};

/* Lifetimes net of the probes. Exact mode traps every allocator call twice (entry and
 * return) and every free once, and copies a stack: on a thread that allocates often
 * that stretches its objects' lifetimes many times over (db_bench's main thread 26x,
 * README), and short lives hit MemProf's 1 ms floor while long ones stretch, which
 * reorders densities. Each program on a target thread adds its own run time (measured
 * here) plus what a hit costs beyond it to the thread's probe_ns; an object's probe
 * time is its allocating thread's probe_ns at its free (or at the thread's exit) less
 * the value at its allocation. What a hit costs beyond the program (the trap, the
 * kernel's uprobe dispatch, a single step where the probed instruction is not emulated,
 * the return-address hijack: 4.7-6.6 us an entry hit and 0.8-1.9 us a return hit under
 * this project's hypervisor, far more than the programs) is only partly visible from
 * BPF. Between an entry program's end and its return program's start lie the entry
 * trap's way out (and its single step), the allocator's own work (tens of ns) and the
 * return trap's way in: that gap is measured per call (under ALLOC_PROBE_GAP_MAX_NS).
 * The rest, the entry trap's way in and the return trap's way out, and a whole hit
 * where no gap is seen (a free; an outer call whose inner call took the gap), user
 * space measures before any target runs, by timing calls of its own function with
 * calib_entry and calib_ret attached and without (alloc_exact.c exact_calibrate), and
 * writes here. 0 (not measured) leaves the programs' time and the gaps.
 * A thread's own probes are not all that stretch its objects: a thread that waits for
 * another (db_bench's main thread holds the database's objects while its benchmark
 * thread reads, 15 s of probes in 19 s) is stretched by the other's. Each process has a
 * probe clock (proc_probe_ns): over each ALLOC_PROBE_WINDOW_NS window it advances by the
 * most probe time any one of its threads had in that window. That is the critical path
 * where one thread leads (a waiting thread's is its worker's), one thread's worth where
 * several probe alike in parallel, and about as fast as wall time at most. An object's
 * probe time is the larger of its own thread's and the process clock's over its life;
 * one freed by another thread takes the clock's. */
__u64 hit_entry_ns = 0;   /* an entry probe's hit, beyond its program */
__u64 hit_ret_ns = 0;     /* a return probe's hit, beyond its program */
__u64 hit_edges_ns = 0;   /* of both, what lies outside the gap */
/* A hit costs more in some processes than in others (in an ASan-built recorder, 1.3-1.7x
 * what it costs the targets): the three costs above scale by a thread's gaps against
 * the recorder's own, each a low running estimate (gap_lo_step): calib_gap_lo, written
 * by calib_ret; user space copies it to calib_gap_ns when the costs are set. */
__u64 calib_gap_ns = 0;
__u64 calib_entry_end = 0, calib_gap_sum = 0, calib_gap_n = 0, calib_gap_lo = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ALLOC_TARGETS_MAX);
	__type(key, u32);           /* tgid */
	__type(value, struct proc_probe);
} proc_probe_ns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ALLOC_THREAD_PROBE_MAX);
	__type(key, u32);           /* thread id */
	__type(value, u64);         /* its probe_ns when it exited */
} thread_probe_ns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ALLOC_LIVE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct live_key);
	__type(value, struct live_val);
} live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} threads SEC(".maps");

struct scratch {
	u64 chunk[ALLOC_STACK_CHUNK / 8];   /* user stack copied by the walk */
	struct ev_stack st;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

/* The calling thread's state; created when `create`. NULL (counted) when the kernel
 * could not allocate it or its storage was busy (a program nested on this CPU). A state
 * written before the thread's exec is reset: the storage outlives exec, and a call left
 * open in the old image (entered before its return probe was attached) made every call
 * of the new one, on a stack placed lower, count as nested (none recorded). */
static __always_inline struct tstate *thread_state(bool create)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct tstate *st = bpf_task_storage_get(&threads, t, NULL,
						 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	u64 exec_id = t->self_exec_id;

	if (!st && create)
		count(CNT_DROP_STATE_FULL);
	if (st && st->exec_id != exec_id)
		*st = (struct tstate){ .exec_id = exec_id };
	return st;
}

/* A running estimate that follows a series of gaps down fast and up slowly: about a low
 * quantile, so that preemption and an allocator's slow path weigh little. */
static __always_inline u64 gap_lo_step(u64 lo, u64 gap)
{
	if (!lo)
		return gap;
	return gap < lo ? lo - (lo - gap) / 4 : lo + (gap - lo) / 64;
}

/* The current thread's page faults so far. A gap a fault fell in is the allocator's
 * time (under this project's hypervisor a first touch costs 10-16 us: a short-lived
 * process's first mallocs grow the heap), not the probes': taken as such, it made one
 * call's hit 5-25x the calibrated cost, through gap_lo too, and a killed process's
 * blocks, live ~1 ms, came out with no lifetime left. */
static __always_inline u64 thread_faults(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return t->min_flt + t->maj_flt;
}

/* The thread's waits for a CPU since it was last looked at (the scheduler's run_delay:
 * runnable, not running) go to its probe time, and are returned. Exact mode's recorder
 * takes a CPU of its own for a thread that allocates all the time (db_bench: 7.5 s of
 * 8.5 s), and on a host with fewer idle CPUs than runnable threads the program's threads
 * wait for one: time its objects would not have lived unobserved on a host with a CPU to
 * spare. A program that waits for CPUs with no recorder beside it (a host loaded
 * anyway) has those waits taken too: its lifetimes are then as on a host with room. A
 * kernel without sched_info (CONFIG_SCHED_INFO) takes nothing. */
static __always_inline u64 thread_waits(struct tstate *st)
{
	struct task_struct *t = bpf_get_current_task_btf();
	u64 rd, d = 0;

	if (!bpf_core_field_exists(t->sched_info))
		return 0;
	rd = BPF_CORE_READ(t, sched_info.run_delay) + 1;
	if (st->waits_seen && rd > st->waits_seen)
		d = rd - st->waits_seen;
	st->waits_seen = rd;
	st->probe_ns += d;
	return d;
}

/* A measured hit cost (above) as it is for this thread: scaled by its gaps. */
static __always_inline u64 hit_scaled(const struct tstate *st, u64 ns)
{
	u64 c = calib_gap_ns;

	return st->gap_lo && c ? ns * st->gap_lo / c : ns;
}

/* A program that started at t0 ends: its run time and its hit's cost go to the thread. */
static __always_inline void probe_done(struct tstate *st, u64 t0, u64 hit)
{
	st->probe_ns += bpf_ktime_get_ns() - t0 + hit;
}

/* An entry program that started at t0 ends: its run time goes to the thread, and the gap
 * its return program measures starts, with the thread's fault count then. */
static __always_inline void entry_done(struct tstate *st, u64 t0)
{
	probe_done(st, t0, 0);
	st->entry_flt = thread_faults();
	st->entry_end = bpf_ktime_get_ns();
}

/* The process's probe clock now, its open window's most included (0: none yet). */
static __always_inline u64 proc_clock(u32 tgid)
{
	struct proc_probe *pp = bpf_map_lookup_elem(&proc_probe_ns, &tgid);

	return pp ? pp->clock + pp->win_max : 0;
}

/* The thread's probe time up to `upto` (>= its proc_seen) goes to its share of the
 * process's open window, which closes into the clock once ALLOC_PROBE_WINDOW_NS old;
 * returns the process's clock then (proc_clock). Threads of a process race here; a lost
 * update costs at most one window's maximum. */
static __always_inline u64 proc_advance_to(u32 tgid, struct tstate *st, u64 upto)
{
	u64 now = bpf_ktime_get_ns(), d = upto - st->proc_seen;
	struct proc_probe *pp = bpf_map_lookup_elem(&proc_probe_ns, &tgid);

	st->proc_seen = upto;
	if (!pp) {
		struct proc_probe init = { .win_start = now, .win_max = d };
		bpf_map_update_elem(&proc_probe_ns, &tgid, &init, BPF_NOEXIST);
		st->win_start = now;
		st->win_probe = d;
		return d;
	}
	if (now - pp->win_start > ALLOC_PROBE_WINDOW_NS) {
		pp->clock += pp->win_max;
		pp->win_start = now;
		pp->win_max = 0;
	}
	if (st->win_start != pp->win_start) {
		st->win_start = pp->win_start;
		st->win_probe = 0;
	}
	st->win_probe += d;
	if (st->win_probe > pp->win_max)
		pp->win_max = st->win_probe;
	return pp->clock + pp->win_max;
}

/* All of the thread's probe time so far goes to the process's clock. Called by return
 * and free programs: an entry's time goes with its return. */
static __always_inline void proc_advance(u32 tgid, struct tstate *st)
{
	proc_advance_to(tgid, st, st->probe_ns);
}

/* At sched_process_exit (a raw tracepoint: its task argument is a plain scalar to the
 * verifier), the exiting thread is the current task. */
static __always_inline void thread_exit_probe_time(void)
{
	struct tstate *st = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), NULL, 0);
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u64 v;

	if (!st)
		return;
	thread_waits(st);
	v = st->probe_ns;
	bpf_map_update_elem(&thread_probe_ns, &tid, &v, BPF_ANY);
}

/* n * size, or ~0 when it overflows (the call then fails and returns NULL). */
static __always_inline u64 mul_sat(u64 n, u64 size)
{
	u64 lim = ~0ULL;

	/* Opaque limit: clang would turn the check into a 128-bit multiply BPF lacks. */
	asm volatile("" : "+r"(lim));
	if (size && n > lim / size)
		return ~0ULL;
	return n * size;
}

static __always_inline int on_entry(struct pt_regs *ctx, u64 t0, u64 kind, u64 size, u64 old,
				    u64 memptr)
{
	u64 sp = PT_REGS_SP(ctx);
	struct tstate *st;

	if (!is_target(bpf_get_current_pid_tgid() >> 32) || !(st = thread_state(true)))
		return 0;
	thread_waits(st);
	if (st->depth > 0 && sp < st->sp) {
		/* Called from inside an allocator call still on the stack. */
		st->depth++;
		count(CNT_NESTED);
		entry_done(st, t0);
		return 0;
	}
	/* Outermost call (a stale state whose frame was unwound without a return is reset). */
	st->depth = 1;
	st->kind = kind;
	st->size = size;
	st->old = old;
	st->memptr = memptr;
	st->sp = sp;
	entry_done(st, t0);
	return 0;
}

struct walk {
	u64 lo, hi;    /* in and out: the mapping that holds the thread's stack (0, 0: unknown) */
	u64 seed;      /* in: the hash's seed (the process) */
	u64 key;       /* out: the stack key, a hash of the return addresses (never 0) */
};

/* The user stack by frame pointers from the registers at the return probe: the return
 * address into the allocator's caller, then one return address per frame, as the
 * kernel's walk (bpf_get_stack) gives them; hashed into w->key. Unlike the kernel's, it
 * ends without a fault: a frame is read only if it lies above the previous one and
 * inside the mapping that holds the thread's stack (looked up once per thread and
 * stack), so the chain's end (a null or garbage frame pointer from code built without
 * them) is seen before it is dereferenced. And it copies the stack ALLOC_STACK_CHUNK
 * bytes at a time, not 16 bytes per frame: each copy from user memory has a fixed cost
 * several times that of the bytes. Returns the number of return addresses (0 if w is
 * NULL). A global function: the verifier checks it once, not once per path that leads
 * to it. */
struct walk_state {
	u64 sp, fp, hi;        /* the next frame is at fp, inside [sp, hi) */
	u64 base, len;         /* scratch chunk holds the user bytes [base, base + len) */
	u64 h;                 /* hash of the return addresses so far */
	u32 n;                 /* how many */
};

/* One frame: a bpf_loop callback, which the verifier checks until its states converge
 * (not once per iteration, as a counted loop's body). */
static long walk_frame(u64 i, void *data)
{
	struct walk_state *ws = data;
	u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	u64 fp = ws->fp, off, len;

	if (!s || fp < ws->sp || fp > ws->hi - 16 || (fp & 7))
		return 1;
	if (fp < ws->base || fp + 16 > ws->base + ws->len) {
		/* The frame is not in the copy: copy from it on. A chunk that fails
		 * (a page in it not present) is retried as the frame alone. */
		len = ws->hi - fp;
		if (len > ALLOC_STACK_CHUNK)
			len = ALLOC_STACK_CHUNK;
		if (bpf_probe_read_user(s->chunk, len, (void *)fp)) {
			len = 16;
			if (bpf_probe_read_user(s->chunk, len, (void *)fp))
				return 1;
		}
		ws->base = fp;
		ws->len = len;
	}
	off = (fp - ws->base) / 8;
	ws->h = hash_ip(ws->h, s->chunk[(off + 1) & (ALLOC_STACK_CHUNK / 8 - 1)]);
	ws->sp = fp + 16;
	ws->fp = s->chunk[off & (ALLOC_STACK_CHUNK / 8 - 1)];
	ws->n++;
	return 0;
}

__attribute__((noinline)) int walk_user_stack(struct pt_regs *ctx, struct walk *w)
{
	struct walk_state ws = { .hi = ~0ULL, .n = 1 };

	if (!w || !ctx)
		return 0;
	ws.sp = PT_REGS_SP(ctx);
	ws.fp = PT_REGS_FP(ctx);
	if (ws.sp < w->lo || ws.sp >= w->hi) {
		struct vma_range r = {};
		/* Fails only if the mm's lock is contended: walk unbounded this time. */
		if (bpf_find_vma(bpf_get_current_task_btf(), ws.sp, vma_bounds, &r, 0) == 0) {
			w->lo = r.lo;
			w->hi = r.hi;
		}
	}
	if (ws.sp >= w->lo && ws.sp < w->hi)
		ws.hi = w->hi;
	ws.h = hash_ip(w->seed ^ HASH_SEED, PT_REGS_IP(ctx));
	bpf_loop(ALLOC_MAX_FRAMES - 1, walk_frame, &ws, 0);
	w->key = (ws.h | 1) & ~ALLOC_USTACK_KEY;
	return ws.n;
}

/* Stack key for the current user stack; sends the frames the first time it is seen. */
static __always_inline u64 stack_key(struct pt_regs *ctx, struct tstate *st, u32 tgid,
				     u64 start_ns)
{
	u32 zero = 0;
	struct walk w = { .lo = st->stack_lo, .hi = st->stack_hi, .seed = ((u64)tgid << 32) ^ start_ns };
	int n;
	struct scratch *s;
	long got;
	u64 key;

	u32 mode = unwind_mode(tgid, start_ns);
	u64 sp = PT_REGS_SP(ctx);
	struct ustack_req q = { .start_ns = start_ns, .tgid = tgid };

	if (mode == UNWIND_DWARF) {
		if (sp < st->stack_lo || sp >= st->stack_hi) {
			struct vma_range r = {};
			if (bpf_find_vma(bpf_get_current_task_btf(), sp, vma_bounds, &r, 0) == 0) {
				st->stack_lo = r.lo;
				st->stack_hi = r.hi;
			}
		}
		q.stack_hi = sp >= st->stack_lo && sp < st->stack_hi ? st->stack_hi : 0;
		return send_ustack(ctx, &q);
	}
	n = walk_user_stack(ctx, &w);
	s = bpf_map_lookup_elem(&scratch_map, &zero);
	key = w.key;
	st->stack_lo = w.lo;
	st->stack_hi = w.hi;
	if (!s || n <= 0)
		return 0;
	/* Until user space has checked the process's objects, or a key's walk against its
	 * first copy, each allocation has its own key, its frame-pointer stack and a copy, which
	 * replaces that stack unless cut shorter. */
	if (mode == UNWIND_UNDECIDED) {
		key = ustack_key();
	} else {
		enum key_use use = key_use(key);
		if (use == KEY_USE)
			return key;
		if (use == KEY_COPY) {   /* copied under the allocation's own key */
			q.stack_hi = sp >= w.lo && sp < w.hi ? w.hi : 0;
			return send_ustack(ctx, &q);
		}
		if (use == KEY_PENDING)
			key = ustack_key();
	}

	/* First sight: the same frames as (build id, offset), resolved by the kernel's own
	 * walk, cut where ours ended so the frames are exactly what the key hashed. */
	got = bpf_get_stack(ctx, s->st.frames, sizeof(s->st.frames),
			    BPF_F_USER_STACK | BPF_F_USER_BUILD_ID);
	if (got <= 0) {
		count(CNT_DROP_STACK);
		return 0;
	}
	if (n < ALLOC_MAX_FRAMES && got > (long)(n * sizeof(struct ev_frame)))
		got = n * sizeof(struct ev_frame);
	send_stack(&s->st, tgid, start_ns, key, got);
	/* The first sight of a frame-pointer key sends a copy too: the context is the copy's
	 * DWARF stack (the same whichever way the process is walked), and a walk cut by an
	 * object that uses %rbp as a plain register is caught (daemon/alloc/ustack.c). */
	q.stack_hi = sp >= w.lo && sp < w.hi ? w.hi : 0;
	q.key = key;
	q.wake = 1;   /* the reader checks the key at once: its allocations are copied until then */
	send_ustack(ctx, &q);
	return key;
}

static __always_inline void track_alloc(struct pt_regs *ctx, struct tstate *st, u32 tgid,
					u64 addr, u64 size, u64 t0, u64 hit)
{
	u64 start_ns = proc_start_ns();
	struct live_key k = { .tgid = tgid, .addr = addr };
	struct live_val v = {
		.size = size,
		.start_ns = start_ns,
		.cpu = bpf_get_smp_processor_id(),
		.tid = (u32)bpf_get_current_pid_tgid(),
	};
	long err;

	v.key = stack_key(ctx, st, tgid, start_ns);
	v.ts_ns = bpf_ktime_get_ns();
	v.probe_ns = st->probe_ns + (v.ts_ns - t0) + hit;
	/* The object's baseline on the process's clock holds the allocating call's probe
	 * time so far (entry program, stack walk and copy, gap, waits), all before its first
	 * timestamp: read before that went in, the clock's advance over the life took it out
	 * of the life (a 20 ms object 14-30 us short). The rest of this call's time goes in
	 * at its proc_advance. */
	v.proc_probe_ns = proc_advance_to(tgid, st, v.probe_ns);
	err = bpf_map_update_elem(&live, &k, &v, BPF_NOEXIST);
	if (err == -EEXIST) {
		count(CNT_OVERWRITTEN);
		err = bpf_map_update_elem(&live, &k, &v, BPF_ANY);
	}
	if (err)
		count(CNT_DROP_LIVE_FULL);
	else
		count(CNT_ALLOCS);
}

/* Returns true if ptr was a tracked allocation (its death has been sent). st: the
 * calling thread's state (NULL: none), whose program started at t0. */
static __always_inline bool track_free(u32 tgid, u64 ptr, struct tstate *st, u64 t0)
{
	struct live_key k = { .tgid = tgid, .addr = ptr };
	struct live_val *v = bpf_map_lookup_elem(&live, &k);
	struct ev_free *e;

	if (!v)
		return false;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
	} else {
		e->h.type = EV_FREE;
		e->h.tgid = tgid;
		e->h.start_ns = v->start_ns;
		e->key = v->key;
		e->addr = ptr;
		e->size = v->size;
		e->alloc_ns = v->ts_ns;
		e->free_ns = bpf_ktime_get_ns();
		e->probe_ns = 0;
		u64 now = st ? st->probe_ns + (e->free_ns - t0) : 0, pnow = proc_clock(tgid);
		if (st && v->tid == (u32)bpf_get_current_pid_tgid() && now > v->probe_ns)
			e->probe_ns = now - v->probe_ns;
		if (pnow > v->proc_probe_ns && pnow - v->proc_probe_ns > e->probe_ns)
			e->probe_ns = pnow - v->proc_probe_ns;
		e->alloc_cpu = v->cpu;
		e->free_cpu = bpf_get_smp_processor_id();
		bpf_ringbuf_submit(e, rb_flags());
		count(CNT_FREES);
	}
	bpf_map_delete_elem(&live, &k);
	return true;
}

/* One entry program for every allocation function: the attach cookie says which kind
 * it is (enum alloc_kind), so a binary needs one multi-uprobe link, not one per kind. */
SEC("uprobe")
int BPF_KPROBE(alloc_entry, u64 a1, u64 a2, u64 a3)
{
	u64 t0 = bpf_ktime_get_ns();

	switch (bpf_get_attach_cookie(ctx)) {
	case AK_SIZE1: return on_entry(ctx, t0, AK_SIZE1, a1, 0, 0);
	case AK_CALLOC: return on_entry(ctx, t0, AK_CALLOC, mul_sat(a1, a2), 0, 0);
	case AK_SIZE2: return on_entry(ctx, t0, AK_SIZE2, a2, 0, 0);
	case AK_REALLOC: return on_entry(ctx, t0, AK_REALLOC, a2, a1, 0);
	case AK_REALLOCARRAY: return on_entry(ctx, t0, AK_REALLOCARRAY, mul_sat(a2, a3), a1, 0);
	case AK_POSIX_MEMALIGN: return on_entry(ctx, t0, AK_POSIX_MEMALIGN, a3, 0, a1);
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_ret, u64 ret)
{
	u64 t0 = bpf_ktime_get_ns();
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct tstate *st = thread_state(false);
	u64 kind, size, old, addr = ret, hit;

	if (!st && is_target(tgid))
		count(CNT_DROP_STATE_FULL);
	if (!st || st->depth == 0)
		return 0;
	/* This call's hits beyond the two programs: the gap and the edges, or as measured
	 * (a gap with a page fault in it is the allocator's: thread_faults; one the thread
	 * waited for a CPU in has its wait taken apart: thread_waits). */
	u64 waited = thread_waits(st);
	if (st->entry_end && t0 > st->entry_end && t0 - st->entry_end < ALLOC_PROBE_GAP_MAX_NS &&
	    thread_faults() == st->entry_flt && !waited) {
		/* From the recorder's own gap: a process's first calls (cold caches, the
		 * uprobes' first slot) would set a thread's scale high for its next ones. */
		st->gap_lo = gap_lo_step(st->gap_lo ? st->gap_lo : calib_gap_ns, t0 - st->entry_end);
		hit = t0 - st->entry_end + hit_scaled(st, hit_edges_ns);
	} else {
		hit = hit_scaled(st, hit_entry_ns + hit_ret_ns);
	}
	st->entry_end = 0;
	if (st->depth > 1) {
		st->depth--;
		probe_done(st, t0, hit);
		proc_advance(tgid, st);
		return 0;
	}
	st->depth = 0;
	kind = st->kind;
	size = st->size;
	old = st->old;
	if (kind == AK_POSIX_MEMALIGN) {
		addr = 0;
		if ((int)ret == 0 && bpf_probe_read_user(&addr, sizeof(addr), (void *)st->memptr))
			addr = 0;
	}
	if ((kind == AK_REALLOC || kind == AK_REALLOCARRAY) && old && (addr || size == 0)) {
		if (!track_free(tgid, old, st, t0))
			count(CNT_UNMATCHED_FREE);
	}
	if (addr)
		track_alloc(ctx, st, tgid, addr, size, t0, hit);
	probe_done(st, t0, hit);
	proc_advance(tgid, st);
	return 0;
}

/* free and every operator delete; cookie FK_DELETE for the latter, whose inner call to
 * free must not count as a free of an unknown pointer. */
SEC("uprobe")
int BPF_KPROBE(free_entry, u64 ptr)
{
	u64 t0 = bpf_ktime_get_ns();
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct tstate *st;

	if (!ptr || !is_target(tgid))
		return 0;
	st = thread_state(false);
	if (st)
		thread_waits(st);
	if (bpf_get_attach_cookie(ctx) == FK_DELETE) {
		if (!track_free(tgid, ptr, st, t0)) {
			count(CNT_UNMATCHED_FREE);
			goto out;
		}
		if (!st)
			st = thread_state(true);
		if (st)
			st->freed = ptr;
		goto out;
	}
	if (track_free(tgid, ptr, st, t0))
		goto out;
	if (st && st->freed == ptr) {
		st->freed = 0;     /* operator delete's own free: already accounted */
		goto out;
	}
	count(CNT_UNMATCHED_FREE);
out:
	if (st) {
		probe_done(st, t0, hit_scaled(st, hit_entry_ns));
		proc_advance(tgid, st);
	}
	return 0;
}

/* exact_calibrate's probes on a function of the recorder's own: they cost what any hit
 * costs beyond its program, and nothing more. */
SEC("uprobe")
int BPF_KPROBE(calib_entry)
{
	calib_entry_end = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(calib_ret)
{
	u64 now = bpf_ktime_get_ns(), end = calib_entry_end;

	if (end && now > end && now - end < ALLOC_PROBE_GAP_MAX_NS) {
		calib_gap_sum += now - end;
		calib_gap_n++;
		calib_gap_lo = gap_lo_step(calib_gap_lo, now - end);
	}
	calib_entry_end = 0;
	return 0;
}
