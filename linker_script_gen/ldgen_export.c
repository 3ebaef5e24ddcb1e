/* `memprofd export ld-script|symbol-order|section-prefixes`: one binary's data-access rows
 * from the store (read-only) plus the binary's own data symbols (datasym: the never
 * sampled ones are the cold candidates), classified by ldgen_classify(). Warnings go to
 * stderr and into the header; the export itself never fails for want of the binary. */
#include "linker_script_gen/ldgen_export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "linker_script_gen/ldgen.h"
#include "linker_script_gen/ldgen_dsec.h"
#include "symbolizer/datasym.h"
#include "symbolizer/elfsym.h"
#include "base/log.h"

#define LDGEN_NOTES_MAX 65536   /* header notes beyond this are cut */

struct load_ctx {
	struct ldgen_set *set;
	int err;
};

static int row_cb(const struct store_data_row *r, void *arg)
{
	struct load_ctx *c = arg;

	if (!r->symbol || !*r->symbol)
		return 0;
	c->err = ldgen_add(c->set, r->symbol, r->section, r->address, r->size,
			   r->access_samples, r->est_accesses, true);
	return c->err ? 1 : 0;
}

static void note(char *notes, const char *fmt, const char *a, const char *b)
{
	size_t len = strlen(notes);

	if (len + 2 < LDGEN_NOTES_MAX)
		snprintf(notes + len, LDGEN_NOTES_MAX - len, fmt, a, b);
}

static int run(FILE *out, struct store *s, const struct export_opts *o, const char *tool,
	       int (*write)(FILE *, const struct ldgen_set *, const struct ldgen_hdr *))
{
	struct ldgen_set set;
	struct load_ctx c = { .set = &set };
	struct store_data_filter f = { .binary = o->binary, .now_ns = o->now_ns };
	struct ldgen_opts lo = { .hot_share = o->hot_share, .cold_min_samples = o->cold_min_samples };
	struct datasym *ds = NULL;
	char *notes = calloc(1, LDGEN_NOTES_MAX);
	int r;

	if (!notes)
		return -ENOMEM;
	ldgen_init(&set);
	r = store_query_data(s, &f, row_cb, &c);
	if (r >= 0 && c.err)
		r = c.err;
	if (r < 0)
		goto out;
	char bid[128] = "";

	/* A binary rebuilt at the recorded path has other symbols: its never-sampled ones
	 * would be wrong cold candidates, and its sampled addresses no longer match. */
	if (o->path && *o->path && o->build_id && *o->build_id &&
	    elf_build_id_of(o->path, bid, sizeof(bid)) >= 0 && strcmp(bid, o->build_id)) {
		note(notes, "warning: %s now has build-id %s, not the recorded one: no cold "
		     "symbols, the layout may be stale\n", o->path, bid);
		log_error("export %s: warning: %s was rebuilt (build-id %s, "
			"recorded %s): cold symbols unknown", tool, o->path, bid, o->build_id);
	} else if (!o->path || !*o->path || (r = datasym_open(&ds, o->path)) < 0) {
		note(notes, "warning: binary %s unreadable (%s): no never-sampled (cold) symbols\n",
		     o->path ? o->path : "(no path)", strerror(r < 0 ? -r : ENOENT));
		log_error("export %s: warning: cannot read %s: cold symbols "
			"unknown", tool, o->path ? o->path : "(no path)");
	} else {
		struct datasym_hit h;

		for (size_t i = 0; datasym_at(ds, i, &h) == 0; i++)
			if (!h.tls && (r = ldgen_add(&set, h.name, h.section, h.start, h.size,
						     0, 0, false)) < 0)
				goto out;
	}
	if ((r = ldgen_classify(&set, &lo)) < 0)
		goto out;
	if (ds)   /* the recorded binary itself: its DWARF says how it was compiled */
		ldgen_dsec_check(o->path, &set, tool, notes, LDGEN_NOTES_MAX);
	for (size_t i = 0; i < set.n; i++)
		if (set.v[i].cls != LDGEN_OTHER && !ldgen_name_ok(set.v[i].name))
			note(notes, "skipped (name unusable in a linker pattern): %s%s\n",
			     set.v[i].name, "");
	struct ldgen_hdr h = { .binary = o->path, .build_id = o->build_id, .tool = tool,
			       .notes = notes };

	r = write(out, &set, &h);
out:
	datasym_close(ds);
	ldgen_free(&set);
	free(notes);
	return r < 0 ? r : 0;
}

int export_ld_script(FILE *out, struct store *s, const struct export_opts *o)
{
	return run(out, s, o, "ld-script", ldgen_write_ld_script);
}

int export_symbol_order(FILE *out, struct store *s, const struct export_opts *o)
{
	return run(out, s, o, "symbol-order", ldgen_write_symbol_order);
}

int export_section_prefixes(FILE *out, struct store *s, const struct export_opts *o)
{
	return run(out, s, o, "section-prefixes", ldgen_write_section_prefixes);
}
