/* --binary resolution (see binsel.h). Reads the store's binaries list once (one row per
 * executable build), so the cost is one small query plus, for a path, one build-id read
 * of that file (its notes only). The file is the user's own; a file that is not ELF or
 * has no build-id is matched by path alone. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reporter/binsel.h"
#include "symbolizer/elfsym.h"

struct binsel_scan {
	const char *id_want;      /* match this build-id (or a path spelled without '/') */
	const char *path_want;    /* match this path; NULL: none */
	const char *file_id;      /* the file's own build-id; NULL: unknown */
	struct binsel hit;        /* the row chosen */
	unsigned hits;            /* rows matching by id_want or, without file_id, path */
	char ids[BINSEL_MAX_IDS_LISTED * (2 * ELFSYM_BUILD_ID_MAX + 2) + 8];
	unsigned nids;            /* build-ids the store has for path_want */
	bool oom;
};

static void remember_id(struct binsel_scan *b, const char *id)
{
	size_t len = strlen(b->ids);

	if (b->nids++ == BINSEL_MAX_IDS_LISTED) {
		snprintf(b->ids + len, sizeof(b->ids) - len, ", ...");
		return;
	}
	if (b->nids <= BINSEL_MAX_IDS_LISTED)
		snprintf(b->ids + len, sizeof(b->ids) - len, "%s%s", len ? ", " : "",
			 *id ? id : "(none)");
}

static void take(struct binsel_scan *b, const struct store_binary_row *r)
{
	if (b->hits++)
		return;   /* the first one (largest) is kept; the caller refuses ambiguity */
	b->hit.build_id = strdup(r->build_id ? r->build_id : "");
	b->hit.path = strdup(r->path ? r->path : "");
	b->hit.contexts = r->contexts;
	b->oom = !b->hit.build_id || !b->hit.path;
}

static int scan_cb(const struct store_binary_row *r, void *arg)
{
	struct binsel_scan *b = arg;
	const char *id = r->build_id ? r->build_id : "";
	bool same_path = b->path_want && r->path && !strcmp(r->path, b->path_want);

	if (same_path)
		remember_id(b, id);
	if (b->file_id) {
		/* The file on disk decides: its build, under any path it was run from. */
		if (*id && !strcmp(id, b->file_id) && (same_path || !b->hits))
			take(b, r);
		return 0;
	}
	if ((b->id_want && ((*id && !strcmp(id, b->id_want)) ||
			    (r->path && !strcmp(r->path, b->id_want)))) || same_path)
		take(b, r);
	return 0;
}

void binsel_free(struct binsel *b)
{
	free(b->build_id);
	free(b->path);
	b->build_id = b->path = NULL;
}

int binsel_resolve(struct store *s, const char *arg, const char *db, struct binsel *out,
		   char *err, size_t errsz)
{
	char file_id[2 * ELFSYM_BUILD_ID_MAX + 1];
	char *real = strchr(arg, '/') ? realpath(arg, NULL) : NULL;
	struct binsel_scan b = { .id_want = strchr(arg, '/') ? NULL : arg,
				 .path_want = real ? real : strchr(arg, '/') ? arg : NULL };
	int r;

	memset(out, 0, sizeof(*out));
	if (real && elf_build_id_of(real, file_id, sizeof(file_id)) == 0)
		b.file_id = file_id;
	r = store_query_binaries(s, scan_cb, &b);
	if (r < 0 || b.oom) {
		snprintf(err, errsz, "%s", b.oom ? "out of memory" : store_errmsg(s));
		r = b.oom ? -ENOMEM : r;
	} else if (!b.hits && b.file_id && b.nids) {
		snprintf(err, errsz, "%s has build-id %s, but %s has only build-id%s %s for %s "
			 "(rebuilt since it was profiled?)", arg, file_id, db,
			 b.nids > 1 ? "s" : "", b.ids, b.path_want);
		r = -ENOENT;
	} else if (!b.hits) {
		snprintf(err, errsz, "%s%s%s is not in %s (see memprofd query binaries)", arg,
			 b.file_id ? ", build-id " : "", b.file_id ? file_id : "", db);
		r = -ENOENT;
	} else if (b.hits > 1 && !b.file_id) {
		snprintf(err, errsz, "%s names %u builds in %s (build-ids %s); pass one build-id",
			 arg, b.hits, db, b.nids ? b.ids : "listed by memprofd query binaries");
		r = -EINVAL;
	} else {
		*out = b.hit;
		free(real);
		return 0;
	}
	binsel_free(&b.hit);
	free(real);
	return r;
}
