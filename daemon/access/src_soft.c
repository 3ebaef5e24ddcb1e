/* Soft source: perf events per CPU -> soft.bpf.c -> ring buffer -> decode -> callback.
 * Instruction bytes come from the mapped file at the IP's file offset (what the binary
 * says, immune to uprobe breakpoints patched into the text); the bytes BPF copied at the
 * IP are the fallback for anonymous (JIT) code. Decodes are cached per build-id + offset. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "daemon/alloc/core_btf.h"
#include "daemon/alloc/intern.h"
#include "daemon/access/src_soft.h"
#include "daemon/access/soft_calib.h"
#include "daemon/access/soft_stall.h"
#include "symbolizer/cfi_func.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/maps.h"
#include "symbolizer/insn_window.h"
#include "bpf/soft.h"
#include "soft.skel.h"
#include "base/clock.h"

#define BID_HEX (ELFSYM_BUILD_ID_MAX * 2 + 1)

struct sproc {
	uint32_t tgid;
	uint64_t start_ns;         /* the process instance whose maps these are */
	struct maps maps;
	bool loaded;
	uint64_t loaded_at;
	char (*bid)[BID_HEX];      /* per maps entry: "" unknown yet, "-" none */
};

struct symslot {
	char bid[BID_HEX];
	struct elfsym *es;
	struct cfi_func *cfi;      /* FDE starts, for code no symbol covers (NULL: none) */
};

struct src_soft {
	struct soft_bpf *skel;
	bool core_btf_used;          /* loaded against the cached minimized BTF */
	struct ring_buffer *rb;
	struct bpf_link **links;
	int *fds;
	unsigned *fd_ev;             /* per fd: its event's index in ev */
	int *fd_cpu;                 /* per fd: its CPU */
	size_t nlinks;
	struct src_events ev;
	double scale;                /* of every event's configured rate (src_soft_set_scale) */
	double ipns;                 /* instructions per ns of CPU a timer sample stands for */
	struct soft_rep_curve rep;   /* rep movsb bytes per ns by copy size (n 0: unmeasured,
	                              * ipns used) */
	struct bpf_link *fault_link; /* exceptions:page_fault_user (NULL: faults not told apart) */
	double first_touch_ns;       /* a page's first touch here, wall ns (0: not measured) */
	uint64_t fault_window_ns;    /* soft.bpf.c's (bpf/soft.h; 0: a PMU source, none) */
	char fault_why[96];          /* why they are not ("" when they are) */
	double mpi_sum;              /* window samples' memory operands per instruction, summed */
	uint64_t mpi_n;              /* ... over this many */
	struct insn_decoder *dec;
	struct soft_stall *stall;    /* per-block sample shares (NULL: weights as configured) */
	struct hmap procs;           /* hash(tgid) -> struct sproc * */
	struct hmap syms;            /* hash(build-id) -> struct symslot * */
	size_t nprocs;
	src_soft_cb cb;
	void *arg;
	uint64_t watermark;
	struct src_soft_stats st;
};

static bool proc_eq(const void *val, const void *key)
{
	return ((const struct sproc *)val)->tgid == *(const uint32_t *)key;
}

static void sproc_drop(struct sproc *p)
{
	maps_free(&p->maps);
	free(p->bid);
	p->bid = NULL;
	p->loaded = false;
}

static void sproc_remove(struct src_soft *s, struct sproc *p)
{
	sproc_drop(p);
	hmap_remove(&s->procs, hash_u64(p->tgid) | 1, p);
	free(p);
	s->nprocs--;
}

/* Full: entries of processes that are gone (a sample read after their exit was handled
 * brings one back) make room. */
static void sproc_collect(struct src_soft *s)
{
	struct sproc *gone[64];
	size_t n = 0;

	hmap_foreach(&s->procs, i) {
		struct sproc *p = s->procs.vals[i];
		if (n < sizeof(gone) / sizeof(gone[0]) && kill((pid_t)p->tgid, 0) < 0 && errno == ESRCH)
			gone[n++] = p;
	}
	for (size_t i = 0; i < n; i++)
		sproc_remove(s, gone[i]);
}

/* One entry per PID: a sample of another instance (the PID was reused) replaces it. */
static struct sproc *sproc_get(struct src_soft *s, uint32_t tgid, uint64_t start_ns)
{
	uint64_t h = hash_u64(tgid) | 1;
	struct sproc *p = hmap_find(&s->procs, h, proc_eq, &tgid);

	if (p) {
		if (p->start_ns != start_ns) {
			sproc_drop(p);
			p->start_ns = start_ns;
		}
		return p;
	}
	if (s->nprocs >= SOFT_PROCS_MAX)
		sproc_collect(s);
	if (s->nprocs >= SOFT_PROCS_MAX)
		return NULL;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	p->tgid = tgid;
	p->start_ns = start_ns;
	if (hmap_insert(&s->procs, h, p)) {
		free(p);
		return NULL;
	}
	s->nprocs++;
	return p;
}

static int sproc_load(struct sproc *p)
{
	sproc_drop(p);
	p->loaded_at = mono_ns();
	int r = maps_read_pid(&p->maps, (pid_t)p->tgid);
	if (r < 0)
		return r;
	p->bid = calloc(p->maps.n ? p->maps.n : 1, sizeof(*p->bid));
	if (!p->bid) {
		maps_free(&p->maps);
		return -ENOMEM;
	}
	p->loaded = true;
	return 0;
}

static const struct map_entry *find_map(struct sproc *p, uint64_t ip)
{
	const struct map_entry *e = p->loaded ? maps_find(&p->maps, ip) : NULL;

	if (!e && (!p->loaded || mono_ns() - p->loaded_at > SOFT_MAPS_RELOAD_NS)) {
		if (sproc_load(p) == 0)
			e = maps_find(&p->maps, ip);
	}
	return e;
}

static void map_files_path(char *buf, size_t n, uint32_t tgid, const struct map_entry *e)
{
	snprintf(buf, n, "/proc/%u/map_files/%llx-%llx", tgid, (unsigned long long)e->start,
		 (unsigned long long)e->end);
}

/* Build-id of the file behind e ("" if none), computed once per mapping. */
static const char *map_bid(struct sproc *p, const struct map_entry *e)
{
	char *b = p->bid[e - p->maps.v];
	char path[128];

	if (b[0])
		return b[0] == '-' ? "" : b;
	map_files_path(path, sizeof(path), p->tgid, e);
	if (elf_build_id_of(path, b, BID_HEX) < 0 && elf_build_id_of(e->path, b, BID_HEX) < 0)
		strcpy(b, "-");
	return b[0] == '-' ? "" : b;
}

static ssize_t read_code(uint32_t tgid, const struct map_entry *e, uint64_t off, uint8_t *buf,
			 size_t n_want)
{
	char path[128];
	int fd;
	ssize_t n;

	map_files_path(path, sizeof(path), tgid, e);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && !e->deleted)
		fd = open(e->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, n_want, (off_t)off);
	close(fd);
	return n < 0 ? -errno : n;
}

static bool bid_eq(const void *val, const void *key)
{
	return !strcmp(((const struct symslot *)val)->bid, key);
}

/* Function symbols and FDE starts of a binary, opened once per build-id (NULL: ENOMEM). */
static struct symslot *slot_for(struct src_soft *s, struct sproc *p, const struct map_entry *m,
				const char *bid)
{
	uint64_t h = hash_bytes(bid, strlen(bid), 0) | 1;
	struct symslot *ss = hmap_find(&s->syms, h, bid_eq, bid);
	char path[128];

	if (ss)
		return ss;
	if (!(ss = calloc(1, sizeof(*ss))))
		return NULL;
	snprintf(ss->bid, sizeof(ss->bid), "%s", bid);
	map_files_path(path, sizeof(path), p->tgid, m);
	if (elfsym_open(&ss->es, path) < 0 && elfsym_open(&ss->es, m->path) < 0)
		ss->es = NULL;
	if (cfi_func_open(&ss->cfi, path) < 0 && cfi_func_open(&ss->cfi, m->path) < 0)
		ss->cfi = NULL;
	if (hmap_insert(&s->syms, h, ss)) {
		elfsym_close(ss->es);
		cfi_func_close(ss->cfi);
		free(ss);
		return NULL;
	}
	return ss;
}

/* How far off is from the start of its function: the symbol's, else the FDE's (stripped
 * code with CFI: libc's string functions); false when neither is known. */
static bool func_delta(struct src_soft *s, struct sproc *p, const struct map_entry *m,
		       const char *bid, uint64_t off, uint64_t *delta)
{
	struct symslot *ss = slot_for(s, p, m, bid);
	uint64_t start;

	if (!ss)
		return false;
	if (ss->es && elfsym_lookup_offset(ss->es, off, delta))
		return true;
	if (cfi_func_start(ss->cfi, off, &start) < 0)
		return false;
	*delta = off - start;
	s->st.cfi_starts++;
	return true;
}

/* The instruction that retired just before ip (timer skid), decoded from its function's
 * start; true if it accessed memory (res filled). */
static bool prev_access(struct src_soft *s, struct sproc *p, const struct map_entry *m,
			uint64_t ip, const struct insn_ctx *ctx, struct insn_result *res)
{
	uint64_t off = map_entry_file_offset(m, ip), delta = 0;
	const char *bid = map_bid(p, m);
	const struct insn_decoded *dec;

	if (!*bid)
		return false;
	dec = insn_lookup_prev(s->dec, bid, off);
	if (!dec) {
		if (!func_delta(s, p, m, bid, off, &delta) || delta == 0 ||
		    delta > SOFT_PREV_MAX_BYTES || delta > off) {
			s->st.prev_unknown++;
			return false;
		}
		uint8_t *buf = malloc(delta);
		if (!buf)
			return false;
		ssize_t n = read_code(p->tgid, m, off - delta, buf, delta);
		if (n == (ssize_t)delta)
			dec = insn_decode_prev(s->dec, buf, delta, ip - delta, ip, bid, off);
		free(buf);
		if (!dec)
			return false;
	}
	return insn_eval_prev(s->dec, dec, ip, ctx, res) == INSN_OK && res->n > 0;
}

/* The straight-line window around ip (symbolizer/insn_window.h), decoded from its
 * function's start; false when the function is unknown (no symbol) or ip is not an
 * instruction boundary, and the single-instruction decode applies. */
static bool window_access(struct src_soft *s, struct sproc *p, const struct map_entry *m,
			  uint64_t ip, const struct insn_ctx *ctx, struct insn_win_result *res)
{
	uint64_t off = map_entry_file_offset(m, ip), delta = 0;
	const char *bid = map_bid(p, m);
	const struct insn_window *win;

	if (!*bid)
		return false;
	win = insn_win_lookup(s->dec, bid, off);
	if (!win) {
		if (!func_delta(s, p, m, bid, off, &delta) || delta > INSN_WIN_SCAN_MAX ||
		    delta > off)
			return false;
		size_t want = delta + INSN_WIN_FWD_BYTES;
		uint8_t *buf = malloc(want);
		if (!buf)
			return false;
		ssize_t n = read_code(p->tgid, m, off - delta, buf, want);
		if (n > (ssize_t)delta)
			win = insn_win_decode(s->dec, buf, (size_t)n, ip - delta, ip, bid, off);
		free(buf);
		if (!win)
			return false;
	}
	insn_win_eval(s->dec, win, ip, ctx, res);
	return res->ninsns > 0;
}

/* bytes: what the accesses read or write, 0 for weight x size (access_sample_bytes). */
static void deliver_err(struct src_soft *s, const struct soft_event *e, uint64_t addr,
			uint32_t size, uint8_t rw, uint8_t flags, uint64_t weight, uint64_t err,
			uint64_t bytes)
{
	struct access_sample a = {
		.tgid = e->tgid, .tid = e->tid, .cpu = e->cpu, .start_ns = e->start_ns,
		.time_ns = e->time_ns, .addr = addr, .size = size, .rw = rw, .flags = flags,
		.weight = weight, .weight_err = err, .bytes = bytes, .sp = e->regs[offsetof(struct insn_regs, rsp) / 8],
		.fs_base = (e->flags & SOFT_F_FSBASE) ? e->fs_base : 0,
	};
	s->st.accesses++;
	s->cb(s->arg, &a);
}

static void deliver(struct src_soft *s, const struct soft_event *e, uint64_t addr, uint32_t size,
		    uint8_t rw, uint8_t flags, uint64_t weight)
{
	deliver_err(s, e, addr, size, rw, flags, weight, 0, 0);
}

/* A PMU source: the hardware gave the address (loads: the events sample loads). The
 * estimate is per configured period; a sample taken at another period (the governor
 * changed it) stands for proportionally more or fewer. A sample without a data address
 * (the PMU recorded none for it) is one sampled load, not a timer sample's
 * instructions: dropped and counted. */
static int handle_pmu(struct src_soft *s, const struct soft_event *e, const struct src_event *ev)
{
	uint64_t w = e->period;

	if (ev && ev->est_per_sample) {
		w = ev->est_per_sample;
		if (!ev->attr.freq && ev->attr.sample_period && e->period)
			w = (uint64_t)((double)ev->est_per_sample * (double)e->period /
				       (double)ev->attr.sample_period + 0.5);
	}
	if (!(e->flags & SOFT_F_ADDR)) {
		s->st.pmu_no_addr++;
		return 0;
	}
	deliver(s, e, e->addr, 0, INSN_READ, 0, w);
	return 1;
}

/* A sample inside a rep string instruction stands for its iterations: period x this
 * CPU's rep rate in 8-byte words, for each of its accesses (source and destination);
 * in bytes, period x the rate, whatever the operand's width. The rate is the one for
 * the copy's size (soft_calib.h): the copy is rcx elements from its end, and a sample
 * falls anywhere in it alike, so twice that is what its whole size is taken to be.
 * Only the sampled instruction's accesses: another rep instruction of the window (a
 * rep movsb before a rep stosq in one run, both recovered) took none of this sample's
 * time, and crediting it a period's iterations too counted a copy-then-fill loop's
 * samples ~2x (access_patterns' rep, est 2.6x the words moved on an Intel host). */
static int deliver_rep(struct src_soft *s, const struct soft_event *e,
		       const struct insn_win_result *wres, uint64_t w)
{
	uint64_t bytes = 0, rcx = e->regs[offsetof(struct insn_regs, rcx) / 8];
	int n = 0;

	for (unsigned i = 0; i < wres->n; i++)
		if ((wres->acc[i].flags & (INSN_F_REP | INSN_F_AT_IP)) ==
		    (INSN_F_REP | INSN_F_AT_IP)) {
			double left = (double)rcx * (wres->acc[i].size ? wres->acc[i].size : 1);
			double rate = soft_rep_rate(&s->rep, 2 * left);
			if (rate > 0) {
				bytes = (uint64_t)((double)e->period * rate + 0.5);
				w = (uint64_t)((double)e->period * rate / SOFT_REP_WORD + 0.5);
			}
			deliver_err(s, e, wres->acc[i].addr, wres->acc[i].size, wres->acc[i].rw,
				    wres->acc[i].flags, w ? w : 1, 0, bytes);
			n++;
		}
	if (!n)
		s->st.no_access++;
	else
		s->st.from_window++;
	return n;
}

/* The sample stands for the window's instructions alike, so for w x nmem / ninsns
 * accesses; they are spread over the accesses recovered (those whose registers were
 * overwritten are assumed to go where the recovered ones go). */
static int deliver_window(struct src_soft *s, const struct soft_event *e,
			  const struct insn_win_result *wres, uint64_t w, double rel_err)
{
	uint64_t wa, err;

	if (!wres->n) {
		s->st.no_access++;
		return 0;
	}
	s->mpi_sum += (double)wres->nmem / wres->ninsns;
	s->mpi_n++;
	wa = (uint64_t)((double)w * wres->nmem / wres->ninsns / wres->n + 0.5);
	err = (uint64_t)((double)wa * rel_err + 0.5);
	s->st.from_window++;
	for (unsigned i = 0; i < wres->n; i++)
		deliver_err(s, e, wres->acc[i].addr, wres->acc[i].size, wres->acc[i].rw,
			    wres->acc[i].flags, wa ? wa : 1, err, 0);
	return (int)wres->n;
}

/* Whether a sample marked SOFT_F_FAULT stands for its fault's time: an access it
 * recovers lies in the fault's page (counted). */
static bool fault_time(struct src_soft *s, const struct soft_event *e,
		       const struct insn_access *acc, unsigned n)
{
	uint64_t page = e->fault_addr >> 12;

	if (!(e->flags & SOFT_F_FAULT))
		return false;
	for (unsigned i = 0; i < n; i++) {
		uint64_t last = acc[i].addr + (acc[i].size ? acc[i].size - 1 : 0);
		if (acc[i].addr >> 12 == page || last >> 12 == page) {
			s->st.fault_time++;
			return true;
		}
	}
	return false;
}

int src_soft_handle(struct src_soft *s, const void *data, size_t len)
{
	const struct soft_event *e = data;
	struct insn_ctx ctx;
	struct insn_result res;
	struct insn_win_result wres;
	const struct insn_decoded *dec = NULL;
	const struct map_entry *m;
	struct sproc *p;
	uint64_t ip, w;

	if (len < sizeof(*e))
		return 0;
	s->st.events++;
	const struct src_event *ev = s->ev.n ? &s->ev.ev[0] : NULL;
	if ((e->flags & SOFT_F_ADDR) || (ev && ev->attr.type != PERF_TYPE_SOFTWARE))
		return handle_pmu(s, e, ev);
	memset(&ctx, 0, sizeof(ctx));
	memcpy(&ctx.regs, e->regs, sizeof(ctx.regs));
	ctx.fs_base = e->fs_base;
	ctx.gs_base = e->gs_base;
	ctx.fs_known = ctx.gs_known = (e->flags & SOFT_F_FSBASE) != 0;
	ip = ctx.regs.rip;
	w = (uint64_t)((double)e->period * s->ipns + 0.5);

	p = sproc_get(s, e->tgid, e->start_ns);
	m = p ? find_map(p, ip) : NULL;
	if (!m)
		s->st.no_mapping++;
	if (m && m->path[0] == '/' && window_access(s, p, m, ip, &ctx, &wres)) {
		if (fault_time(s, e, wres.acc, wres.n))
			return 0;
		if (wres.ip_rep)
			return deliver_rep(s, e, &wres, w);
		/* The median rule only where a load waits on a load: elsewhere samples also
		 * pile up on the first instruction of a group retired together, which is no
		 * stall; the excess rule counts only piles after reads (soft_stall.h). */
		double rel_err = 0, f = soft_stall_factor(s->stall, wres.block, wres.pos, wres.ninsns,
							  wres.after_read, wres.after_unstrided,
							  wres.dep_load, &rel_err);
		return deliver_window(s, e, &wres, (uint64_t)((double)w * f + 0.5), rel_err);
	}
	if (m && m->path[0] == '/') {
		uint64_t off = map_entry_file_offset(m, ip);
		const char *bid = map_bid(p, m);
		dec = insn_lookup(s->dec, bid, off);
		if (!dec) {
			uint8_t buf[INSN_MAX_BYTES];
			ssize_t n = read_code(e->tgid, m, off, buf, sizeof(buf));
			if (n > 0) {
				dec = insn_decode(s->dec, buf, (size_t)n, ip, bid, off);
				s->st.code_from_file++;
			}
		} else {
			s->st.code_from_file++;
		}
	}
	if (!dec && (e->flags & SOFT_F_CODE)) {
		dec = insn_decode(s->dec, e->code, SOFT_CODE_BYTES, ip, NULL, 0);
		s->st.code_from_bpf++;
	}
	if (!dec) {
		static const uint8_t none[1] = { 0 };
		dec = insn_decode(s->dec, none, 0, ip, NULL, 0);   /* counted as undecodable */
		s->st.code_unavailable++;
	}
	if (!dec)
		return 0;
	insn_eval(s->dec, dec, ip, &ctx, &res);
	if (res.n) {
		s->st.from_ip++;
	} else if (m && m->path[0] == '/' && prev_access(s, p, m, ip, &ctx, &res)) {
		s->st.from_prev++;
	} else {
		s->st.no_access++;
		return 0;
	}
	if (fault_time(s, e, res.acc, res.n))
		return 0;
	double mpi = (s->mpi_sum + SOFT_MEM_PER_INSN * SOFT_MEM_PER_INSN_WEIGHT) /
		     ((double)s->mpi_n + SOFT_MEM_PER_INSN_WEIGHT);
	uint64_t wa = (uint64_t)((double)w * mpi / res.n + 0.5);
	for (unsigned i = 0; i < res.n; i++)
		deliver(s, e, res.acc[i].addr, res.acc[i].size, res.acc[i].rw, res.acc[i].flags,
			wa ? wa : 1);
	return (int)res.n;
}

static int on_ring(void *ctx, void *data, size_t len)
{
	src_soft_handle(ctx, data, len);
	return 0;
}

void src_soft_set_events(struct src_soft *s, const struct src_events *ev)
{
	s->ev = *ev;
}

int src_soft_open_offline(struct src_soft **out, src_soft_cb cb, void *arg)
{
	struct src_soft *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	if ((r = insn_decoder_open(&s->dec, 0)) < 0) {
		free(s);
		return r;
	}
	s->cb = cb;
	s->arg = arg;
	s->scale = 1.0;
	s->ipns = SOFT_EST_INSNS_PER_NS;
	*out = s;
	return 0;
}

double src_soft_insns_per_ns(const struct src_soft *s)
{
	return s->ipns;
}

bool src_soft_core_btf_used(const struct src_soft *s)
{
	return s->core_btf_used;
}

bool src_soft_faults_told(const struct src_soft *s, double *first_touch_ns,
			  uint64_t *window_ns, const char **why)
{
	*first_touch_ns = s->first_touch_ns;
	*window_ns = s->fault_window_ns;
	*why = s->fault_why;
	return s->fault_link != NULL;
}

const struct soft_rep_curve *src_soft_rep_curve(const struct src_soft *s)
{
	return &s->rep;
}

void src_soft_set_rep_curve(struct src_soft *s, const struct soft_rep_curve *c)
{
	s->rep = *c;
}

/* soft.bpf.c as core_btf_load drives it (core_btf.h: its CO-RE relocation against the
 * whole vmlinux BTF was most of the soft source's start-up). */
struct soft_load {
	struct src_soft *s;
	const struct src_soft_opts *o;
	char *err;
	size_t errsz;
};

static int soft_skel_open(void *arg, const struct bpf_object_open_opts *oo)
{
	struct soft_load *l = arg;

	l->s->skel = soft_bpf__open_opts(oo);
	return l->s->skel ? 0 : (errno ? -errno : -EINVAL);
}

static int soft_skel_configure(void *arg)
{
	struct soft_load *l = arg;
	int r;

	l->s->skel->rodata->all_processes = l->o && l->o->all_processes;
	l->s->skel->rodata->fault_window_ns = l->s->fault_window_ns;
	if (l->o && l->o->targets_fd >= 0 &&
	    (r = bpf_map__reuse_fd(l->s->skel->maps.targets, l->o->targets_fd)) < 0) {
		snprintf(l->err, l->errsz, "soft source: sharing the targets map: %s", strerror(-r));
		return r;
	}
	return 0;
}

static int soft_skel_load(void *arg)
{
	return soft_bpf__load(((struct soft_load *)arg)->s->skel);
}

static void soft_skel_destroy(void *arg)
{
	struct soft_load *l = arg;

	soft_bpf__destroy(l->s->skel);
	l->s->skel = NULL;
}

static int soft_load(struct src_soft *s, const struct src_soft_opts *o, char *err, size_t errsz)
{
	struct soft_load l = { .s = s, .o = o, .err = err, .errsz = errsz };
	struct core_btf_skel k = { .name = "soft", .open = soft_skel_open,
				   .configure = soft_skel_configure, .load = soft_skel_load,
				   .destroy = soft_skel_destroy, .arg = &l };
	enum core_btf_stage stage;
	int r;

	k.obj = soft_bpf__elf_bytes(&k.objsz);
	if ((r = core_btf_load(&k, &s->core_btf_used, &stage)) < 0 && stage != CORE_BTF_CONFIGURE)
		snprintf(err, errsz, "soft source: %s the BPF %s: %s",
			 stage == CORE_BTF_OPEN ? "opening" : "loading",
			 stage == CORE_BTF_OPEN ? "object" : "program", strerror(-r));
	return r;
}

/* bpf/soft.h's fault window for a first touch of t ns (0: not measured, the minimum). */
static uint64_t fault_window(double t)
{
	double w = t * SOFT_FAULT_WINDOW_PER_TOUCH;

	if (!(w >= SOFT_FAULT_WINDOW_MIN_NS))
		return SOFT_FAULT_WINDOW_MIN_NS;
	return w > SOFT_FAULT_WINDOW_MAX_NS ? SOFT_FAULT_WINDOW_MAX_NS : (uint64_t)w;
}

int src_soft_open(struct src_soft **out, const struct src_soft_opts *o, src_soft_cb cb,
		  void *arg, char *err, size_t errsz)
{
	struct src_soft *s;
	char why[SRC_PMU_WHY_MAX];
	int r, ncpu;

	if ((r = src_soft_open_offline(&s, cb, arg)) < 0) {
		snprintf(err, errsz, "soft source: %s", strerror(-r));
		return r;
	}
	if (o && o->events) {
		s->ev = *o->events;
	} else {
		struct src_pmu_opts po = { .freq = o ? o->freq : 0, .period = o ? o->period : 0 };
		src_pmu_soft(&po, &s->ev, why, sizeof(why));
	}
	s->ipns = soft_calib_insns_per_ns(SOFT_EST_INSNS_PER_NS);   /* this run, this CPU */
	soft_calib_rep_curve(&s->rep);
	/* Faults matter to timer samples only: a PMU's count of events has no host time. */
	bool timer = s->ev.n && s->ev.ev[0].attr.type == PERF_TYPE_SOFTWARE;
	if (timer) {
		s->first_touch_ns = soft_calib_first_touch_ns();
		s->fault_window_ns = fault_window(s->first_touch_ns);
	}
	/* MEMPROFD_SOFT_STALL=off: the clock x IPC weights alone (bench/access_dhat*.py's
	 * side-by-side). A table that cannot be allocated leaves them so too. */
	const char *stall = getenv("MEMPROFD_SOFT_STALL");
	if (!(stall && !strcmp(stall, "off")) && soft_stall_open(&s->stall) < 0)
		s->stall = NULL;
	if ((r = soft_load(s, o, err, errsz)) < 0)
		goto fail;
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0) {
		r = ncpu < 0 ? ncpu : -ENODEV;
		snprintf(err, errsz, "soft source: counting CPUs: %s", strerror(-r));
		goto fail;
	}
	s->links = calloc((size_t)ncpu * s->ev.n, sizeof(*s->links));
	s->fds = calloc((size_t)ncpu * s->ev.n, sizeof(*s->fds));
	s->fd_ev = calloc((size_t)ncpu * s->ev.n, sizeof(*s->fd_ev));
	s->fd_cpu = calloc((size_t)ncpu * s->ev.n, sizeof(*s->fd_cpu));
	if (!s->links || !s->fds || !s->fd_ev || !s->fd_cpu) {
		r = -ENOMEM;
		snprintf(err, errsz, "soft source: %s", strerror(ENOMEM));
		goto fail;
	}
	for (unsigned i = 0; i < s->ev.n; i++) {
		for (int cpu = 0; cpu < ncpu; cpu++) {
			struct perf_event_attr a = s->ev.ev[i].attr;
			int fd = src_perf_event_open(&a, cpu, NULL);
			if (fd == -ENODEV || fd == -ENXIO)
				continue;    /* possible but offline CPU */
			if (fd < 0) {
				r = fd;
				snprintf(err, errsz, "soft source: perf_event_open(%s, cpu %d): %s",
					 s->ev.ev[i].name, cpu, strerror(-r));
				goto fail;
			}
			struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.on_sample, fd);
			if (!l) {
				r = -errno;
				close(fd);
				snprintf(err, errsz, "soft source: attaching to %s on cpu %d: %s",
					 s->ev.ev[i].name, cpu, strerror(-r));
				goto fail;
			}
			s->fds[s->nlinks] = fd;
			s->fd_ev[s->nlinks] = i;
			s->fd_cpu[s->nlinks] = cpu;
			s->links[s->nlinks++] = l;
		}
	}
	s->st.nevents_open = s->nlinks;
	if (timer) {
		s->fault_link = bpf_program__attach_tracepoint(s->skel->progs.on_fault, "exceptions",
							       "page_fault_user");
		if (!s->fault_link)   /* not x86, or no tracefs: samples weighed as before */
			snprintf(s->fault_why, sizeof(s->fault_why),
				 "exceptions:page_fault_user: %s", strerror(errno));
	} else {
		snprintf(s->fault_why, sizeof(s->fault_why), "not a timer source");
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.soft_events), on_ring, s, NULL);
	if (!s->rb) {
		r = -errno;
		snprintf(err, errsz, "soft source: ring buffer: %s", strerror(-r));
		goto fail;
	}
	s->watermark = mono_ns() - SOFT_WATERMARK_SLACK_NS;
	*out = s;
	return 0;
fail:
	src_soft_close(s);
	return r;
}

int src_soft_add_target(struct src_soft *s, uint32_t pid)
{
	uint64_t any = 0;

	if (!s->skel)
		return -EBADF;
	return bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &pid, &any, BPF_ANY) ? -errno : 0;
}

/* Reads every record in the ring now (no wait). */
static int src_soft_drain(struct src_soft *s)
{
	uint64_t t0 = mono_ns();
	int r = ring_buffer__consume(s->rb);

	if (r < 0)
		return r;
	/* A drain that began at t0 consumed every record submitted before t0. */
	if (t0 > SOFT_WATERMARK_SLACK_NS && t0 - SOFT_WATERMARK_SLACK_NS > s->watermark)
		s->watermark = t0 - SOFT_WATERMARK_SLACK_NS;
	return r;
}

void src_soft_forget(struct src_soft *s, uint32_t tgid)
{
	struct sproc *p;

	/* Samples of tgid still in the ring were taken under the maps being dropped: read
	 * them first. Left for later, each read the maps again, of a process gone (no
	 * mapping: its window, rep rate and code file lost; a lagging reader lost the last
	 * passes of every short run) or of the image an exec put in (the wrong code). */
	if (s->rb)
		src_soft_drain(s);
	p = hmap_find(&s->procs, hash_u64(tgid) | 1, proc_eq, &tgid);
	/* Removed, not only emptied: a daemon sees far more than SOFT_PROCS_MAX processes
	 * come and go, and a later sample of tgid reads its maps again anyway. */
	if (p)
		sproc_remove(s, p);
}

/* ev's attr at scale of its configured rate: a frequency times scale, or a period
 * divided by it (never 0). */
static struct perf_event_attr scaled_attr(const struct src_event *ev, double scale)
{
	struct perf_event_attr a = ev->attr;
	double v = a.freq ? (double)a.sample_freq * scale : (double)a.sample_period / scale;
	uint64_t r = v < 1 ? 1 : (uint64_t)(v + 0.5);

	if (a.freq)
		a.sample_freq = r;
	else
		a.sample_period = r;
	return a;
}

int src_soft_set_scale(struct src_soft *s, double scale)
{
	if (!(scale > 0) || scale > 1)
		return -EINVAL;
	/* Reopened, not changed in place: PERF_EVENT_IOC_PERIOD on a cpu-clock event takes a
	 * period in ns even when it was opened by frequency, and its samples keep reporting
	 * the period it was opened with, which the estimator reads. A new event reports its
	 * own; samples of the old one still in the ring keep theirs. */
	for (size_t i = 0; i < s->nlinks; i++) {
		struct perf_event_attr a = scaled_attr(&s->ev.ev[s->fd_ev[i]], scale);
		int fd = src_perf_event_open(&a, s->fd_cpu[i], NULL);
		if (fd < 0)
			return fd;
		struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.on_sample, fd);
		if (!l) {
			int e = -errno;
			close(fd);
			return e;
		}
		bpf_link__destroy(s->links[i]);
		close(s->fds[i]);
		s->links[i] = l;
		s->fds[i] = fd;
	}
	s->scale = scale;
	return 0;
}

double src_soft_rate(const struct src_soft *s, const char **unit)
{
	const struct src_event *ev = s->ev.n ? &s->ev.ev[0] : NULL;

	if (!ev) {
		*unit = NULL;
		return -1;
	}
	struct perf_event_attr a = scaled_attr(ev, s->scale);
	bool clock = a.type == PERF_TYPE_SOFTWARE;
	*unit = a.freq ? "Hz per CPU" : clock ? "ns of CPU per sample" : "events per sample";
	return (double)(a.freq ? a.sample_freq : a.sample_period);
}

int src_soft_poll(struct src_soft *s, int timeout_ms)
{
	uint64_t before = s->st.events;
	int r;

	if (!s->rb)
		return -EBADF;
	r = ring_buffer__poll(s->rb, timeout_ms);
	if (r < 0 && r != -EINTR)
		return r;
	/* soft.bpf.c wakes the reader only past a quarter full: consume whatever is there
	 * whether or not the poll was woken. */
	r = src_soft_drain(s);
	return r < 0 ? r : (int)(s->st.events - before);
}

uint64_t src_soft_watermark(const struct src_soft *s)
{
	return s->watermark;
}

int src_soft_ring_fd(const struct src_soft *s)
{
	return s->rb ? ring_buffer__epoll_fd(s->rb) : -EBADF;
}

void src_soft_stats(const struct src_soft *s, struct src_soft_stats *out)
{
	*out = s->st;
	memset(out->bpf, 0, sizeof(out->bpf));
	if (!s->skel)
		return;
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return;
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return;
	for (uint32_t k = 0; k < SOFTCNT_MAX && k < sizeof(out->bpf) / sizeof(out->bpf[0]); k++) {
		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.soft_counters), &k, v))
			continue;
		for (int c = 0; c < ncpu; c++)
			out->bpf[k] += v[c];
	}
	free(v);
}

const struct insn_win_stats *src_soft_win_stats(const struct src_soft *s)
{
	return insn_win_stats(s->dec);
}

const struct insn_stats *src_soft_insn_stats(const struct src_soft *s)
{
	return insn_stats(s->dec);
}

void src_soft_close(struct src_soft *s)
{
	if (!s)
		return;
	ring_buffer__free(s->rb);
	bpf_link__destroy(s->fault_link);
	for (size_t i = 0; i < s->nlinks; i++) {
		bpf_link__destroy(s->links[i]);
		close(s->fds[i]);
	}
	free(s->links);
	free(s->fds);
	free(s->fd_ev);
	free(s->fd_cpu);
	soft_stall_close(s->stall);
	soft_bpf__destroy(s->skel);
	hmap_foreach(&s->procs, i) {
		sproc_drop(s->procs.vals[i]);
		free(s->procs.vals[i]);
	}
	hmap_free(&s->procs);
	hmap_foreach(&s->syms, i) {
		struct symslot *ss = s->syms.vals[i];
		elfsym_close(ss->es);
		cfi_func_close(ss->cfi);
		free(ss);
	}
	hmap_free(&s->syms);
	insn_decoder_close(s->dec);
	free(s);
}
