/* `memprofd export folded`: one line per allocation context, "root;...;leaf value",
 * as flamegraph.pl, speedscope and inferno read them. Inline chains expand caller
 * first; the value is the --weight of the context, and contexts worth 0 are left out
 * (they would draw nothing). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "reporter/export.h"
#include "reporter/progress.h"

#define FOLDED_NAME_MAX 512   /* longest frame name written; longer ones are cut */

struct folded_out {
	FILE *out;
	const struct export_opts *o;
	struct progress pr;
};

static int folded_cb(const struct store_ctx_row *r, void *arg)
{
	struct folded_out *fo = arg;
	uint64_t v = export_weight_value(&r->mib, fo->o->weight);
	bool first = true;

	progress_step(&fo->pr);
	if (!v)
		return 0;
	for (unsigned i = r->nframes; i-- > 0;) {
		struct export_line lines[EXPORT_MAX_INLINE];
		unsigned n = export_frame_lines(&r->frames[i], lines, EXPORT_MAX_INLINE);
		char name[FOLDED_NAME_MAX];

		/* Caller first: the last line is the real function, earlier ones inlined. */
		for (unsigned k = n ? n : 1; k-- > 0;) {
			export_frame_name(name, sizeof(name), &r->frames[i], n ? &lines[k] : NULL);
			for (char *p = name; (p = strchr(p, ';'));)
				*p = '?';   /* the frame separator */
			if (!first)
				fputc(';', fo->out);
			fputs(name, fo->out);
			first = false;
		}
	}
	if (first)
		fputs("[no frames]", fo->out);
	fprintf(fo->out, " %" PRIu64 "\n", v);
	return ferror(fo->out) ? -EIO : 0;
}

int export_folded(FILE *out, struct store *s, const struct export_opts *o)
{
	struct store_ctx_filter f = { .binary = o->binary, .sort = STORE_SORT_BYTES };
	struct folded_out fo = { .out = out, .o = o };
	int r;

	progress_start(&fo.pr, "export folded", o->contexts, EXPORT_PROGRESS_MIN_CONTEXTS,
		       o->progress);
	r = store_query_contexts(s, &f, folded_cb, &fo);
	progress_end(&fo.pr);
	return r;
}
