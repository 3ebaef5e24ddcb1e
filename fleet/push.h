/* Pushing one store into the fleet's ClickHouse (fleet/push.c); `memprofd push` and the
 * nightly export call it. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct push_opts {
	const char *db;          /* the store, opened read-only */
	const char *url;         /* ClickHouse HTTP endpoint */
	const char *host;        /* this host's name in the fleet */
};

struct push_stats {
	uint64_t runs_sent, runs_skipped;   /* changed runs sent; runs already in the ledger */
	uint64_t rows;                      /* rows sent, all tables */
	double seconds;
};

/* 0, or -errno with a one-line reason in err. */
int push_store(const struct push_opts *o, struct push_stats *st, char *err, size_t errsz);
int cmd_push(int argc, char **argv);
