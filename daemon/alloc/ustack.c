/* Copied stacks into contexts. Invariants: a context's frames are return addresses in
 * executable file mappings of the process, innermost first, and a walk that ended
 * anywhere but the outermost frame marks the context truncated; a process is walked by
 * frame pointers in BPF only once every object it maps (but libc and the dynamic loader,
 * whose frames sit below main) was found to keep them, and a frame-pointer key stands
 * for its allocations only once its walk gave its first copy's frames (check_key): a
 * site's context is its DWARF stack, ended as fp_shape says for the whole image, however
 * and whenever it was walked. Cost: one libdwfl walk per record; one ELF open per
 * (file, inode) mapped and per object checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/log.h"
#include "daemon/alloc/ustack.h"
#include "daemon/alloc/unwind.h"
#include "daemon/alloc/procmaps.h"
#include "bpf/sampled.h"
#include "symbolizer/fpcheck.h"

/* Runtime objects whose frames sit below main or rarely between an allocation and its
 * caller: their lack of frame pointers does not send a process to copied stacks. Where
 * one does sit there (libstdc++'s out-of-line string code), the walk that never reaches
 * the program is caught when it arrives (events.c, ustack_fp_cut). */
static const char *const fp_exempt[] = { "libc.so.6", "ld-linux-x86-64.so.2", "libstdc++.so.6",
					  "libgcc_s.so.1", "libm.so.6" };

#define USTACK_MAPS_RELOADS 64   /* maps re-read per process for unknown frames (dlopen) */
#define USTACK_TOP_SLACK 256     /* bytes copied above the outermost frame's last word read
                                  * (start-up code before main may sit a little higher) */

_Static_assert(STACK_KEY_OWN == ALLOC_USTACK_KEY, "intern.h's stack_slot knows own keys");

struct filebin {
	unsigned dev_major, dev_minor;
	uint64_t inode;
	const char *path;          /* interned */
	struct binary *b;
};

static uint64_t file_hash(const struct map_entry *e)
{
	uint64_t h = hash_u64(((uint64_t)e->dev_major << 40) ^ ((uint64_t)e->dev_minor << 20) ^ e->inode);

	return hash_bytes(e->path, strlen(e->path), h);
}

static bool file_eq(const void *val, const void *key)
{
	const struct filebin *f = val;
	const struct map_entry *e = key;

	return f->dev_major == e->dev_major && f->dev_minor == e->dev_minor &&
	       f->inode == e->inode && !strcmp(f->path, e->path);
}

struct binary *ustack_map_binary(struct recorder *r, struct proc *p, const struct map_entry *e)
{
	uint64_t h = file_hash(e);
	struct filebin *f = hmap_find(&r->procs.files, h, file_eq, e);

	if (f)
		return f->b;
	if (e->path[0] != '/')
		return NULL;
	struct binary *b = bin_register_map(&r->procs, p, e);
	if (!b)
		return NULL;   /* not cached: the process may be gone, a later one may tell */
	f = calloc(1, sizeof(*f));
	if (!f)
		return b;
	*f = (struct filebin){ e->dev_major, e->dev_minor, e->inode, intern_str(&r->in, e->path), b };
	if (!f->path || hmap_insert(&r->procs.files, h, f))
		free(f);
	return b;
}

/* The executable mapping of p that holds ip; the maps are read again once when none
 * does (an object mapped since they were read). */
static const struct map_entry *exec_map(struct proc *p, uint64_t ip, bool *reloaded)
{
	const struct map_entry *m;

	procmaps_load(p);
	m = maps_find(&p->maps, ip);
	if ((!m || !(m->prot & PROT_EXEC)) && !*reloaded && p->maps_reloads < USTACK_MAPS_RELOADS) {
		*reloaded = true;
		p->maps_reloads++;
		procmaps_reload(p);
		m = maps_find(&p->maps, ip);
	}
	return m && (m->prot & PROT_EXEC) ? m : NULL;
}

/* Whether b keeps frame pointers: 1, -1, or 0 when its file could not be read (then
 * asked again next time). Read through the mapping of process p when given (e: the
 * registered path may be a descriptor of another process, or replaced since). */
static signed char binary_fp(struct binary *b, const struct proc *p, const struct map_entry *e)
{
	char open_path[128];
	int rc;

	if (b->fp)
		return b->fp;
	rc = -ENOENT;
	if (p && e) {   /* the very file mapped */
		snprintf(open_path, sizeof(open_path), "/proc/%u/map_files/%llx-%llx", p->pid,
			 (unsigned long long)e->start, (unsigned long long)e->end);
		rc = fpcheck_path(open_path);
	}
	if (rc < 0 && strncmp(b->path, "/proc/self/", 11))
		rc = fpcheck_path(b->path);
	if (rc >= 0)
		b->fp = rc > 0 ? 1 : -1;
	return b->fp;
}

static bool fp_exempt_path(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof(fp_exempt) / sizeof(fp_exempt[0]); i++)
		if (!strncmp(base, fp_exempt[i], strlen(fp_exempt[i])))   /* libstdc++.so.6.0.30 */
			return true;
	return false;
}

/* MEMPROFD_UNWIND=fp|dwarf overrides the per-object decision, for bench/unwind_cost.py's
 * side-by-side cost of the two walks on one program (fp on code without frame pointers
 * records wrong stacks: never for real use). */
static unsigned forced_mode(unsigned mode)
{
	const char *e = getenv("MEMPROFD_UNWIND");

	if (e && !strcmp(e, "fp"))
		return UNWIND_FP;
	if (e && !strcmp(e, "dwarf"))
		return UNWIND_DWARF;
	return mode;
}

static void set_mode(struct recorder *r, struct proc *p, unsigned mode)
{
	struct unwind_mode_val v = { .start_ns = p->start_ns, .mode = mode,
				     .stack_top = mode == UNWIND_DWARF ? p->stack_top : 0,
				     .deep = mode == UNWIND_DWARF && p->deep_copy };
	uint32_t tgid = p->pid;

	if (bpf_map_update_elem(r->unwind_modes_fd, &tgid, &v, BPF_ANY) && !r->unwind_mode_logged) {
		r->unwind_mode_logged = true;
		log_warn("%s: unwind_modes: %s (stacks stay copied)", recorder_cmd(r), strerror(errno));
	}
}

/* The shape of p's stacks, from its executable alone: decided once per image (at exec,
 * or at the first stack of a process that was not seen exec'ing), so that a later switch
 * of mode keeps it. */
static void decide_shape(struct recorder *r, struct proc *p)
{
	signed char fp = 0;

	for (size_t i = 0; i < p->maps.n && !fp; i++) {
		const struct map_entry *e = &p->maps.v[i];
		if (!(e->prot & PROT_EXEC) || !*p->exe || strcmp(e->path, p->exe))
			continue;
		struct binary *b = ustack_map_binary(r, p, e);
		fp = b ? binary_fp(b, p, e) : 0;
	}
	if (fp)
		p->fp_shape = fp;
}

void ustack_decide(struct recorder *r, struct proc *p)
{
	bool all;

	if (r->unwind_modes_fd <= 0)
		return;
	procmaps_load(p);
	if (!p->maps.n)
		return;   /* gone (or unreadable): undecided, its frame-pointer stacks stand */
	p->fp_checked = true;
	if (!p->fp_shape)
		decide_shape(r, p);
	all = true;
	for (size_t i = 0; i < p->maps.n && all; i++) {
		const struct map_entry *e = &p->maps.v[i];
		if (!(e->prot & PROT_EXEC) || e->path[0] != '/' || fp_exempt_path(e->path))
			continue;
		struct binary *b = ustack_map_binary(r, p, e);
		all = b && binary_fp(b, p, e) > 0;
	}
	p->fp_mode = forced_mode(all ? UNWIND_FP : UNWIND_DWARF) == UNWIND_FP;
	if (!p->fp_shape)   /* the executable is not among the maps (deleted, renamed) */
		p->fp_shape = all ? 1 : -1;
	set_mode(r, p, forced_mode(all ? UNWIND_FP : UNWIND_DWARF));
}

void ustack_decide_exec(struct recorder *r, struct proc *p)
{
	bool all = true;

	if (r->unwind_modes_fd <= 0)
		return;
	p->stack_top = 0;   /* a new image, a new stack */
	p->deep_copy = false;
	maps_free(&p->maps);
	p->maps_loaded = false;
	if (maps_read_pid(&p->maps, p->pid) || !p->maps.n)
		return;
	procmaps_keep(p, &p->maps);   /* a short-lived image may be gone by its first stack */
	for (size_t i = 0; i < p->maps.n && all; i++) {
		const struct map_entry *e = &p->maps.v[i];
		if (!(e->prot & PROT_EXEC) || e->path[0] != '/' || fp_exempt_path(e->path))
			continue;
		struct binary *b = ustack_map_binary(r, p, e);
		all = b && binary_fp(b, p, e) > 0;
	}
	/* Libraries are not mapped yet: an executable with frame pointers is checked
	 * again, whole, at its first stack. */
	p->fp_checked = !all;
	p->fp_shape = all ? 1 : -1;   /* only the executable is checked yet (and the loader) */
	p->fp_mode = forced_mode(all ? UNWIND_FP : UNWIND_DWARF) == UNWIND_FP;
	set_mode(r, p, forced_mode(all ? UNWIND_FP : UNWIND_DWARF));
	maps_free(&p->maps);
}

void ustack_check_fp_frame(struct recorder *r, struct proc *p, struct binary *b)
{
	if (r->unwind_modes_fd <= 0 || !p->fp_mode || forced_mode(UNWIND_DWARF) != UNWIND_DWARF ||
	    binary_fp(b, NULL, NULL) >= 0 ||
	    fp_exempt_path(b->path))
		return;   /* not walked by frame pointers, or b keeps them (or is unreadable) */
	p->fp_mode = false;
	set_mode(r, p, UNWIND_DWARF);
}

bool ustack_fp_exempt(const struct binary *b)
{
	return b && fp_exempt_path(b->path);
}

bool ustack_is_loader(const struct binary *b)
{
	const char *base = b ? strrchr(b->path, '/') : NULL;

	base = base ? base + 1 : b ? b->path : "";
	return !strncmp(base, "ld-linux", 8);
}

/* Objects whose out-of-line code allocates on the program's behalf in its hot paths
 * (std::string's members): a walk cut there sends the process to copied stacks. A walk
 * cut in libc (stdio buffers, strdup) is only marked: switching a C program to copied
 * stacks at its first printf would cost every later allocation a copy. */
static const char *const fp_cut_switch[] = { "libstdc++.so.6", "libgcc_s.so.1", "libm.so.6" };

void ustack_fp_cut(struct recorder *r, struct proc *p, const struct binary *outer)
{
	const char *base = strrchr(outer->path, '/');
	bool sw = false;

	base = base ? base + 1 : outer->path;
	for (size_t i = 0; i < sizeof(fp_cut_switch) / sizeof(fp_cut_switch[0]); i++)
		sw |= !strncmp(base, fp_cut_switch[i], strlen(fp_cut_switch[i]));
	if (!sw || r->unwind_modes_fd <= 0 || !p->fp_mode ||
	    forced_mode(UNWIND_DWARF) != UNWIND_DWARF)
		return;
	p->fp_mode = false;
	set_mode(r, p, UNWIND_DWARF);
}

/* A whole walk of the main thread's stack read nothing above its outermost frame: later
 * copies stop there (plus USTACK_TOP_SLACK), sparing the argv and environment pages. */
static void note_top(struct recorder *r, struct proc *p, bool truncated)
{
	uint64_t top = unwind_top(p->uw);
	const struct map_entry *m;

	if (truncated || !top || p->fp_mode || !p->fp_checked || !p->maps_loaded ||
	    !(m = maps_find(&p->maps, top - 1)) || strcmp(m->path, "[stack]"))
		return;   /* not a whole walk, or another thread's stack */
	top += USTACK_TOP_SLACK;
	if (top <= p->stack_top)
		return;
	p->stack_top = top;
	set_mode(r, p, UNWIND_DWARF);
}

/* A walk that ran out of an ALLOC_USTACK_MAX copy (deep recursion): later copies of the
 * process go up to ALLOC_USTACK_DEEP_MAX, as far as the ring's room allows. */
static void note_deep(struct recorder *r, struct proc *p, const struct ev_ustack *e,
		      enum unwind_stop stop)
{
	if (stop != UNWIND_STOP_COPY || e->len < ALLOC_USTACK_MAX || p->deep_copy || p->fp_mode ||
	    !p->fp_checked)
		return;
	p->deep_copy = true;
	set_mode(r, p, UNWIND_DWARF);
}

int ustack_size_scratch(struct bpf_map *scratch)
{
	int ncpus = libbpf_num_possible_cpus();

	if (ncpus < 0)
		return ncpus;
	return bpf_map__set_max_entries(scratch, (uint32_t)ncpus);
}

static unsigned stack_unresolved(const struct istack *s)
{
	unsigned u = 0;

	for (unsigned i = 0; i < s->nframes; i++)
		u += !*s->frames[i].build_id;
	return u;
}

/* Frames from the sampler's caller on (sampled mode), as sampled.bpf.c cuts them. */
static unsigned caller_skip(const struct ev_ustack *e, const uint64_t *pcs, unsigned n)
{
	if (!e->caller)
		return 0;
	for (unsigned i = 0; i < SAMPLED_CALLER_SEARCH && i < n; i++)
		if (pcs[i] == e->caller)
			return i;
	return SAMPLED_DEFAULT_SKIP;
}

/* A copied stack of a process that keeps frame pointers ends as its frame-pointer walks
 * do: one runtime frame past the program's outermost frame below the runtime's start
 * code (main's caller in libc; the walk cannot go further through objects without frame
 * pointers). Without it the
 * copies taken while the process was undecided (its first allocations: fopen, stdio
 * buffers) root at _start and the later frame-pointer stacks at __libc_start_call_main,
 * so one program shows two mains in a flame graph. Returns the frames kept. */
static unsigned fp_shape(struct binary *const *fb, unsigned n)
{
	if (n < 3)
		return n;
	unsigned j = n - 2;   /* the root (_start) may be the program's own: skipped */
	while (j > 0 && fb[j] && fp_exempt_path(fb[j]->path))
		j--;
	if (!fb[j] || fp_exempt_path(fb[j]->path))
		return n;     /* no frame of the program below the runtime's: left whole */
	return j + 2 < n ? j + 2 : n;
}

/* A frame-pointer key's first copy was unwound into f: BPF uses the key from now on if
 * its walk gave the copy's frames (and perhaps more, past where fp_shape ends the copy's
 * stack), or a whole stack where the copy was cut short; else it copies each allocation
 * from that key under the allocation's own key. */
static void check_key(struct recorder *r, uint64_t key, const struct istack *fps,
		      const struct iframe *f, unsigned n, bool truncated)
{
	bool same = !fps->truncated && (truncated || fps->nframes >= n);
	uint8_t v;

	for (unsigned i = 0; same && !truncated && i < n; i++)
		same = fps->frames[i].build_id == f[i].build_id &&
		       fps->frames[i].offset == f[i].offset;
	v = same ? ALLOC_STACK_SENT : ALLOC_STACK_CUT;
	if (r->sent_stacks_fd > 0)
		bpf_map_update_elem(r->sent_stacks_fd, &key, &v, BPF_ANY);
	r->fp_keys_checked[same]++;
}

void ustack_handle(struct recorder *r, const struct ev_ustack *e, size_t len)
{
	uint64_t pcs[ALLOC_MAX_UFRAMES + SAMPLED_CALLER_SEARCH];
	struct iframe f[ALLOC_MAX_UFRAMES];
	struct binary *fb[ALLOC_MAX_UFRAMES];
	unsigned got = 0, n = 0, i, unresolved = 0;
	bool truncated, reloaded = false;
	struct proc *p = proc_get(&r->procs, e->h.tgid, e->h.start_ns);
	size_t have = len - offsetof(struct ev_ustack, data);

	if (!p)
		return;
	if (!p->fp_checked)
		ustack_decide(r, p);
	/* A copy sent with a frame-pointer stack (an undecided process's, or a key's first
	 * sight): its DWARF stack replaces that stack, so that a context is the same
	 * whichever way, and whenever, the process was walked. */
	struct istack *fps = hmap_find(&p->stacks, stack_slot(e->key), NULL, NULL);
	if (e->len < have)
		have = e->len;
	procmaps_load(p);   /* libdwfl's modules once the process is gone */
	unwind_stack(&p->uw, p->pid, &p->maps, p->maps_proc, e, have, pcs, e->caller ? ALLOC_MAX_UFRAMES + SAMPLED_CALLER_SEARCH
							      : ALLOC_MAX_UFRAMES, &got, &truncated);
	const struct map_entry *m = NULL;
	struct binary *b = NULL;
	for (i = caller_skip(e, pcs, got); i < got && n < ALLOC_MAX_UFRAMES; i++) {
		/* Callers are mostly in the same object: its mapping is asked first. */
		if (!m || pcs[i] < m->start || pcs[i] >= m->end) {
			m = exec_map(p, pcs[i], &reloaded);
			b = m ? ustack_map_binary(r, p, m) : NULL;
		}
		if (!m) {
			truncated = true;   /* never a frame outside the executable mappings */
			break;
		}
		f[n].build_id = b ? b->build_id : "";
		f[n].offset = b ? map_entry_file_offset(m, pcs[i]) : pcs[i];
		fb[n] = b;
		unresolved += !b;
		n++;
	}
	if (p->fp_shape > 0 && !truncated)
		n = fp_shape(fb, n);
	enum unwind_stop stop = unwind_stop(p->uw);
	if (i < got) {
		truncated = true;
		if (!m)
			stop = UNWIND_STOP_CFI;
	}
	note_top(r, p, truncated);
	note_deep(r, p, e, stop);
	if (fps && !(e->key & ALLOC_USTACK_KEY))
		check_key(r, e->key, fps, f, n, truncated);
	if (fps && p->fp_mode && (!n || (truncated && !fps->truncated)))
		return;   /* cut short: the frame-pointer walk's whole stack is better */
	if (fps && !n) {
		/* Nothing unwound: the walk's frames stand, but a process without frame
		 * pointers was walked through code that does not keep them: cut. */
		if (fps->truncated)
			return;
		memcpy(f, fps->frames, fps->nframes * sizeof(f[0]));
		n = fps->nframes;
		truncated = true;
		unresolved = 0;
		for (i = 0; i < n; i++)
			unresolved += !*f[i].build_id;
	}
	/* Not one frame (the process's maps gone with it, its first IP in none of them): no
	 * context. The key's objects go to the lost-stack context, counted there as a copy
	 * lost (alloc_exact.c add_object), not to a frameless "truncated" context that looks
	 * like a stack of its own. */
	if (!n)
		return;
	struct istack *s = intern_stack_cut(&r->in, f, n, truncated);
	struct istack *old = hmap_find(&p->stacks, stack_slot(e->key), NULL, NULL);
	if (!s)
		return;
	if (old) {   /* the frame-pointer walk's context of an undecided process: replaced */
		r->unresolved_frames -= stack_unresolved(old);
		hmap_remove(&p->stacks, stack_slot(e->key), old);
	}
	if (hmap_insert(&p->stacks, stack_slot(e->key), s))
		return;
	r->unresolved_frames += unresolved;
	r->ustacks++;
	if (truncated) {
		r->ustacks_truncated++;
		r->ustack_stops[stop == UNWIND_STOP_ROOT ? UNWIND_STOP_CFI : stop]++;
	}
}

void ustack_key_done(struct proc *p, uint64_t key)
{
	struct istack *s;

	if (!(key & ALLOC_USTACK_KEY) || !(s = hmap_find(&p->stacks, stack_slot(key), NULL, NULL)))
		return;
	hmap_remove(&p->stacks, stack_slot(key), s);
}
