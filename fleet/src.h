/* The fleet's ClickHouse as a read-only store (store_open_rows()): `query contexts|data|
 * binaries --from URL` and `export FORMAT --from URL` read the aggregate of every pushed
 * host through the store's own reader calls, so each writer (JSON, memprof-raw, pprof,
 * ...) gets the rows that `memprofd merge` of the same stores would give it: the same
 * MemInfoBlock combination, and the merged store's ids (hosts in the order of their
 * first push, as merge's inputs; within a host, the store's own id order). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "fleet/ch.h"
#include "store/store.h"

struct fleet_src_opts {
	const char *url;         /* ClickHouse HTTP endpoint */
	const char *host_glob;   /* only hosts matching this shell glob; NULL: all */
	int64_t since_ns, until_ns; /* MIB rows' buckets / data rows' runs from..before; 0 open */
};

int fleet_open_store(struct store **out, const struct fleet_src_opts *o, char *err, size_t errsz);

/* ---- internal to fleet/ (src.c, src_contexts.c) ---- */
#define FLEET_IN_BATCH 2000        /* keys per IN (...) list */

struct fleet_bin {
	char *key, *build_id, *path;  /* path: the first pushed host's, as merge keeps it */
	int64_t id;                   /* the merged store's binary id */
	uint64_t processes;           /* processes whose executable it is */
};

struct fleet_fcache;

struct fleet_src {
	struct ch *ch;
	int64_t since_ns, until_ns;
	char *rank;              /* SQL: a host's rank, its place in first-push order */
	char *dims;              /* SQL condition: dimension rows of each host's latest push */
	char *facts;             /* SQL condition: rows of each (host, run)'s latest push */
	struct fleet_bin *bins;  /* every binary, sorted by key */
	size_t nbins;
	struct fleet_fcache *fc; /* frames read so far (src_contexts.c) */
};

const struct fleet_bin *fleet_bin_find(const struct fleet_src *x, const char *key);
/* Appends "('k1','k2',...)": the keys of binaries whose build-id or path is `binary`
 * (as the store matches --binary); false when none is. */
bool fleet_bin_keys(const struct fleet_src *x, const char *binary, struct tsv_buf *out);
/* Appends the MIB row filter: the facts condition, alloc_count > 0, the buckets. */
void fleet_rows_where(const struct fleet_src *x, const struct store_ctx_filter *f,
		      struct tsv_buf *out);
int fleet_src_contexts(void *ctx, struct store *s, const struct store_ctx_filter *f,
		       store_ctx_cb cb, void *arg);
int fleet_src_buckets(void *ctx, struct store *s, const struct store_ctx_filter *f,
		      store_bucket_cb cb, void *arg);
/* fleet/src_runs.c: the evidence rule's inputs (store_query_runs, _access_classes). */
int fleet_src_runs(void *ctx, struct store *s, store_run_cb cb, void *arg);
int fleet_src_access_classes(void *ctx, struct store *s, int64_t run_id,
			     store_access_class_cb cb, void *arg);
void fleet_fcache_free(struct fleet_fcache *fc);
