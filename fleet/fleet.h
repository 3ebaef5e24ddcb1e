/* The fleet's ClickHouse schema as memprofd sees it (deploy/clickhouse/schema.sql):
 * its version, the names every statement uses, and what push and the readers share.
 * A cluster whose schema is newer than FLEET_SCHEMA_VERSION is refused, never written. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "fleet/ch.h"

#define FLEET_SCHEMA_VERSION 7   /* 2: runs.alloc_mode, access_classes; 3: contexts.truncated;
                                    4: mib.has_density and the density extremes;
                                    5: mib.watch_hits, watch_ns (issue 15);
                                    6: mib.access_est_err (issue 17);
                                    7: mib.total_access_bytes (issue 17) */
#define FLEET_DB "memprofd"            /* the database schema.sql creates */
#define FLEET_BATCH_ROWS 50000         /* rows per INSERT request */
#define FLEET_BATCH_BYTES (16u << 20)  /* or this much TSV, whichever comes first */
#define FLEET_HOST_MAX 255             /* bytes of a host name */

/* Reads the cluster's schema version: 0, or -ENOENT (no memprofd schema) /
 * -EPROTONOSUPPORT (newer than this memprofd) / a ch_exec() error, with err set. */
int fleet_check_schema(struct ch *c, char *err, size_t errsz);

/* A binary's key across hosts: its build-id, or "path:" and its path without one. */
void fleet_bin_key(char *buf, size_t n, const char *build_id, const char *path);

/* 64-bit FNV-1a, continued from h (start with FLEET_FNV_SEED). */
#define FLEET_FNV_SEED 0xcbf29ce484222325ull
uint64_t fleet_fnv(uint64_t h, const void *p, size_t n);
