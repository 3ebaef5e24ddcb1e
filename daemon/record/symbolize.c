/* Symbolizing stored contexts outside the flush's commit: a flush stores a new stack's
 * frames bare (build-id, offset) and queues it; recorder_symbolize then finds names, file:line
 * and inline chains (a first look into an object's DWARF can take a second) and writes
 * them in a transaction of their own. So a kill loses at most one flush interval of rows,
 * only names, which the next writer of the same stack fills in. Cost: one ELF and DWARF
 * lookup per (object, return address) per run (intern_sym caches what was found), none
 * for a chain an earlier run found (namecache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/array.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/record/recorder.h"
#include "daemon/record/namecache.h"
#include "daemon/record/sym_warm.h"
#include "store/store.h"
#include "symbolizer/symcache.h"

#define SYM_QUEUE_MIN 64     /* first capacity of the queue of bare stacks */

/* n lines into the arena (interned strings) as frame i's. */
static void keep_lines(struct recorder *r, struct istack *s, unsigned i,
		       const struct store_line *from, unsigned n)
{
	struct store_line *v = n ? arena_alloc(&r->in.arena, n * sizeof(*v)) : NULL;

	if (!v)
		return;
	for (unsigned j = 0; j < n; j++) {
		const struct store_line *f = &from[j];
		v[j] = (struct store_line){
			.function = f->function ? intern_str(&r->in, f->function) : NULL,
			.mangled = f->mangled ? intern_str(&r->in, f->mangled) : NULL,
			.file = f->file ? intern_str(&r->in, f->file) : NULL,
			.line = f->line, .column = f->column, .decl_line = f->decl_line,
			.inlined = f->inlined,
		};
	}
	s->lines[i] = v;
	s->nlines[i] = n;
}

/* Frame i's names from the name cache of earlier runs (namecache.h): true if found. */
static bool names_cached(struct recorder *r, struct istack *s, unsigned i)
{
	const char *id = s->frames[i].build_id;
	uint64_t pc = s->frames[i].offset ? s->frames[i].offset - 1 : 0;
	struct nc_names nm;

	if (!r->names || !r->symcache || !bin_open_path(&r->procs, id) ||
	    namecache_get(r->names, id, pc, &nm) != 1)
		return false;
	s->function[i] = nm.function ? intern_str(&r->in, nm.function) : NULL;
	s->mangled[i] = nm.mangled ? intern_str(&r->in, nm.mangled) : NULL;
	keep_lines(r, s, i, nm.v, nm.n);
	return true;
}

/* DWARF inline chain of one return address, copied into the arena; kept in the name
 * cache with the frame's ELF names when DWARF answered. */
static void frame_lines(struct recorder *r, struct istack *s, unsigned i)
{
	const char *path = bin_open_path(&r->procs, s->frames[i].build_id);
	const char *id = s->frames[i].build_id;
	struct dwsym_frames df = { 0 };
	struct store_line from[STORE_MAX_LINES];
	/* Frames are return addresses: the call is the byte before. */
	uint64_t pc = s->frames[i].offset ? s->frames[i].offset - 1 : 0;
	unsigned n;

	if (!r->symcache || !path)
		return;
	if (r->sym_warm) {   /* record's thread opening libc's DWARF ahead of time */
		sym_warm_join(r->sym_warm);
		r->sym_warm = NULL;
	}
	int err = symcache_code(r->symcache, id, path, NULL, pc, &df);
	/* Only DWARF's answers are kept: an ELF name alone may gain lines once a debug
	 * package is installed; DWARF's "nothing here" (ld.so's entry) is as fixed as a chain. */
	bool keep = symcache_code_dwarf(r->symcache, id);
	struct nc_names nm = { .function = s->function[i], .mangled = s->mangled[i] };
	if (err < 0) {
		if (err == -ENOENT && keep)
			namecache_put(r->names, id, pc, &nm);
		return;
	}
	n = df.n < STORE_MAX_LINES ? df.n : STORE_MAX_LINES;
	for (unsigned j = 0; j < n; j++)
		from[j] = (struct store_line){
			.function = df.v[j].function, .mangled = df.v[j].mangled, .file = df.v[j].file,
			.line = df.v[j].line, .column = df.v[j].column,
			.decl_line = df.v[j].decl_line, .inlined = df.v[j].inlined,
		};
	keep_lines(r, s, i, from, n);
	dwsym_frames_free(&df);
	nm.v = s->lines[i];   /* the arena's copy: it lives until the cache is saved */
	nm.n = s->nlines[i];
	if (keep && nm.n == n)
		namecache_put(r->names, id, pc, &nm);
}

/* Names and lines of s's frames from the first, NULL where none is found, until deadline
 * (ns, monotonic; 0: none) after at least one: returns the frame to resume at (nframes:
 * done, s->symbolized set). */
static unsigned symbolize(struct recorder *r, struct istack *s, unsigned first, int64_t deadline)
{
	unsigned i;

	for (i = first; i < s->nframes; i++) {
		if (i > first && deadline && (int64_t)mono_ns() >= deadline)
			return i;
		if (s->function[i] || !*s->frames[i].build_id)
			continue;
		stash_tick(&r->stash);   /* a first look into an object can take long */
		const struct isym *m = intern_sym_find(&r->in, &s->frames[i]);
		if (m) {   /* found for another context already */
			s->function[i] = m->function;
			s->mangled[i] = m->mangled;
			s->lines[i] = m->lines;
			s->nlines[i] = m->nlines;
			continue;
		}
		if (!names_cached(r, s, i)) {
			bin_function(&r->procs, s->frames[i].build_id, s->frames[i].offset,
				     &s->function[i], &s->mangled[i]);
			frame_lines(r, s, i);
		}
		/* No ELF symbol covers it (a stripped .symtab): name it from DWARF. */
		if (!s->function[i] && s->nlines[i]) {
			s->function[i] = s->lines[i][s->nlines[i] - 1].function;
			s->mangled[i] = s->lines[i][s->nlines[i] - 1].mangled;
		}
		/* Found ones only: a file not readable yet may be at the next context. */
		if (s->function[i] || s->nlines[i])
			intern_sym_add(&r->in, &s->frames[i], s->function[i], s->mangled[i],
				       s->lines[i], s->nlines[i]);
	}
	s->symbolized = true;
	return i;
}

void recorder_store_frames(struct recorder *r, const struct istack *s, struct store_frame *f)
{
	for (unsigned i = 0; i < s->nframes && i < ALLOC_MAX_UFRAMES; i++)
		f[i] = (struct store_frame){
			.build_id = s->frames[i].build_id, .offset = s->frames[i].offset,
			.function = s->function[i], .mangled = s->mangled[i],
			.lines = s->lines[i], .nlines = s->nlines[i],
			.path = *s->frames[i].build_id ? bin_path(&r->procs, s->frames[i].build_id) : NULL,
		};
}

int recorder_queue_symbols(struct recorder *r, struct istack *s)
{
	if (s->symbolized || s->sym_queued)
		return 0;
	if (ARRAY_GROW(r->unsym, r->unsym_cap, r->nunsym, SYM_QUEUE_MIN) < 0) {
		symbolize(r, s, 0, 0);   /* no room to defer it: named within the flush */
		return 0;
	}
	r->unsym[r->nunsym++] = s;
	s->sym_queued = true;
	return 0;
}

/* The names of the first n queued stacks, in one transaction. */
static int write_symbols(struct recorder *r, size_t n)
{
	struct store_frame f[ALLOC_MAX_UFRAMES];
	int err = store_begin(r->store);

	for (size_t k = 0; !err && k < n; k++) {
		const struct istack *s = r->unsym[k];

		recorder_store_frames(r, s, f);
		for (unsigned i = 0; !err && i < s->nframes && i < ALLOC_MAX_UFRAMES; i++)
			if (f[i].function || f[i].nlines)
				err = store_put_frame_symbols(r->store, &f[i]);
	}
	if (!err)
		err = store_commit(r->store);
	if (err)
		store_rollback(r->store);
	return err;
}

int recorder_symbolize(struct recorder *r, int64_t budget_ms)
{
	int64_t deadline = budget_ms < 0 ? 0 : (int64_t)mono_ns() + budget_ms * 1000000LL;
	size_t n = 0;
	int err;

	/* At least one frame per call, each stack resumed where the last call stopped: one
	 * slow object delays the loop by its own lookup only. */
	while (n < r->nunsym) {
		struct istack *s = r->unsym[n];

		if (!s->symbolized)
			r->unsym_at = symbolize(r, s, r->unsym_at, deadline);
		if (!s->symbolized)
			break;
		r->unsym_at = 0;
		n++;
		if (deadline && (int64_t)mono_ns() >= deadline)
			break;
	}
	if (!n)
		return 0;
	if ((err = write_symbols(r, n))) {
		if (!r->sym_error_logged)
			log_warn("flush: writing symbols: %s (will retry)", store_errmsg(r->store));
		r->sym_error_logged = true;
		return err;
	}
	r->sym_error_logged = false;
	for (size_t k = 0; k < n; k++)
		r->unsym[k]->sym_queued = false;
	memmove(r->unsym, r->unsym + n, (r->nunsym - n) * sizeof(*r->unsym));
	r->nunsym -= n;
	return 0;
}

void recorder_symbols_free(struct recorder *r)
{
	free(r->unsym);
	r->unsym = NULL;
	r->nunsym = r->unsym_cap = 0;
}
