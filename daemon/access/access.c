/* Data-access sampling inside the recorder: picks the source (--access), feeds its samples
 * to attribution, and turns settled heap objects into MIBs with their access counts. In
 * exact mode every object passes through attribution before it is aggregated, so an
 * object is counted exactly once, with the samples that hit it while it was live; in
 * sampled mode the sampled objects of the region do (alloc_sampled.c weights them), and
 * the allocation ring's drain time is attribution's allocation watermark. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "alloc.skel.h"
#include "daemon/attrib/addrspace.h"
#include "base/log.h"
#include "daemon/alloc/events.h"
#include "daemon/access/access.h"
#include "daemon/alloc/alloc_sampled.h"
#include "daemon/access/src_soft.h"
#include "daemon/access/src_spe.h"
#include "daemon/access/watch.h"

int recorder_targets_fd(const struct recorder *r)
{
	return r->sampled ? sampled_targets_fd(r->sampled) : bpf_map__fd(r->skel->maps.targets);
}

static void on_sample(void *arg, const struct access_sample *s)
{
	struct recorder *r = arg;
	struct ev_hdr h = { .tgid = s->tgid, .start_ns = s->start_ns };

	uint64_t v;

	if (!events_gate(r, &h, sizeof(h)))
		return;   /* a process the daemon rejected at its exec */
	/* Nor one rejected so long ago that the gate forgot it (the daemon starved of CPU):
	 * an unknown process must be a target now, or no exit would ever end it here. */
	if (r->gate && !proc_find(&r->procs, s->tgid, s->start_ns) &&
	    bpf_map_lookup_elem(recorder_targets_fd(r), &s->tgid, &v))
		return;
	attrib_sample(r->attrib, s);
}

static void op_region(void *arg, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t sp,
		      struct attrib_region *out)
{
	addrspace_region(((struct recorder *)arg)->addrspace, tgid, start_ns, addr, sp, out);
}

static int op_datasym(void *arg, const struct attrib_region *reg, uint64_t addr,
		      struct attrib_datasym *out)
{
	return addrspace_datasym(((struct recorder *)arg)->addrspace, reg, addr, out);
}

static void op_object(void *arg, const struct attrib_object *o)
{
	struct recorder *r = arg;
	struct proc *p;
	struct mib m;

	if (r->sampled) {
		sampled_object(r->sampled, o);
		return;
	}
	if (!(p = proc_find(&r->procs, o->tgid, o->start_ns)))
		return;
	mib_from_object(&m, o->size, o->alloc_ns, o->free_ns, o->alloc_cpu, o->free_cpu,
			o->est_accesses);
	m.access_samples = o->samples;
	m.access_est_err = o->est_err;
	m.total_access_bytes = o->est_bytes;
	recorder_net_of_probes(r, &m, o->probe_ns);
	if (p->exit_mono_ns && o->free_ns >= p->exit_mono_ns)
		mib_mark_live_at_exit(&m);   /* reaped at its process's exit */
	recorder_add_mib_hist(r, p, o->ctx, o->free_ns, &m, o->hist, o->hist_len);
}

/* spe samples every process on a CPU: is tgid one of ours, and since when. Targets added
 * from user space carry start 0 in the BPF map; the process table knows their start. */
static int op_spe_target(void *arg, uint32_t tgid, uint64_t *start_ns)
{
	struct recorder *r = arg;
	uint64_t v = 0;

	if (bpf_map_lookup_elem(recorder_targets_fd(r), &tgid, &v))
		return 0;
	hmap_foreach(&r->procs.procs, i) {
		struct proc *p = r->procs.procs.vals[i];
		if (!v && p->pid == tgid && !p->exited)
			v = p->start_ns;
	}
	*start_ns = v;
	return 1;
}

/* Opens everything; on failure err holds the one-line reason. */
static int setup(struct recorder *r, enum access_src req, uint64_t freq, uint64_t period,
		 char *err, size_t errsz)
{
	char why[400];
	int e;

	struct src_pmu_opts po = { .freq = freq, .period = period };
	e = access_select(req, &po, NULL, NULL, &r->access, why, sizeof(why));
	for (unsigned i = 0; i < r->access.nreasons; i++)
		fprintf(stderr, "memprofd: access: %s\n", r->access.reasons[i]);
	if (e < 0) {
		snprintf(err, errsz, "%s", why);
		return e;
	}
	fprintf(stderr, "memprofd: access: using %s\n", access_src_name(r->access.src));

	struct attrib_ops ops = { .region = op_region, .datasym = op_datasym,
				  .object = op_object, .arg = r, .objects_sampled = r->sampled != NULL };
	if ((e = addrspace_open(&r->addrspace, &r->procs)) < 0 ||
	    (e = attrib_open(&r->attrib, &ops)) < 0) {
		snprintf(err, errsz, "access attribution: %s", strerror(-e));
		return e;
	}
	if (r->access.src == ACCESS_SPE) {
		struct src_spe_opts sp = { .events = &r->access.events, .target = op_spe_target,
					   .target_arg = r };
		if ((e = src_spe_open(&r->spe, &sp, on_sample, r, why, sizeof(why))) < 0) {
			snprintf(err, errsz, "access source spe: %s", why);
			r->spe = NULL;
			return e;
		}
		return 0;
	}
	struct src_soft_opts so = { .events = &r->access.events, .freq = freq, .period = period,
				    .targets_fd = recorder_targets_fd(r) };
	if ((e = src_soft_open(&r->soft, &so, on_sample, r, why, sizeof(why))) < 0) {
		snprintf(err, errsz, "access source %s: %s", access_src_name(r->access.src), why);
		r->soft = NULL;
		return e;
	}
	if (r->access.src == ACCESS_SOFT) {
		char rep[256];
		soft_rep_curve_describe(src_soft_rep_curve(r->soft), rep, sizeof(rep));
		fprintf(stderr, "memprofd: access: soft: %.2f instructions per ns of CPU time, "
			"%s (measured on this CPU)\n", src_soft_insns_per_ns(r->soft), rep);
		const char *nofault;
		double touch;
		uint64_t win;
		if (src_soft_faults_told(r->soft, &touch, &win, &nofault))
			fprintf(stderr, "memprofd: access: soft: a page's first touch takes %.1f us "
				"here: a sample due within %.1f us of a fault, at its instruction "
				"and page, is the fault's time\n", touch / 1e3, (double)win / 1e3);
		else
			fprintf(stderr, "memprofd: access: soft: page faults not told apart (%s): a "
				"sample due during one weighs as accesses\n", nofault);
	}
	return 0;
}

int access_setup(struct recorder *r, const char *mode, bool required, uint64_t freq,
		 uint64_t period)
{
	enum access_src req;
	char err[512];
	int e;

	if (access_src_parse(mode, &req) < 0)
		return log_error_errno(-EINVAL, "%s: --access: unknown source '%s'", recorder_cmd(r), mode);
	if (req == ACCESS_OFF)
		return 0;
	if ((e = setup(r, req, freq, period, err, sizeof(err))) < 0) {
		if (required)
			return log_error_errno(e, "%s: %s", recorder_cmd(r), err);
		/* The default: a recording without access sampling beats no recording. */
		fprintf(stderr, "memprofd: access: %s; recording without access sampling "
			"(--access off says so quietly)\n", err);
		access_close(r);
		memset(&r->access, 0, sizeof(r->access));
		return 0;
	}
	if (r->sampled) {
		attrib_alloc_watermark(r->attrib, 0);
		sampled_send_allocs(r->sampled, true);
		/* The sampled objects' own access rates, whatever their share of the heap. */
		/* The sampler's in-process watches take 2 of a thread's 4 registers: with all 4
		 * the windows left them none (ENOSPC for 306-827 of ~950 on db_bench). */
		struct watch_opts wo = { .slots = r->watch_inprocess ? WATCH_SLOTS_BESIDE_SAMPLER : 0,
					 .min_age_ns = r->watch_inprocess ? WATCH_INPROC_LIFE_NS : 0 };

		if (!r->no_watch && (e = watch_open(&r->watch, &wo)) < 0) {
			fprintf(stderr, "memprofd: access: watch: breakpoints unavailable (%s); "
				"sampled objects get %s samples only\n",
				e == -EOPNOTSUPP ? "a test watch counted none of its accesses: a "
				"hypervisor without debug registers, or no read/write breakpoints" :
				strerror(-e),
				access_src_name(r->access.src));
			r->watch = NULL;
		}
	}
	return 0;
}

static uint64_t mono_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int access_poll(struct recorder *r)
{
	if (r->watch)
		watch_tick(r->watch, mono_now());
	if (r->spe) {
		int n = src_spe_poll(r->spe);
		if (n >= 0)
			attrib_advance(r->attrib, src_spe_watermark(r->spe));
		return n;
	}
	if (!r->soft)
		return 0;
	int n = src_soft_poll(r->soft, 0);
	if (n < 0)
		return n;
	attrib_advance(r->attrib, src_soft_watermark(r->soft));
	if (r->sampled)
		attrib_alloc_watermark(r->attrib, sampled_watermark(r->sampled));
	return n;
}

void access_forget(struct recorder *r, uint32_t tgid)
{
	if (r->soft)
		src_soft_forget(r->soft, tgid);
	if (r->spe)
		src_spe_forget(r->spe, tgid);
}

void access_exit(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns)
{
	access_forget(r, tgid);
	if (r->watch)
		watch_process_exit(r->watch, tgid, start_ns);
	if (r->attrib)
		attrib_process_exit(r->attrib, tgid, start_ns, ts_ns);
}

void access_finish(struct recorder *r, uint64_t end_ns)
{
	if (!r->attrib)
		return;
	if (r->soft)
		src_soft_poll(r->soft, 0);
	if (r->spe) {
		char line[512];
		src_spe_finish(r->spe);
		src_spe_summary(r->spe, line, sizeof(line));
		fprintf(stderr, "memprofd: access: %s\n", line);
	}
	attrib_finish(r->attrib, end_ns);
}

void access_report(struct recorder *r)
{
	const struct attrib_counts *c;
	struct src_soft_stats st;
	char cls[512];
	size_t n = 0;

	if (!r->attrib || !r->soft)
		return;
	c = attrib_counts(r->attrib);
	src_soft_stats(r->soft, &st);
	for (int i = 0; i < ATTRIB_CLASS_MAX && n < sizeof(cls); i++)
		if (c->by_class[i])
			n += (size_t)snprintf(cls + n, sizeof(cls) - n, "%s%s %llu", n ? ", " : "",
					      attrib_class_name(i), (unsigned long long)c->by_class[i]);
	fprintf(stderr, "memprofd: access: %s: %llu samples of the targets (%llu with no memory "
		"access, %llu at page faults' instructions: fault time, %llu dropped), %llu "
		"accesses: %s\n", access_src_name(r->access.src),
		(unsigned long long)st.events, (unsigned long long)st.no_access,
		(unsigned long long)st.fault_time,
		(unsigned long long)st.bpf[SOFTCNT_DROP_RINGBUF], (unsigned long long)c->samples,
		n ? cls : "none");
	if (r->watch) {
		struct watch_counts wc;

		watch_get_counts(r->watch, &wc);
		fprintf(stderr, "memprofd: access: watch: %llu windows on %llu objects, %llu traps "
			"(%.1f us each, budget %.0f/s), %llu accesses estimated, %llu unwatched "
			"objects given their context's density\n",
			(unsigned long long)wc.windows, (unsigned long long)wc.objects,
			(unsigned long long)wc.traps, wc.trap_ns / 1e3, wc.traps_per_s,
			(unsigned long long)r->watch_est, (unsigned long long)r->watch_imputed);
		fprintf(stderr, "memprofd: access: watch: in-process: %llu watches, %llu traps "
			"(the allocating thread's accesses only; %llu objects freed by another "
			"thread); %llu windows dropped (still open at their object's free); "
			"%llu stray debug traps swallowed\n",
			(unsigned long long)wc.inproc, (unsigned long long)wc.inproc_traps,
			(unsigned long long)wc.inproc_shared, (unsigned long long)wc.late_windows,
			(unsigned long long)wc.inproc_stray);
	}
}

void access_close(struct recorder *r)
{
	watch_close(r->watch);
	r->watch = NULL;
	if (r->soft)
		src_soft_close(r->soft);
	src_spe_close(r->spe);
	r->spe = NULL;
	if (r->attrib)
		attrib_close(r->attrib);
	addrspace_close(r->addrspace);
	r->soft = NULL;
	r->attrib = NULL;
	r->addrspace = NULL;
}
