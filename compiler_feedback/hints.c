/* `memprofd export hints [--format text|json]`: allocation hints per context, trimmed
 * as MemProf's call-stack trie trims them (llvm/lib/Analysis/MemoryProfileInfo.cpp).
 * The format, the classes and hint bytes and the trimming rules are specified in
 * compiler_feedback/hints.md (the one description; tests/integration/check_hints_doc.py
 * holds this file to it). Invariant: the output depends only on the database (lines are
 * sorted by site, then frames text, then class). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_feedback/cf.h"
#include "compiler_feedback/hints.h"
#include "reporter/classify.h"
#include "reporter/format.h"

/* unknown (too little evidence, reporter/classify.h) gets no decision: notcold's byte. */
enum { H_COLD, H_NOTCOLD, H_HOT, H_AMBIGUOUS, H_UNKNOWN };
static const char *const hclass[] = { "cold", "notcold", "hot", "ambiguous", "unknown" };
static const int hbyte[] = { CF_HINT_COLD, CF_HINT_NOTCOLD, CF_HINT_HOT, CF_HINT_AMBIGUOUS,
			     CF_HINT_NOTCOLD };

struct hline {
	const struct cf_ctx *ctx;      /* frames come from this context */
	unsigned depth;                /* frames in the prefix */
	int cls;
	uint64_t bytes, allocs, contexts;
	char *key;                     /* site text, then frames text: the sort key */
};

static int hclass_of(const struct cf_ctx *x)
{
	switch (x->cls) {
	case CLASSIFY_COLD: return H_COLD;
	case CLASSIFY_HOT: return H_HOT;
	case CLASSIFY_UNKNOWN: return H_UNKNOWN;
	default: return H_NOTCOLD;
	}
}

static bool same_frame(const struct cf_frame *a, const struct cf_frame *b)
{
	return a->offset == b->offset && !strcmp(a->build_id ? a->build_id : "",
						 b->build_id ? b->build_id : "");
}

static bool same_prefix(const struct cf_ctx *a, const struct cf_ctx *b, unsigned k)
{
	if (a->nframes < k || b->nframes < k)
		return false;
	for (unsigned i = 0; i < k; i++)
		if (!same_frame(&a->frames[i], &b->frames[i]))
			return false;
	return true;
}

static void frame_text(FILE *m, const struct cf_frame *f)
{
	if (!f->nlines) {
		if (f->function)
			fprintf(m, "%s", f->function);
		else
			fprintf(m, "%s+0x%" PRIx64, f->build_id && *f->build_id ? f->build_id : "?",
				f->offset);
		return;
	}
	for (unsigned j = 0; j < f->nlines; j++) {
		const struct cf_line *l = &f->lines[j];

		fprintf(m, "%s%s %s:%" PRIu32 "%s", j ? " <- " : "", l->function ? l->function : "?",
			l->file ? l->file : "?", l->line, l->inlined ? " [inlined]" : "");
	}
}

static char *prefix_text(const struct cf_ctx *x, unsigned depth)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	for (unsigned i = 0; i < depth; i++) {
		if (i)
			fputs(" <- ", m);
		frame_text(m, &x->frames[i]);
	}
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int cmp_line(const void *a, const void *b)
{
	const struct hline *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : x->cls - y->cls;
}

/* Trims one site's contexts (idx[0..n)) into lines appended to *lv. */
static int trim_site(const struct cf_ctx *v, const size_t *idx, size_t n, struct hline **lv,
		     size_t *nl, size_t *cap)
{
	bool mixed = false;
	int c0 = hclass_of(&v[idx[0]]);

	for (size_t i = 1; i < n; i++)
		mixed |= hclass_of(&v[idx[i]]) != c0;
	for (size_t i = 0; i < n + (mixed ? 1 : 0); i++) {
		const struct cf_ctx *x = &v[idx[i < n ? i : 0]];
		unsigned depth = 1;
		int cls = c0;

		if (i == n) {                 /* the ambiguous site line itself */
			cls = H_AMBIGUOUS;
		} else if (mixed) {
			cls = hclass_of(x);
			for (depth = 2;; depth++) {
				bool agree = true;

				for (size_t j = 0; j < n && agree; j++)
					if (same_prefix(x, &v[idx[j]], depth) &&
					    hclass_of(&v[idx[j]]) != cls)
						agree = false;
				if (agree)
					break;
				if (depth >= x->nframes) {
					cls = H_AMBIGUOUS;
					break;
				}
			}
		}
		/* Merge into an existing line with the same prefix and class. */
		size_t k;

		for (k = 0; k < *nl; k++)
			if ((*lv)[k].cls == cls && (*lv)[k].depth == depth &&
			    same_prefix((*lv)[k].ctx, x, depth))
				break;
		if (k == *nl) {
			if (*nl == *cap) {
				size_t nc = *cap ? 2 * *cap : 64;
				struct hline *p = realloc(*lv, nc * sizeof(*p));

				if (!p)
					return -ENOMEM;
				*lv = p;
				*cap = nc;
			}
			char *site = prefix_text(x, 1), *all = prefix_text(x, depth);
			size_t need = (site ? strlen(site) : 0) + (all ? strlen(all) : 0) + 2;
			char *key = site && all ? malloc(need) : NULL;

			if (key)
				snprintf(key, need, "%s\x01%s", site, all);
			free(site);
			free(all);
			if (!key)
				return -ENOMEM;
			(*lv)[(*nl)++] = (struct hline){ .ctx = x, .depth = depth, .cls = cls,
							 .key = key };
		}
		struct hline *h = &(*lv)[k];

		if (i == n) {
			for (size_t j = 0; j < n; j++) {
				h->bytes += v[idx[j]].mib.total_size;
				h->allocs += v[idx[j]].mib.alloc_count;
				h->contexts++;
			}
		} else {
			h->bytes += x->mib.total_size;
			h->allocs += x->mib.alloc_count;
			h->contexts++;
		}
	}
	return 0;
}

static void print_json_frames(FILE *out, const struct cf_ctx *x, unsigned depth)
{
	bool first = true;

	fputc('[', out);
	for (unsigned i = 0; i < depth; i++) {
		const struct cf_frame *f = &x->frames[i];

		for (unsigned j = 0; j < (f->nlines ? f->nlines : 1); j++) {
			const struct cf_line *l = f->nlines ? &f->lines[j] : NULL;

			fputs(first ? "{" : ", {", out);
			first = false;
			fputs("\"function\": ", out);
			fmt_json_str(out, l ? l->function : f->function);
			fputs(", \"file\": ", out);
			fmt_json_str(out, l ? l->file : NULL);
			fprintf(out, ", \"line\": %" PRIu32 ", \"column\": %" PRIu32
				", \"inlined\": %s, \"offset\": \"0x%" PRIx64 "\"}",
				l ? l->line : 0, l ? l->column : 0, l && l->inlined ? "true" : "false",
				f->offset);
		}
	}
	fputc(']', out);
}

int hints_write(FILE *out, const struct cf_ctxs *c, const struct export_opts *o, bool json)
{
	struct hline *lv = NULL;
	size_t nl = 0, cap = 0, *idx = NULL, nidx;
	bool *done = calloc(c->n ? c->n : 1, 1);
	int r = 0;

	idx = malloc((c->n ? c->n : 1) * sizeof(*idx));
	if (!done || !idx) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->n && r == 0; i++) {
		if (done[i] || !c->v[i].nframes)
			continue;
		nidx = 0;
		for (size_t j = i; j < c->n; j++)
			if (!done[j] && c->v[j].nframes && same_prefix(&c->v[i], &c->v[j], 1)) {
				idx[nidx++] = j;
				done[j] = true;
			}
		r = trim_site(c->v, idx, nidx, &lv, &nl, &cap);
	}
	if (r < 0)
		goto out;
	if (nl)
		qsort(lv, nl, sizeof(*lv), cmp_line);

	if (json) {
		fputs("{\"format\": \"memprofd-hints\", \"version\": 1, \"build_id\": ", out);
		fmt_json_str(out, o->build_id);
		fputs(", \"binary\": ", out);
		fmt_json_str(out, o->path);
		fprintf(out, ", \"thresholds\": {\"cold_density\": %g, \"cold_min_avg_lifetime_s\": "
			"%g, \"hot_density\": %g}, \"hints\": {\"cold\": %d, \"notcold\": %d, "
			"\"hot\": %d, \"ambiguous\": %d, \"unknown\": %d},\n \"contexts\": [",
			CLASSIFY_COLD_DENSITY, CLASSIFY_COLD_MIN_AVG_LIFETIME_NS / 1e9,
			CLASSIFY_HOT_DENSITY, CF_HINT_COLD, CF_HINT_NOTCOLD, CF_HINT_HOT,
			CF_HINT_AMBIGUOUS, hbyte[H_UNKNOWN]);
		for (size_t i = 0; i < nl; i++) {
			fprintf(out, "%s\n  {\"class\": \"%s\", \"hint\": %d, \"bytes\": %" PRIu64
				", \"allocs\": %" PRIu64 ", \"contexts\": %" PRIu64 ", \"frames\": ",
				i ? "," : "", hclass[lv[i].cls], hbyte[lv[i].cls], lv[i].bytes,
				lv[i].allocs, lv[i].contexts);
			print_json_frames(out, lv[i].ctx, lv[i].depth);
			fputc('}', out);
		}
		fputs("\n]}\n", out);
	} else {
		fprintf(out, "# memprofd hints v1\n# build-id: %s\n# binary: %s\n"
			"# thresholds: cold if density < %g accesses/byte/s and average lifetime >= "
			"%g s; hot if density > %g\n# hints: cold=%d notcold=%d hot=%d ambiguous=%d"
			" unknown=%d\n# class\thint\tbytes\tallocs\tframes (leaf first)\n",
			o->build_id ? o->build_id : "", o->path ? o->path : "", CLASSIFY_COLD_DENSITY,
			CLASSIFY_COLD_MIN_AVG_LIFETIME_NS / 1e9, CLASSIFY_HOT_DENSITY, CF_HINT_COLD,
			CF_HINT_NOTCOLD, CF_HINT_HOT, CF_HINT_AMBIGUOUS, hbyte[H_UNKNOWN]);
		for (size_t i = 0; i < nl; i++) {
			char *t = prefix_text(lv[i].ctx, lv[i].depth);

			for (char *p = t; p && *p; p++)
				if (*p == '\t' || *p == '\n')
					*p = ' ';
			fprintf(out, "%s\t%d\t%" PRIu64 "\t%" PRIu64 "\t%s\n", hclass[lv[i].cls],
				hbyte[lv[i].cls], lv[i].bytes, lv[i].allocs, t ? t : "?");
			free(t);
		}
	}
	r = ferror(out) ? -EIO : 0;
out:
	for (size_t i = 0; i < nl; i++)
		free(lv[i].key);
	free(lv);
	free(idx);
	free(done);
	return r;
}

int export_hints(FILE *out, struct store *s, const struct export_opts *o)
{
	struct cf_ctxs c;
	int r = cf_load_contexts(s, o, &c);

	if (r < 0)
		return r;
	r = hints_write(out, &c, o, o->format && !strcmp(o->format, "json"));
	cf_free_contexts(&c);
	return r;
}
