/* spe source: per-CPU arm_spe events -> perf_aux rings -> spe_decode -> access samples.
 * Each CPU keeps a timeline of who ran from when (context-switch and ITRACE_START
 * records, in perf-clock ns); a record's task is looked up there at its own time, or
 * read from its context packet. Timelines are pruned once the AUX stream has passed a
 * time, since per-CPU SPE records arrive in time order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <bpf/libbpf.h>
#include "daemon/alloc/intern.h"
#include "daemon/perf/perf_clock.h"
#include "daemon/perf/perf_sample.h"
#include "daemon/access/src_spe.h"
#include "base/clock.h"
#include "base/array.h"

struct task { uint32_t pid, tid; };

struct switch_ev {
	uint64_t t;                  /* perf clock ns */
	struct task prev, next;      /* who ran before t (prev_known) and from t on */
	bool prev_known;
};

struct spe_cpu {
	int cpu, fd;                 /* fd -1: a ring the caller built */
	struct perf_ring ring;
	struct perf_time_conv tc;
	bool tc_ok;
	struct switch_ev *tl;        /* in time order */
	size_t ntl, captl;
	uint64_t last_time;          /* newest sample_id time seen in the data ring */
	uint64_t chunk_max_t;        /* newest record time of the chunk being decoded */
};

struct target_ent {
	uint32_t tgid;
	bool is_target;
	uint64_t start_ns;
	uint64_t checked_ns;         /* sample time of the answer (for rechecks) */
	uint64_t gone_ns;            /* CLOCK_MONOTONIC of src_spe_forget (0: not forgotten) */
};

struct src_spe {
	struct spe_cpu *cpus;
	size_t ncpus;
	uint64_t sample_type;        /* of the event: the sample_id layout */
	uint64_t weight;
	src_spe_target_fn target;
	void *target_arg;
	src_spe_cb cb;
	void *arg;
	struct spe_decoder dec;
	struct hmap tids;            /* hash(tid) -> packed (tid << 32 | pid), never 0 */
	struct hmap targets;         /* hash(tgid) -> struct target_ent * */
	size_t ngone;                /* targets forgotten, kept until the watermark passes */
	int64_t clock_off;           /* CLOCK_MONOTONIC - perf clock */
	uint64_t clock_at, flush_at; /* CLOCK_MONOTONIC of the last measure / flush */
	uint64_t watermark;
	struct src_spe_stats st;
	struct spe_cpu *cur;         /* the ring being drained */
};

/* ---- tid -> tgid ------------------------------------------------------------------ */

static bool tid_eq(const void *val, const void *key)
{
	return (uint32_t)((uintptr_t)val >> 32) == *(const uint32_t *)key;
}

static void tid_learn(struct src_spe *s, uint32_t pid, uint32_t tid)
{
	uint64_t h = hash_u64(tid) | 1;
	void *old, *val = (void *)(uintptr_t)((uint64_t)tid << 32 | pid);

	if (!tid || !pid)
		return;                      /* the idle task, or nothing known */
	old = hmap_find(&s->tids, h, tid_eq, &tid);
	if (old == val)
		return;
	if (old)
		hmap_remove(&s->tids, h, old);
	else if (s->tids.n >= SPE_TIDS_MAX)
		hmap_free(&s->tids);         /* forget all; switch records refill it */
	hmap_insert(&s->tids, h, val);
}

/* /proc/TID/status's Tgid, for a thread no record named yet. 0 if gone. */
static uint32_t tgid_from_proc(uint32_t tid)
{
	char path[64], line[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %lu", &v) == 1)
			break;
	fclose(f);
	return v <= UINT32_MAX ? (uint32_t)v : 0;
}

static uint32_t tid_to_tgid(struct src_spe *s, uint32_t tid)
{
	void *v = hmap_find(&s->tids, hash_u64(tid) | 1, tid_eq, &tid);
	uint32_t pid;

	if (v)
		return (uint32_t)(uintptr_t)v;
	if ((pid = tgid_from_proc(tid)))
		tid_learn(s, pid, tid);
	return pid;
}

/* ---- per-CPU timeline -------------------------------------------------------------- */

static void tl_add(struct src_spe *s, struct spe_cpu *c, const struct switch_ev *e)
{
	if (c->ntl == c->captl) {
		if (c->captl >= SPE_SWITCH_MAX) {
			size_t drop = c->ntl / 2;   /* oldest half: records that old get no task */
			memmove(c->tl, c->tl + drop, (c->ntl - drop) * sizeof(*c->tl));
			c->ntl -= drop;
			s->st.switch_overflow += drop;
		} else if (ARRAY_GROW(c->tl, c->captl, c->ntl, 64) < 0) {
			return;
		}
	}
	c->tl[c->ntl++] = *e;
}

/* Index of the last event at or before t, or -1. */
static long tl_find(const struct spe_cpu *c, uint64_t t)
{
	long lo = 0, hi = (long)c->ntl - 1, ans = -1;

	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		if (c->tl[mid].t <= t) {
			ans = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return ans;
}

static bool tl_task(const struct spe_cpu *c, uint64_t t, struct task *out)
{
	long i = tl_find(c, t);

	if (i >= 0) {
		*out = c->tl[i].next;
		return true;
	}
	if (c->ntl && c->tl[0].prev_known) {   /* before the first switch: who it replaced */
		*out = c->tl[0].prev;
		return true;
	}
	return false;
}

/* The AUX stream has reached time t on this CPU: earlier switches are no longer needed. */
static void tl_prune(struct spe_cpu *c, uint64_t t)
{
	long i = tl_find(c, t);

	if (i > 0) {
		memmove(c->tl, c->tl + i, (c->ntl - (size_t)i) * sizeof(*c->tl));
		c->ntl -= (size_t)i;
	}
}

/* ---- data-ring records ------------------------------------------------------------- */

static void on_record(void *arg, const struct perf_event_header *h, const void *rec)
{
	struct src_spe *s = arg;
	struct spe_cpu *c = s->cur;
	struct perf_sample_id id;
	struct switch_ev e;
	uint32_t pt[2];

	if (perf_sample_id_parse(rec, h->size, s->sample_type, &id) < 0)
		return;
	if (id.time > c->last_time)
		c->last_time = id.time;
	memset(&e, 0, sizeof(e));
	e.t = id.time;
	switch (h->type) {
	case PERF_RECORD_SWITCH_CPU_WIDE:   /* { header; u32 next_prev_pid, next_prev_tid; id } */
		if (h->size < sizeof(*h) + 8)
			return;
		memcpy(pt, (const uint8_t *)rec + sizeof(*h), 8);
		if (h->misc & PERF_RECORD_MISC_SWITCH_OUT) {
			e.prev = (struct task){ id.pid, id.tid };
			e.next = (struct task){ pt[0], pt[1] };
		} else {
			e.prev = (struct task){ pt[0], pt[1] };
			e.next = (struct task){ id.pid, id.tid };
		}
		e.prev_known = true;
		tid_learn(s, e.prev.pid, e.prev.tid);
		tid_learn(s, e.next.pid, e.next.tid);
		tl_add(s, c, &e);
		break;
	case PERF_RECORD_ITRACE_START:      /* { header; u32 pid, tid; id }: running at start */
		if (h->size < sizeof(*h) + 8)
			return;
		memcpy(pt, (const uint8_t *)rec + sizeof(*h), 8);
		e.next = (struct task){ pt[0], pt[1] };
		tid_learn(s, pt[0], pt[1]);
		tl_add(s, c, &e);
		break;
	default:
		break;
	}
}

/* ---- AUX chunks -> access samples -------------------------------------------------- */

static bool target_eq(const void *val, const void *key)
{
	return ((const struct target_ent *)val)->tgid == *(const uint32_t *)key;
}

static void targets_clear(struct src_spe *s)
{
	hmap_foreach(&s->targets, i)
		free(s->targets.vals[i]);
	hmap_free(&s->targets);
	s->ngone = 0;
}

/* Forgotten targets whose samples are all delivered (the watermark passed their forget)
 * leave the table. */
static void targets_prune(struct src_spe *s)
{
	struct target_ent *gone[64];
	size_t n;

	do {
		n = 0;
		hmap_foreach(&s->targets, i) {
			struct target_ent *t = s->targets.vals[i];
			if (t->gone_ns && t->gone_ns < s->watermark && n < sizeof(gone) / sizeof(gone[0]))
				gone[n++] = t;
		}
		for (size_t i = 0; i < n; i++) {
			hmap_remove(&s->targets, hash_u64(gone[i]->tgid) | 1, gone[i]);
			free(gone[i]);
			s->ngone--;
		}
	} while (n == sizeof(gone) / sizeof(gone[0]));
}

/* The target answer for tgid, asked once (a "no" again after SPE_TARGET_RECHECK_NS of
 * sample time: a process may become a target by exec). */
static bool is_target(struct src_spe *s, uint32_t tgid, uint64_t now, uint64_t *start_ns)
{
	uint64_t h = hash_u64(tgid) | 1;
	struct target_ent *t;

	if (!s->target) {
		*start_ns = 0;
		return true;
	}
	t = hmap_find(&s->targets, h, target_eq, &tgid);
	if (t && t->gone_ns && now > t->gone_ns) {
		/* Taken after the forget: another process under the pid, or the new image. */
		hmap_remove(&s->targets, h, t);
		free(t);
		s->ngone--;
		t = NULL;
	}
	if (!t || (!t->is_target && now - t->checked_ns > SPE_TARGET_RECHECK_NS)) {
		uint64_t start = 0;
		bool yes = s->target(s->target_arg, tgid, &start) > 0;
		if (!t) {
			if (s->targets.n >= SPE_TARGETS_MAX)
				targets_clear(s);
			if (!(t = calloc(1, sizeof(*t))))
				return false;
			t->tgid = tgid;
			if (hmap_insert(&s->targets, h, t)) {
				free(t);
				*start_ns = start;
				return yes;
			}
		}
		t->is_target = yes;
		t->start_ns = start;
		t->checked_ns = now;
	}
	*start_ns = t->start_ns;
	return t->is_target;
}

static void deliver(struct src_spe *s, struct spe_cpu *c, const struct spe_record *r,
		    uint64_t chunk_t)
{
	struct access_sample a;
	struct task tk;
	uint64_t t, start_ns;

	if (r->op != SPE_OP_LOAD && r->op != SPE_OP_STORE) {
		s->st.not_memory++;
		return;
	}
	if (!(r->has & SPE_HAS_VA)) {
		s->st.no_va++;
		return;
	}
	/* User code at EL0 touching a TTBR0 (bit 55 clear) address; the rest is kernel. */
	if (((r->has & SPE_HAS_PC) && (r->pc_el != 0 || (r->pc >> 55) & 1)) || (r->va >> 55) & 1) {
		s->st.kernel++;
		return;
	}
	if ((r->has & SPE_HAS_TS) && c->tc_ok) {
		t = perf_time_from_cycles(&c->tc, r->ts);
	} else {
		t = chunk_t;
		s->st.ts_from_aux++;
	}
	if (t > c->chunk_max_t)
		c->chunk_max_t = t;
	if (r->has & SPE_HAS_CONTEXT) {
		tk.tid = r->context;
		tk.pid = tid_to_tgid(s, tk.tid);
		s->st.from_context++;
	} else if (!tl_task(c, t, &tk)) {
		tk.pid = tk.tid = 0;
	}
	if (!tk.pid) {
		s->st.no_task++;
		return;
	}
	uint64_t mono = (uint64_t)((int64_t)t + s->clock_off);
	if (!is_target(s, tk.pid, mono, &start_ns)) {
		s->st.not_target++;
		return;
	}
	memset(&a, 0, sizeof(a));
	a.tgid = tk.pid;
	a.tid = tk.tid;
	a.cpu = (uint32_t)c->cpu;
	a.start_ns = start_ns;
	a.time_ns = mono;
	a.addr = r->va;
	a.size = r->size;
	a.rw = (r->op_flags & SPE_OPF_ATOMIC) ? 3 : r->op == SPE_OP_STORE ? 2 : 1;
	a.weight = s->weight;
	s->st.accesses++;
	s->cb(s->arg, &a);
}

static void on_aux(void *arg, const uint8_t *buf, size_t len, uint64_t off, uint64_t flags,
		   const struct perf_event_header *auxrec)
{
	struct src_spe *s = arg;
	struct spe_cpu *c = s->cur;
	struct perf_sample_id id;
	uint64_t chunk_t = c->last_time;
	struct spe_record r;

	/* Records without a timestamp get the time their chunk was handed over. */
	if (auxrec && perf_sample_id_parse(auxrec, auxrec->size, s->sample_type, &id) == 0)
		chunk_t = id.time;
	(void)flags;
	c->chunk_max_t = 0;
	spe_decoder_reset(&s->dec, buf, len, off);
	while (spe_decoder_next(&s->dec, &r) == 1)
		deliver(s, c, &r, chunk_t);
	if (c->chunk_max_t)
		tl_prune(c, c->chunk_max_t);
}

static int drain_cpu(struct src_spe *s, struct spe_cpu *c, bool final)
{
	struct perf_ring_ops ops = { .record = on_record, .aux = on_aux, .arg = s };

	c->tc_ok = perf_ring_time_conv(&c->ring, &c->tc) == 0;
	s->cur = c;
	int n = final ? perf_ring_drain_final(&c->ring, &ops) : perf_ring_drain(&c->ring, &ops);
	s->cur = NULL;
	return n;
}

int src_spe_drain(struct src_spe *s, bool final)
{
	int total = 0;

	for (size_t i = 0; i < s->ncpus; i++) {
		int n = drain_cpu(s, &s->cpus[i], final);
		if (n > 0)
			total += n;
	}
	return total;
}

/* ---- lifecycle --------------------------------------------------------------------- */

int src_spe_open_offline(struct src_spe **out, const struct src_spe_opts *o, src_spe_cb cb,
			 void *arg)
{
	struct src_spe *s;

	if (!o || !o->events || !o->events->n || !cb)
		return -EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->sample_type = o->events->ev[0].attr.sample_type;
	s->weight = o->events->ev[0].est_per_sample ? o->events->ev[0].est_per_sample
						    : o->events->ev[0].attr.sample_period;
	s->target = o->target;
	s->target_arg = o->target_arg;
	s->cb = cb;
	s->arg = arg;
	spe_decoder_init(&s->dec);
	*out = s;
	return 0;
}

int src_spe_add_ring(struct src_spe *s, int cpu, const struct perf_ring *ring)
{
	struct spe_cpu *n = realloc(s->cpus, (s->ncpus + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->cpus = n;
	memset(&n[s->ncpus], 0, sizeof(*n));
	n[s->ncpus].cpu = cpu;
	n[s->ncpus].fd = -1;
	n[s->ncpus].ring = *ring;
	s->ncpus++;
	s->st.ncpus = s->ncpus;
	return 0;
}

void src_spe_set_clock_offset(struct src_spe *s, int64_t mono_minus_perf)
{
	s->clock_off = mono_minus_perf;
}

static size_t pages_for(size_t bytes, size_t psz, size_t min)
{
	size_t n = min;

	while (n * psz < bytes)
		n *= 2;
	return n;
}

int src_spe_open(struct src_spe **out, const struct src_spe_opts *o, src_spe_cb cb,
		 void *arg, char *err, size_t errsz)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	src_open_fn open_fn;
	struct src_spe *s;
	const char *name;
	int r, ncpu;

	if ((r = src_spe_open_offline(&s, o, cb, arg)) < 0) {
		snprintf(err, errsz, "spe source: %s", strerror(-r));
		return r;
	}
	name = o->events->ev[0].name;
	open_fn = o->open_fn ? o->open_fn : src_perf_event_open;
	if ((r = perf_clock_offset(&s->clock_off)) < 0) {
		snprintf(err, errsz, "spe source: measuring perf's clock against CLOCK_MONOTONIC: %s",
			 strerror(-r));
		goto fail;
	}
	s->clock_at = mono_ns();
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0) {
		r = ncpu < 0 ? ncpu : -ENODEV;
		snprintf(err, errsz, "spe source: counting CPUs: %s", strerror(-r));
		goto fail;
	}
	size_t data_pages = pages_for(o->data_bytes ? o->data_bytes : SPE_DATA_RING_BYTES, psz, 1);
	size_t aux_pages = pages_for(o->aux_bytes ? o->aux_bytes : SPE_AUX_BYTES, psz, 2);
	for (int cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr a = o->events->ev[0].attr;
		struct perf_ring ring;
		int fd = open_fn(&a, cpu, o->open_arg);
		if (fd == -ENODEV || fd == -ENXIO || fd == -ENOENT)
			continue;   /* offline, or a CPU this SPE instance does not cover */
		if (fd < 0) {
			r = fd;
			snprintf(err, errsz, "spe source: perf_event_open(%s, cpu %d): %s", name, cpu,
				 strerror(-r));
			goto fail;
		}
		if ((r = perf_ring_mmap(&ring, fd, data_pages, aux_pages)) < 0) {
			close(fd);
			snprintf(err, errsz, "spe source: mapping the AUX area of %s on cpu %d (%zu KiB): "
				 "%s%s", name, cpu, aux_pages * psz >> 10, strerror(-r),
				 r == -EPERM || r == -ENOMEM ? " (see /proc/sys/kernel/perf_event_mlock_kb)" : "");
			goto fail;
		}
		if ((r = src_spe_add_ring(s, cpu, &ring)) < 0) {
			perf_ring_free(&ring);
			close(fd);
			snprintf(err, errsz, "spe source: %s", strerror(-r));
			goto fail;
		}
		s->cpus[s->ncpus - 1].fd = fd;
	}
	if (!s->ncpus) {
		r = -ENODEV;
		snprintf(err, errsz, "spe source: no CPU accepted %s", name);
		goto fail;
	}
	/* The event was opened disabled: the driver needs the AUX buffer before it starts. */
	s->flush_at = mono_ns();
	for (size_t i = 0; i < s->ncpus; i++)
		if (ioctl(s->cpus[i].fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
			r = -errno;
			snprintf(err, errsz, "spe source: enabling %s on cpu %d: %s", name,
				 s->cpus[i].cpu, strerror(-r));
			goto fail;
		}
	s->watermark = s->flush_at - SPE_WATERMARK_SLACK_NS;
	*out = s;
	return 0;
fail:
	src_spe_close(s);
	return r;
}

/* Stops and restarts every event: the driver hands what the hardware buffered to the
 * AUX area and writes its PERF_RECORD_AUX before each ioctl returns. */
static void flush(struct src_spe *s)
{
	for (size_t i = 0; i < s->ncpus; i++) {
		if (s->cpus[i].fd < 0)
			continue;
		ioctl(s->cpus[i].fd, PERF_EVENT_IOC_DISABLE, 0);
		ioctl(s->cpus[i].fd, PERF_EVENT_IOC_ENABLE, 0);
	}
	s->st.flushes++;
}

static int poll_common(struct src_spe *s, bool force, bool final)
{
	uint64_t t0 = mono_ns();
	bool flushed = false;
	int64_t off;
	int n;

	if (t0 - s->clock_at >= PERF_CLOCK_RECAL_NS) {
		if (perf_clock_offset(&off) == 0)
			s->clock_off = off;
		s->clock_at = t0;
	}
	if (force || t0 - s->flush_at >= SPE_FLUSH_NS) {
		flush(s);
		s->flush_at = t0;
		flushed = true;
	}
	n = src_spe_drain(s, final);
	/* Everything the hardware took before t0 is now delivered. */
	if (flushed && t0 > SPE_WATERMARK_SLACK_NS && t0 - SPE_WATERMARK_SLACK_NS > s->watermark)
		s->watermark = t0 - SPE_WATERMARK_SLACK_NS;
	if (flushed && s->ngone)
		targets_prune(s);
	return n;
}

int src_spe_poll(struct src_spe *s)
{
	return poll_common(s, false, false);
}

int src_spe_finish(struct src_spe *s)
{
	return poll_common(s, true, true);
}

uint64_t src_spe_watermark(const struct src_spe *s)
{
	return s->watermark;
}

void src_spe_forget(struct src_spe *s, uint32_t tgid)
{
	uint64_t h = hash_u64(tgid) | 1;
	struct target_ent *t = hmap_find(&s->targets, h, target_eq, &tgid);

	if (!t || t->gone_ns)
		return;
	if (t->is_target) {
		/* Its samples still in the AUX buffers were taken while it was one: answered
		 * yes until the watermark passes now (the question asked again would be
		 * answered no for a process gone). */
		t->gone_ns = mono_ns();
		s->ngone++;
		return;
	}
	hmap_remove(&s->targets, h, t);
	free(t);
}

void src_spe_stats(const struct src_spe *s, struct src_spe_stats *out)
{
	*out = s->st;
	out->dec = s->dec.st;
	memset(&out->ring, 0, sizeof(out->ring));
	for (size_t i = 0; i < s->ncpus; i++) {
		const struct perf_ring_stats *r = &s->cpus[i].ring.st;
		out->ring.records += r->records;
		out->ring.lost_records += r->lost_records;
		out->ring.lost += r->lost;
		out->ring.bad_records += r->bad_records;
		out->ring.aux_records += r->aux_records;
		out->ring.aux_bytes += r->aux_bytes;
		out->ring.aux_undescribed += r->aux_undescribed;
		out->ring.aux_truncated += r->aux_truncated;
		out->ring.aux_partial += r->aux_partial;
		out->ring.aux_collision += r->aux_collision;
		out->ring.aux_overwrite += r->aux_overwrite;
		out->ring.aux_bad += r->aux_bad;
		out->ring.aux_lost_bytes += r->aux_lost_bytes;
	}
}

void src_spe_summary(const struct src_spe *s, char *buf, size_t n)
{
	struct src_spe_stats st;

	src_spe_stats(s, &st);
	snprintf(buf, n, "spe: %llu access samples from %llu records on %llu CPUs (not traced %llu, "
		 "no task %llu, kernel %llu, other ops %llu); lost: %llu data records, %llu truncated "
		 "AUX chunks, %llu collisions, %llu dropped records, %llu bad packets",
		 (unsigned long long)st.accesses, (unsigned long long)st.dec.records,
		 (unsigned long long)st.ncpus, (unsigned long long)st.not_target,
		 (unsigned long long)st.no_task, (unsigned long long)st.kernel,
		 (unsigned long long)st.not_memory, (unsigned long long)st.ring.lost,
		 (unsigned long long)st.ring.aux_truncated, (unsigned long long)st.ring.aux_collision,
		 (unsigned long long)st.dec.dropped_records, (unsigned long long)st.dec.bad_packets);
}

void src_spe_close(struct src_spe *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->ncpus; i++) {
		struct spe_cpu *c = &s->cpus[i];
		perf_ring_free(&c->ring);
		if (c->fd >= 0)
			close(c->fd);
		free(c->tl);
	}
	free(s->cpus);
	hmap_free(&s->tids);
	targets_clear(s);
	free(s);
}
