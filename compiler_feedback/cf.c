/* Context loading and MemProf frame expansion shared by the compiler-feedback exports.
 * Copies are deep: every string is owned by the cf_ctxs and freed by cf_free_contexts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_feedback/cf.h"
#include "symbolizer/guid.h"
#include "base/array.h"

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

static int load_cb(const struct store_ctx_row *r, void *arg)
{
	struct cf_ctxs *c = arg;
	struct cf_ctx *x;
	bool oom = false;

	if (r->mib.alloc_count == 0)
		return 0;
	if (ARRAY_GROW(c->v, c->cap, c->n, 64) < 0)
		return -ENOMEM;
	x = &c->v[c->n];
	memset(x, 0, sizeof(*x));
	x->id = r->context_id;
	x->mib = r->mib;
	x->frames = calloc(r->nframes ? r->nframes : 1, sizeof(*x->frames));
	if (!x->frames)
		return -ENOMEM;
	c->n++;
	if (r->hist.len && mib_hist_merge(&x->hist, r->hist.v, r->hist.len) < 0)
		return -ENOMEM;
	x->nframes = r->nframes;
	for (unsigned i = 0; i < r->nframes; i++) {
		const struct store_frame *sf = &r->frames[i];
		struct cf_frame *f = &x->frames[i];

		f->build_id = dup_or_null(sf->build_id ? sf->build_id : "", &oom);
		f->offset = sf->offset;
		f->function = dup_or_null(sf->function, &oom);
		f->mangled = dup_or_null(sf->mangled, &oom);
		if (sf->nlines && sf->lines) {
			f->lines = calloc(sf->nlines, sizeof(*f->lines));
			if (!f->lines)
				return -ENOMEM;
			f->nlines = sf->nlines;
			for (unsigned j = 0; j < sf->nlines; j++) {
				const struct store_line *sl = &sf->lines[j];

				f->lines[j] = (struct cf_line){
					/* One name per function in every output. */
					.function = dup_or_null(export_line_function(sf, j),
								&oom),
					.mangled = dup_or_null(sl->mangled, &oom),
					.file = dup_or_null(sl->file, &oom),
					.line = sl->line, .column = sl->column,
					.decl_line = sl->decl_line, .inlined = sl->inlined,
				};
			}
		}
	}
	return oom ? -ENOMEM : 0;
}

int cf_load_contexts(struct store *s, const struct export_opts *o, struct cf_ctxs *out)
{
	struct store_ctx_filter f = { .binary = o->binary, .sort = STORE_SORT_BYTES, .hist = true };
	int r;

	memset(out, 0, sizeof(*out));
	r = classify_evidence_load(s, &out->ev);
	if (!r)
		r = store_query_contexts(s, &f, load_cb, out);
	if (r < 0) {
		cf_free_contexts(out);
		return r;
	}
	for (size_t i = 0; i < out->n; i++)
		out->v[i].cls = classify_mib(&out->v[i].mib, &out->ev);
	return 0;
}

void cf_free_contexts(struct cf_ctxs *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cf_ctx *x = &c->v[i];

		for (unsigned k = 0; k < x->nframes; k++) {
			struct cf_frame *f = &x->frames[k];

			for (unsigned j = 0; j < f->nlines; j++) {
				free(f->lines[j].function);
				free(f->lines[j].mangled);
				free(f->lines[j].file);
			}
			free(f->lines);
			free(f->build_id);
			free(f->function);
			free(f->mangled);
		}
		free(x->frames);
		mib_hist_free(&x->hist);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

unsigned cf_frame_mpframes(const struct cf_frame *f, struct cf_mpframe *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned j = 0; j < f->nlines && n < max; j++) {
		const struct cf_line *l = &f->lines[j];
		const char *name = l->mangled && *l->mangled ? l->mangled : l->function;

		if (!name)
			continue;
		out[n++] = (struct cf_mpframe){
			.guid = guid_memprof(name),
			.line_offset = l->line >= l->decl_line ? l->line - l->decl_line : 0,
			.column = l->column, .inlined = true, .name = name,
		};
	}
	if (n == 0 && max) {
		const char *name = f->mangled && *f->mangled ? f->mangled : f->function;

		if (!name)
			return 0;
		out[n++] = (struct cf_mpframe){ .guid = guid_memprof(name), .name = name };
	}
	out[n - 1].inlined = false;   /* as llvm-profdata: only the last is not inline */
	return n;
}
