/* The one resolution of `--binary PATH|BUILDID` that query and export share: the
 * argument becomes exactly one (build-id, path) the store has, or one error line. A path
 * to a file on disk is matched by the file's build-id, so a rebuilt binary never reads
 * the old build's profile; a path that is gone, or a build-id, is matched as given. */
#pragma once
#include <stddef.h>
#include "store/store.h"

#define BINSEL_MAX_IDS_LISTED 8   /* build-ids named in an error about one path */

struct binsel {
	char *build_id, *path;    /* owned; build_id is the store's key for the binary */
	uint64_t contexts;
};

/* 0 and *out filled; -ENOENT (not in the store, or not this build: err says which and
 * lists the store's build-ids for that path), -EINVAL (several builds match a path that
 * is gone: err lists them), -ENOMEM or a store error, with err (errsz) saying why in one
 * line without the "memprofd: what: " prefix. */
int binsel_resolve(struct store *s, const char *arg, const char *db, struct binsel *out,
		   char *err, size_t errsz);
void binsel_free(struct binsel *b);
