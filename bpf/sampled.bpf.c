/* Sampled allocation tracking: USDT programs on libmemprofd_sampler's memprofd:alloc and
 * memprofd:free probes, which fire only for sampled objects. Invariants as alloc.bpf.c:
 * only processes in `targets` are traced, stacks are sent once per (process, stack key),
 * and every lost record or untracked sample is counted. The sampler's own frames are cut
 * off the stack at its caller's return address, which the probe passes. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "sampled.h"
#define ALLOC_COUNTERS SCNT_MAX
#include "alloc_common.bpf.h"

/* Set by the daemon while it attributes accesses: each sampled allocation is also sent
 * (ev_salloc), not only its death. */
volatile bool send_allocs;

/* Thinning, the daemon's overhead governor's knob: each sample of a target is kept with
 * probability keep_q16 / SAMPLED_KEEP_ONE and its weight divided by that probability, so
 * estimates stay unbiased while the records user space handles drop in proportion. The
 * sampler's trap in the workload and this program's run up to the coin are not saved. */
volatile unsigned int keep_q16 = SAMPLED_KEEP_ONE;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SAMPLED_LIVE_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct live_key);
	__type(value, struct slive_val);
} live SEC(".maps");

struct scratch {
	u64 ips[ALLOC_MAX_FRAMES];
	struct ev_stack st;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

/* Hashes frame i of the kernel's walk into hf->h (those from skip on): a bpf_loop
 * callback, checked until its states converge; as a counted loop after the caller
 * search (one path per place the caller was found) it cost ~11k instructions of the
 * verifier's walk of each allocation program (issue 18). */
struct hash_frames {
	struct scratch *s;
	u32 n, skip;
	u64 h;
};

static long hash_frame(u64 i, void *data)
{
	struct hash_frames *hf = data;
	struct scratch *s = hf->s;

	if (!s || i >= hf->n || i >= ALLOC_MAX_FRAMES)
		return 1;
	if (i >= hf->skip)
		hf->h = hash_ip(hf->h, s->ips[i]);
	return 0;
}

/* The stack key of the allocating context (frames above the sampler's caller), sending
 * its frames the first time the process shows it. */
static __always_inline u64 stack_key(struct pt_regs *ctx, u32 tgid, u64 start_ns, u64 caller)
{
	u32 zero = 0, skip = SAMPLED_DEFAULT_SKIP, n;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	long got;
	u64 h = (((u64)tgid << 32) ^ start_ns) ^ HASH_SEED;

	if (!s)
		return 0;
	u32 mode = unwind_mode(tgid, start_ns);
	struct ustack_req q = { .start_ns = start_ns, .tgid = tgid, .caller = caller };

	if (mode == UNWIND_DWARF) {
		struct vma_range r = {};
		if (bpf_find_vma(bpf_get_current_task_btf(), PT_REGS_SP(ctx), vma_bounds, &r, 0) == 0)
			q.stack_hi = r.hi;
		return send_ustack(ctx, &q);
	}
	got = bpf_get_stack(ctx, s->ips, sizeof(s->ips), BPF_F_USER_STACK);
	if (got <= 0) {
		count(CNT_DROP_STACK);
		return 0;
	}
	n = got / sizeof(u64);
	bool found = false;
	for (u32 i = 0; i < SAMPLED_CALLER_SEARCH; i++) {
		if (i < n && s->ips[i] == caller) {
			skip = i;
			found = true;
			break;
		}
	}
	if (!found)
		count(SCNT_NO_CALLER);
	struct hash_frames hf = { .s = s, .n = n, .skip = skip, .h = h };
	bpf_loop(ALLOC_MAX_FRAMES, hash_frame, &hf, 0);
	u64 key = (hf.h | 1) & ~ALLOC_USTACK_KEY;
	/* Until user space has checked the process's objects, or a key's walk against its
	 * first copy, each sample has its own key, its frame-pointer stack and a copy, which
	 * replaces that stack unless cut shorter. */
	if (mode == UNWIND_UNDECIDED) {
		key = ustack_key();
	} else {
		enum key_use use = key_use(key);
		if (use == KEY_USE)
			return key;
		if (use == KEY_COPY) {   /* copied under the sample's own key */
			struct vma_range r = {};
			if (bpf_find_vma(bpf_get_current_task_btf(), PT_REGS_SP(ctx), vma_bounds, &r, 0) == 0)
				q.stack_hi = r.hi;
			return send_ustack(ctx, &q);
		}
		if (use == KEY_PENDING)
			key = ustack_key();
	}

	got = bpf_get_stack(ctx, s->st.frames, sizeof(s->st.frames),
			    BPF_F_USER_STACK | BPF_F_USER_BUILD_ID | (skip & BPF_F_SKIP_FIELD_MASK));
	if (got <= 0) {
		count(CNT_DROP_STACK);
		return 0;
	}
	send_stack(&s->st, tgid, start_ns, key, got);
	/* The first sight of a frame-pointer key sends a copy too: the context is the copy's
	 * DWARF stack (the same whichever way the process is walked), and a walk cut by an
	 * object that uses %rbp as a plain register is caught (daemon/alloc/ustack.c). */
	struct vma_range r = {};
	if (bpf_find_vma(bpf_get_current_task_btf(), PT_REGS_SP(ctx), vma_bounds, &r, 0) == 0)
		q.stack_hi = r.hi;
	q.key = key;
	q.wake = 1;   /* the reader checks the key at once: its allocations are copied until then */
	send_ustack(ctx, &q);
	return key;
}

SEC("usdt")
int BPF_USDT(on_alloc, u64 addr, u64 size, u64 weight_q16, u64 flags, u64 caller)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	long err;

	if (!is_target(tgid) || !addr)
		return 0;
	u64 start_ns = proc_start_ns();
	u32 keep = keep_q16;
	if (keep < SAMPLED_KEEP_ONE) {
		if (!keep || (bpf_get_prandom_u32() & (SAMPLED_KEEP_ONE - 1)) >= keep) {
			/* No stack, no record: only a live entry, so that its free is known. */
			struct live_key tk = { .tgid = tgid, .addr = addr };
			struct slive_val tv = { .size = size, .start_ns = start_ns,
						.flags = (u32)flags | SAMPLED_F_THINNED };
			bpf_map_update_elem(&live, &tk, &tv, BPF_ANY);
			count(SCNT_THINNED);
			return 0;
		}
		weight_q16 = weight_q16 * SAMPLED_KEEP_ONE / keep;
	}
	struct live_key k = { .tgid = tgid, .addr = addr };
	struct slive_val v = {
		.size = size, .start_ns = start_ns, .weight_q16 = weight_q16,
		.cpu = bpf_get_smp_processor_id(), .flags = (u32)flags,
	};
	v.key = stack_key(ctx, tgid, start_ns, caller);
	v.ts_ns = bpf_ktime_get_ns();
	if (!(flags & 1))
		count(SCNT_NO_REGION);
	err = bpf_map_update_elem(&live, &k, &v, BPF_NOEXIST);
	if (err == -EEXIST) {
		count(CNT_OVERWRITTEN);   /* e.g. a region-full sample whose free was not seen */
		err = bpf_map_update_elem(&live, &k, &v, BPF_ANY);
	}
	if (err) {
		count(CNT_DROP_LIVE_FULL);
		return 0;
	}
	count(CNT_ALLOCS);
	if (send_allocs) {
		struct ev_salloc *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count(CNT_DROP_RINGBUF);   /* attribution sees only its death */
			return 0;
		}
		e->h.type = EV_SALLOC;
		e->h.tgid = tgid;
		e->h.start_ns = start_ns;
		e->key = v.key;
		e->addr = addr;
		e->size = size;
		e->weight_q16 = weight_q16;
		e->alloc_ns = v.ts_ns;
		e->cpu = v.cpu;
		e->flags = v.flags;
		bpf_ringbuf_submit(e, rb_flags());
	}
	return 0;
}

SEC("usdt")
int BPF_USDT(on_free, u64 addr)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct live_key k = { .tgid = tgid, .addr = addr };
	struct slive_val *v;
	struct ev_sfree *e;

	if (!is_target(tgid))
		return 0;
	v = bpf_map_lookup_elem(&live, &k);
	if (!v) {
		count(CNT_UNMATCHED_FREE);   /* sampled before the tracer attached */
		return 0;
	}
	if (v->flags & SAMPLED_F_THINNED) {
		count(SCNT_THINNED_FREES);
		bpf_map_delete_elem(&live, &k);
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
	} else {
		e->h.type = EV_SFREE;
		e->h.tgid = tgid;
		e->h.start_ns = v->start_ns;
		e->key = v->key;
		e->size = v->size;
		e->weight_q16 = v->weight_q16;
		e->alloc_ns = v->ts_ns;
		e->free_ns = bpf_ktime_get_ns();
		e->alloc_cpu = v->cpu;
		e->free_cpu = bpf_get_smp_processor_id();
		e->flags = v->flags;
		e->pad = 0;
		e->addr = addr;
		bpf_ringbuf_submit(e, rb_flags());
		count(CNT_FREES);
	}
	bpf_map_delete_elem(&live, &k);
	return 0;
}

/* ---- the OpenTelemetry memory contract (provider otel_memory) ----
 * alloc(ptr, size, weight) on a sampled allocation, weight = the bytes the sample stands
 * for (nsamples * sampling interval); free(ptr) on the free of a sampled one. Any
 * sampler that emits it (an allocator hook, a compile-time wrapper, a preloaded library)
 * is recorded as memprofd's own: the objects the sample stands for are weight / size.
 * The contract passes no caller, so the caller is the stack's second frame (the probe
 * fires in the sampler's allocation function, as the design's wrappers do). They reuse
 * the memprofd programs' bodies (BPF_USDT's ____NAME functions). */

static __always_inline u64 otel_caller(struct pt_regs *ctx)
{
	u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);

	if (!s || bpf_get_stack(ctx, s->ips, 2 * sizeof(u64), BPF_F_USER_STACK) < 2 * (long)sizeof(u64))
		return 0;
	return s->ips[1];
}

SEC("usdt")
int BPF_USDT(on_otel_alloc, u64 addr, u64 size, u64 weight_bytes)
{
	u64 wq = size ? (weight_bytes << SAMPLED_WEIGHT_SHIFT) / size : weight_bytes << SAMPLED_WEIGHT_SHIFT;

	if (wq < (1ULL << SAMPLED_WEIGHT_SHIFT))
		wq = 1ULL << SAMPLED_WEIGHT_SHIFT;   /* a sample stands for one object at least */
	if (!is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* Flag "region": the contract fires free for every sampled object. */
	return ____on_alloc(ctx, addr, size, wq, SAMPLED_F_OTEL | 1, otel_caller(ctx));
}

SEC("usdt")
int BPF_USDT(on_otel_free, u64 addr)
{
	return ____on_free(ctx, addr);
}

#include "sampled_watch.bpf.h"
