/* Flushing the recorder's aggregates to the store: one transaction per flush, new stacks'
 * names in the next (symbolize.c). A failed flush is rolled back and retried at the next
 * interval with everything still dirty, so a locked DB or a full disk delays data but
 * never loses or half-writes it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/log.h"
#include "daemon/record/phases.h"
#include "daemon/record/recorder.h"
#include "daemon/alloc/alloc_exact.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/alloc/core_btf.h"
#include "daemon/alloc/unwind.h"
#include "store/store.h"
#include "symbolizer/symcache.h"
#include "daemon/attrib/attrib.h"
#include "daemon/attrib/addrspace.h"
#include "base/clock.h"
#include <signal.h>

/* The store holds every timestamp on one clock, CLOCK_REALTIME ns (epoch): a process's
 * start too (BPF gives CLOCK_MONOTONIC), shifted by this run's fixed offset, so that
 * (pid, start) stays one row per process within the run. */
static uint64_t store_start_ns(const struct recorder *r, const struct proc *p)
{
	return p->start_ns + (uint64_t)r->mono_to_real_ns;
}

static void fill_proc(const struct recorder *r, const struct proc *p, struct store_proc *sp)
{
	*sp = (struct store_proc){
		.pid = (int32_t)p->pid, .start_ns = store_start_ns(r, p), .ppid = (int32_t)p->ppid,
		.exe = p->exe, .build_id = p->build_id, .comm = p->comm, .run_id = r->run_id,
	};
}

static int write_agg(struct agg *a, void *arg)
{
	struct recorder *r = arg;
	struct istack *s = a->stack;
	struct store_frame f[ALLOC_MAX_UFRAMES];
	struct store_proc sp;

	stash_tick(&r->stash);
	/* A flush past its writing time leaves the entry dirty; a stop's final flush counts
	 * it, with the objects the store does not hold. */
	if (r->write_end_ns && mono_ns() >= r->write_end_ns) {
		if (r->stop_write_end_ns) {
			r->stop_aggs++;
			r->stop_objects += a->mib.alloc_count - a->stored_count;
		}
		return AGG_SKIP;
	}
	/* A new stack goes in bare and is named after the commit (symbolize.c), so a cold
	 * object's DWARF never delays the rows. */
	if (!r->names_elsewhere)
		recorder_queue_symbols(r, s);
	/* Frames go with every put: the store reads them only for a hash it has not seen. */
	recorder_store_frames(r, s, f);
	fill_proc(r, a->proc, &sp);
	/* The store keys buckets by their start in CLOCK_REALTIME ns. */
	int err = store_put_mib_hist(r->store, &sp, s->hash, f, s->nframes,
				     a->bucket * 1000000000LL, &a->mib, &a->hist);
	if (!err && s->truncated)
		err = store_mark_truncated(r->store, s->hash);
	return err;
}

static int write_exits(struct recorder *r)
{
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		struct store_proc sp;
		if (!p->exited || p->exit_written)
			continue;
		fill_proc(r, p, &sp);
		int e = store_proc_exit(r->store, &sp, p->exit_ns);
		if (e)
			return e;
	}
	return 0;
}

/* Access sampling's running totals: the static-data table, samples per class, and the
 * source with its reasons. Absolute values, rewritten at every flush. */
static int write_access(struct recorder *r)
{
	const struct attrib_counts *c;
	const struct attrib_data_entry *d;
	size_t n;
	int err;

	if (!r->attrib)
		return 0;
	d = attrib_data(r->attrib, &n);
	for (size_t i = 0; i < n; i++) {
		struct store_data sd = {
			.build_id = d[i].sym.binary, .path = bin_path(&r->procs, d[i].sym.binary),
			.symbol = d[i].sym.symbol, .section = d[i].sym.section,
			.address = d[i].sym.sym_addr, .size = d[i].sym.sym_size,
			.access_samples = d[i].samples, .est_accesses = d[i].est_accesses,
		};
		if ((err = store_put_data(r->store, r->run_id, &sd)))
			return err;
	}
	c = attrib_counts(r->attrib);
	for (int k = 0; k < ATTRIB_CLASS_MAX; k++)
		if ((err = store_put_access_class(r->store, r->run_id, attrib_class_name(k),
						  c->by_class[k], c->est_by_class[k])))
			return err;
	/* The watch's traps and the accesses they stand for: reporter/classify.c's evidence
	 * (accesses per sample) covers the watched objects too. */
	if (r->watch && (err = store_put_access_class(r->store, r->run_id, "watch",
						      r->watch_hits, r->watch_est)))
		return err;
	char reasons[ACCESS_SRC_MAX * SRC_PMU_WHY_MAX + 8] = "";
	size_t len = 0;
	for (unsigned i = 0; i < r->access.nreasons && len < sizeof(reasons); i++)
		len += snprintf(reasons + len, sizeof(reasons) - len, "%s%s", i ? "\n" : "",
				r->access.reasons[i]);
	return store_run_access(r->store, r->run_id, access_src_name(r->access.src),
				len ? reasons : NULL);
}

static int flush_store(struct recorder *r, const struct store_run_stats *st);

int recorder_flush(struct recorder *r, const char *status)
{
	uint64_t c[SCNT_MAX];
	int err;

	if (r->sampled)
		sampled_counters(r->sampled, c);
	else
		exact_counters(r, c);
	struct store_run_stats st = {
		.ended_ns = status && strcmp(status, "running") ? real_ns() : 0,
		.events = r->events,
		.drops_ringbuf = c[CNT_DROP_RINGBUF],
		.drops_live_full = c[CNT_DROP_LIVE_FULL],
		.drops_state_full = c[CNT_DROP_STATE_FULL],
		.drops_stack = c[CNT_DROP_STACK],
		.unmatched_frees = c[CNT_UNMATCHED_FREE],
		.overwritten = c[CNT_OVERWRITTEN],
		.unresolved_frames = r->unresolved_frames,
		.status = status ? status : "running",
		.missed_exec = c[CNT_EXEC_LOST],
		.missed_late = r->missed_late,
		.missed_unknown = r->missed_unknown,
		.flushed_ns = real_ns(),
	};
	/* A running flush reads the ring meanwhile; the final one has the whole drain. */
	r->stash.armed = st.ended_ns == 0;
	err = flush_store(r, &st);
	if (st.ended_ns)
		phase_mark("final flush: rows");
	/* Names after the rows are safe: a running flush names what fits in a slice (the
	 * rest at the next), the last one all of them. */
	if (!err && !r->names_elsewhere) {
		int64_t slice = r->sym_slice_ms ? r->sym_slice_ms : RECORD_SYMBOLIZE_SLICE_MS;
		int64_t left = ((int64_t)r->stop_name_end_ns - (int64_t)mono_ns()) / 1000000;
		/* The last flush names all, or what fits before a stop's deadline. */
		int e = recorder_symbolize(r, !st.ended_ns ? slice : !r->stop_name_end_ns ? -1 :
					      left > 0 ? left : 0);
		if (st.ended_ns) {
			phase_mark("final flush: names");
			err = e;
		}
	}
	stash_replay(&r->stash);   /* after the aggregates were marked clean or kept dirty */
	return err;
}

static int flush_store(struct recorder *r, const struct store_run_stats *st)
{
	if (r->stop_write_end_ns)
		r->stop_aggs = r->stop_objects = 0;   /* a retried final flush counts anew */
	r->write_end_ns = st->ended_ns ? r->stop_write_end_ns : !r->flush_write_ms ? 0 :
			  mono_ns() + (uint64_t)r->flush_write_ms * 1000000ULL;
	int err = store_begin(r->store);

	if (!err)
		err = agg_write_dirty(&r->aggs, write_agg, r);
	if (!err)
		err = write_exits(r);
	if (!err)
		err = write_access(r);
	if (!err)
		err = store_run_update(r->store, r->run_id, st);
	bool stop_drops = r->stop_aggs || r->stop_records;

	if (!err && (r->mem_dropped_aggs || r->mem_peak_bytes || stop_drops)) {
		struct store_mem_drops md = { .aggregates = r->mem_dropped_aggs,
					      .objects = r->mem_dropped_objects,
					      .limit_bytes = r->mem_limit_bytes,
					      .peak_bytes = r->mem_peak_bytes,
					      .stop_records = r->stop_records,
					      .stop_aggregates = r->stop_aggs,
					      .stop_objects = r->stop_objects,
					      .stop_budget_ms = stop_drops ? r->stop_budget_ms : 0 };
		err = store_put_mem_drops(r->store, r->run_id, &md);
	}
	if (!err)
		err = store_commit(r->store);
	if (err) {
		store_rollback(r->store);
		if (!r->flush_error_logged)
			log_error("flush: %s (will retry, nothing is dropped)", store_errmsg(r->store));
		r->flush_error_logged = true;
		return err;
	}
	/* An outage's drops are summed up at its end. */
	if (r->flush_error_logged) {
		log_warn("flush: store writable again");
		if (r->mem_drop_logged)
			log_warn("flush: %llu aggregates (%llu objects) were dropped over the memory "
				 "limit while the store was unwritable",
				 (unsigned long long)r->mem_dropped_aggs,
				 (unsigned long long)r->mem_dropped_objects);
		r->mem_drop_logged = false;
	}
	r->flush_error_logged = false;
	agg_mark_clean(&r->aggs);
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		if (p->exited)
			p->exit_written = true;
	}
	/* Keep the previous bucket too: objects that died just before the boundary may
	 * still be in the ring buffer. */
	agg_evict(&r->aggs, agg_bucket_of(real_ns()) - AGG_BUCKET_SECONDS);
	return 0;
}

static bool proc_gone(const struct proc *p)
{
	return p->forget;
}

/* attrib_gone_fn: a process attribution may drop, once the recorder forgot it (or never
 * knew it: samples read after its exit bring it back) and it no longer runs. */
static bool attrib_proc_gone(void *arg, uint32_t tgid, uint64_t start_ns)
{
	struct recorder *r = arg;

	return !proc_find(&r->procs, tgid, start_ns) && kill((pid_t)tgid, 0) < 0 && errno == ESRCH;
}

size_t recorder_forget_exited(struct recorder *r)
{
	size_t n = 0;
	struct proc **v;

	if (!r->procs.procs.n)
		return 0;
	/* Attribution holds objects by (pid, start) that still come to recorder_add_mib:
	 * a process is kept until they have all settled. */
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		p->forget = p->exited && p->exit_written &&
			    !(r->attrib && attrib_holds(r->attrib, p->pid, p->start_ns));
	}
	/* An aggregate the store does not hold yet keeps its process. */
	hmap_foreach(&r->aggs.map, i) {
		struct agg *a = r->aggs.map.vals[i];
		if (a->dirty)
			a->proc->forget = false;
	}
	agg_forget(&r->aggs, proc_gone);
	v = malloc(r->procs.procs.n * sizeof(*v));
	if (!v)
		return 0;
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		if (p->forget)
			v[n++] = p;
	}
	for (size_t i = 0; i < n; i++) {
		store_forget_process(r->store, (int32_t)v[i]->pid, store_start_ns(r, v[i]));
		if (r->addrspace)
			addrspace_forget(r->addrspace, v[i]);
		proc_forget(&r->procs, v[i]);
	}
	free(v);
	if (r->attrib)
		attrib_forget_gone(r->attrib, attrib_proc_gone, r);
	r->procs_forgotten += n;
	return n;
}

void recorder_bound_memory(struct recorder *r, uint64_t limit)
{
	r->mem_limit_bytes = limit;
	if (agg_bytes(&r->aggs) > r->mem_peak_bytes)
		r->mem_peak_bytes = agg_bytes(&r->aggs);
	/* Exited processes wait for their exit row while the store is unwritable: what only
	 * their stack records needed goes now (none of theirs follows the exit record). */
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		if (p->exited) {
			hmap_free(&p->stacks);
			unwinder_free(p->uw);
			p->uw = NULL;
		}
	}
	while (agg_bytes(&r->aggs) > limit && agg_count(&r->aggs)) {
		uint64_t objs = 0;
		size_t n = agg_drop_oldest(&r->aggs, &objs);

		if (!n)
			break;
		r->mem_dropped_aggs += n;
		r->mem_dropped_objects += objs;
		/* Once per unwritable spell, and once a run for a store that is only behind. */
		bool *logged = r->flush_error_logged ? &r->mem_drop_logged : &r->mem_behind_logged;

		if (!*logged)
			log_error("flush: aggregates outgrew the memory limit (%llu bytes) while the "
				  "store is %s: dropping the oldest bucket's (counted)",
				  (unsigned long long)limit, r->flush_error_logged ? "unwritable" :
				  "behind");
		*logged = true;
	}
}

int recorder_bpf_load_error(const struct recorder *r, int err, int stage)
{
	if (stage == CORE_BTF_OPEN)
		return log_error_errno(err, "%s: opening BPF object: %s", recorder_cmd(r),
				       strerror(-err));
	if (stage == CORE_BTF_LOAD)
		return log_error_errno(err, "%s: loading BPF programs: %s%s", recorder_cmd(r),
				       strerror(-err), err == -EPERM ?
				       " (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)" : "");
	return err;
}

