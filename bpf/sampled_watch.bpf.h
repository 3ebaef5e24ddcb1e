/* memprofd:watch (sampler/sampler.h) -> ev_swatch, included by sampled.bpf.c (same maps and
 * ring). Attached only while the daemon measures accesses with watches: attaching it is
 * what turns the sampler's in-process watches on. */
#pragma once

SEC("usdt")
int BPF_USDT(on_watch, u64 addr, u64 hits, u64 watched_ns, u64 flags, u64 granule)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct live_key k = { .tgid = tgid, .addr = addr };
	struct slive_val *v;
	struct ev_swatch *e;

	if (!is_target(tgid))
		return 0;
	v = bpf_map_lookup_elem(&live, &k);
	if (!v || (v->flags & SAMPLED_F_THINNED)) {
		/* An object the daemon does not follow: only the swallowed traps' count. */
		if (!(flags >> SAMPLED_WATCH_STRAY_SHIFT))
			return 0;
		v = NULL;
		addr = hits = watched_ns = 0;
		flags &= ~(u64)((1u << SAMPLED_WATCH_STRAY_SHIFT) - 1);
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
		return 0;
	}
	e->h.type = EV_SWATCH;
	e->h.tgid = tgid;
	e->h.start_ns = v ? v->start_ns : 0;
	e->addr = addr;
	e->hits = hits;
	e->watched_ns = watched_ns;
	e->flags = (u32)flags;
	e->granule = (u32)granule;
	bpf_ringbuf_submit(e, rb_flags());
	return 0;
}
