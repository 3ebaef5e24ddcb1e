/* `memprofd export memprof-yaml`: the MemProf YAML of LLVM >= 20 (MemProfYAML.h), which
 * `llvm-profdata merge` indexes with no binary at hand. Records are built as
 * RawMemProfReader::mapRawProfileToRecords builds them from a raw profile: an AllocSite
 * for every function from the leaf up to and including the first non-inline frame, and
 * a CallSite (a frame's whole inline chain) for every function on the stack above the
 * allocation. Only frames of the profiled binary are kept (what the raw reader keeps).
 * CallSites use LLVM 20's form, a list of frame lists. Records are sorted by GUID. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_feedback/cf.h"
#include "compiler_feedback/memprof_raw.h"
#include "base/array.h"

#define YAML_MAX_FRAMES 4096       /* MemProf frames kept per context */

struct mpstack {
	struct cf_mpframe *f;
	unsigned n;
};

struct rec {
	uint64_t guid;
	size_t *allocs, nalloc;        /* context indexes */
	struct mpstack *calls;         /* inline chains, deduplicated */
	size_t ncall;
};

struct recs {
	struct rec *v;
	size_t n, cap;
};

static struct rec *rec_get(struct recs *r, uint64_t guid)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].guid == guid)
			return &r->v[i];
	if (ARRAY_GROW(r->v, r->cap, r->n, 32) < 0)
		return NULL;
	memset(&r->v[r->n], 0, sizeof(r->v[0]));
	r->v[r->n].guid = guid;
	return &r->v[r->n++];
}

static bool same_stack(const struct mpstack *a, const struct mpstack *b)
{
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n; i++)
		if (a->f[i].guid != b->f[i].guid || a->f[i].line_offset != b->f[i].line_offset ||
		    a->f[i].column != b->f[i].column || a->f[i].inlined != b->f[i].inlined)
			return false;
	return true;
}

static int add_call(struct rec *r, const struct mpstack *s)
{
	struct mpstack *v;

	for (size_t i = 0; i < r->ncall; i++)
		if (same_stack(&r->calls[i], s))
			return 0;
	v = realloc(r->calls, (r->ncall + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	r->calls = v;
	r->calls[r->ncall].f = malloc(s->n * sizeof(*s->f));
	if (!r->calls[r->ncall].f)
		return -ENOMEM;
	memcpy(r->calls[r->ncall].f, s->f, s->n * sizeof(*s->f));
	r->calls[r->ncall++].n = s->n;
	return 0;
}

static int add_alloc(struct rec *r, size_t ctx)
{
	size_t *v = realloc(r->allocs, (r->nalloc + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->allocs = v;
	r->allocs[r->nalloc++] = ctx;
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	uint64_t x = ((const struct rec *)a)->guid, y = ((const struct rec *)b)->guid;

	return x < y ? -1 : x > y;
}

static void print_frame(FILE *out, const struct cf_mpframe *f)
{
	fprintf(out, "{ Function: 0x%" PRIx64 ", LineOffset: %" PRIu32 ", Column: %" PRIu32
		", IsInlineFrame: %s }", f->guid, f->line_offset, f->column,
		f->inlined ? "true" : "false");
}

/* One HeapProfileRecord: its allocation sites (call stack and MIB) and call sites. */
static void print_rec(FILE *out, const struct rec *rc, const struct mpstack *stacks,
		      const struct cf_ctxs *c, uint64_t ts_base)
{
	fprintf(out, "  - GUID: 0x%" PRIx64 "\n    AllocSites:%s\n", rc->guid,
		rc->nalloc ? "" : " []");
	for (size_t a = 0; a < rc->nalloc; a++) {
		const struct mpstack *st = &stacks[rc->allocs[a]];
		uint64_t v[MEMPROF_MIB_NFIELDS];

		fprintf(out, "      - Callstack:\n");
		for (unsigned k = 0; k < st->n; k++) {
			fprintf(out, "          - ");
			print_frame(out, &st->f[k]);
			fprintf(out, "  # %s\n", st->f[k].name);
		}
		fprintf(out, "        MemInfoBlock:\n");
		memprof_mib_fields(&c->v[rc->allocs[a]].mib,
				   c->v[rc->allocs[a]].cls == CLASSIFY_UNKNOWN,
				   ts_base == UINT64_MAX ? 0 : ts_base, v);
		for (int f = 0; f < MEMPROF_MIB_NFIELDS; f++)
			fprintf(out, "          %s: %" PRIu64 "\n",
				memprof_mib_fields_def[f].name, v[f]);
	}
	fprintf(out, "    CallSites:%s\n", rc->ncall ? "" : " []");
	for (size_t k = 0; k < rc->ncall; k++) {
		for (unsigned j = 0; j < rc->calls[k].n; j++) {
			fputs(j ? "        - " : "      - - ", out);
			print_frame(out, &rc->calls[k].f[j]);
			fputc('\n', out);
		}
	}
}

int export_memprof_yaml(FILE *out, struct store *s, const struct export_opts *o)
{
	struct cf_ctxs c;
	struct recs recs = { 0 };
	struct mpstack *stacks = NULL;
	uint64_t ts_base = UINT64_MAX;
	int r = cf_load_contexts(s, o, &c);

	if (r < 0)
		return r;
	stacks = calloc(c.n ? c.n : 1, sizeof(*stacks));
	if (!stacks) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n && r == 0; i++) {
		const struct cf_ctx *x = &c.v[i];
		struct mpstack *st = &stacks[i];

		if (x->mib.alloc_ts_ns && x->mib.alloc_ts_ns < ts_base)
			ts_base = x->mib.alloc_ts_ns;
		st->f = malloc(YAML_MAX_FRAMES * sizeof(*st->f));
		if (!st->f) {
			r = -ENOMEM;
			break;
		}
		for (unsigned k = 0; k < x->nframes && st->n < YAML_MAX_FRAMES; k++) {
			const struct cf_frame *f = &x->frames[k];
			struct mpstack chain;

			if (!f->build_id || !o->build_id || strcmp(f->build_id, o->build_id))
				continue;
			chain.f = st->f + st->n;
			chain.n = cf_frame_mpframes(f, chain.f, YAML_MAX_FRAMES - st->n);
			if (!chain.n)
				continue;
			/* Every function of this chain above the allocation gets the chain. */
			for (unsigned j = st->n ? 0 : 1; j < chain.n && r == 0; j++) {
				struct rec *rc = rec_get(&recs, chain.f[j].guid);

				r = rc ? add_call(rc, &chain) : -ENOMEM;
			}
			st->n += chain.n;
		}
		for (unsigned j = 0; j < st->n && r == 0; j++) {
			struct rec *rc = rec_get(&recs, st->f[j].guid);

			r = rc ? add_alloc(rc, i) : -ENOMEM;
			if (!st->f[j].inlined)
				break;
		}
	}
	if (r < 0)
		goto out;
	if (recs.n)
		qsort(recs.v, recs.n, sizeof(recs.v[0]), cmp_rec);

	fprintf(out, "# memprofd memprof-yaml: MemProf YAML (LLVM >= 20, MemProfYAML.h)\n"
		"# build-id: %s\n# binary: %s\n# index with: llvm-profdata merge FILE -o "
		"out.memprofdata\n---\nHeapProfileRecords:\n", o->build_id ? o->build_id : "",
		o->path ? o->path : "");
	for (size_t i = 0; i < recs.n; i++)
		print_rec(out, &recs.v[i], stacks, &c, ts_base);
	fputs("...\n", out);
	r = ferror(out) ? -EIO : 0;
out:
	for (size_t i = 0; i < recs.n; i++) {
		for (size_t k = 0; k < recs.v[i].ncall; k++)
			free(recs.v[i].calls[k].f);
		free(recs.v[i].calls);
		free(recs.v[i].allocs);
	}
	free(recs.v);
	if (stacks)
		for (size_t i = 0; i < c.n; i++)
			free(stacks[i].f);
	free(stacks);
	cf_free_contexts(&c);
	return r;
}
