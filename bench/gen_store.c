/* Generates a memprofd store of a chosen size through the store's own writer
 * (store_put_mib), for bench/query_bench and the export integration tests: N contexts
 * of 3..12 frames drawn from a pool of functions, spread over a few binaries, and M MIB
 * rows (context x process x time bucket). Deterministic for a given --seed.
 * usage: gen_store --db PATH [--contexts N] [--rows M] [--binaries B] [--seed S] */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define GEN_BATCH 200000          /* MIB rows per transaction */
#define GEN_FUNCS 20000           /* distinct function names per binary */
#define GEN_BUCKET_NS 10000000000ll
#define GEN_BUCKETS 64
#define GEN_T0 1700000000000000000ll

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' }, { "contexts", required_argument, NULL, 'c' },
		{ "rows", required_argument, NULL, 'r' }, { "binaries", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' }, { 0 },
	};
	const char *db = NULL;
	uint64_t nctx = 1000, nrows = 10000, nbin = 4;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db = optarg; break;
		case 'c': nctx = strtoull(optarg, NULL, 10); break;
		case 'r': nrows = strtoull(optarg, NULL, 10); break;
		case 'b': nbin = strtoull(optarg, NULL, 10); break;
		case 's': rng = strtoull(optarg, NULL, 10) * 2654435761u + 1; break;
		default:
			fprintf(stderr, "usage: gen_store --db PATH [--contexts N] [--rows M] "
				"[--binaries B] [--seed S]\n");
			return 2;
		}
	}
	if (!db || !nctx || !nbin || nrows < nctx) {
		fprintf(stderr, "gen_store: --db is required and --rows must be >= --contexts\n");
		return 2;
	}

	struct store *s;
	char err[512];

	if (store_open(&s, db, STORE_RDWR, err, sizeof(err)) < 0) {
		fprintf(stderr, "gen_store: %s: %s\n", db, err);
		return 1;
	}

	char exe[64], bid[64], names[12][48];
	struct store_frame fr[12];
	uint64_t row = 0;
	int r = store_begin(s);

	/* Context k gets rows_per (+1 for the first `extra`) rows in distinct buckets/procs. */
	uint64_t per = nrows / nctx, extra = nrows % nctx;

	for (uint64_t k = 0; k < nctx && r == 0; k++) {
		unsigned b = (unsigned)(k % nbin), nf = 3 + (unsigned)(next() % 10);
		uint64_t rows = per + (k < extra);

		snprintf(exe, sizeof(exe), "/srv/gen/app%u", b);
		snprintf(bid, sizeof(bid), "9e%014x", b);
		for (unsigned i = 0; i < nf; i++) {
			unsigned fn = i == nf - 1 ? 0 : (unsigned)(next() % GEN_FUNCS);

			if (fn)
				snprintf(names[i], sizeof(names[i]), "fn_%u", fn);
			else
				snprintf(names[i], sizeof(names[i]), "main");
			fr[i] = (struct store_frame){ .build_id = bid, .path = exe,
				.offset = 0x1000 + (uint64_t)fn * 0x40 + (i == 0 ? k % 16 : 0),
				.function = names[i] };
		}
		/* Heavy-tailed sizes so that "top 20" means something. */
		uint64_t size = 16ull << (next() % 16);

		for (uint64_t j = 0; j < rows && r == 0; j++, row++) {
			struct store_proc p = { .pid = 1000 + (int)(j / GEN_BUCKETS) * (int)nbin + (int)b,
						.start_ns = 1 + j / GEN_BUCKETS, .exe = exe,
						.build_id = bid };
			uint64_t cnt = 1 + next() % 100, life = 1000000 + next() % 1000000000;
			struct mib m = { .alloc_count = cnt, .total_size = cnt * size,
					 .min_size = size, .max_size = size,
					 .total_lifetime_ns = cnt * life, .min_lifetime_ns = life,
					 .max_lifetime_ns = life, .alloc_ts_ns = GEN_T0,
					 .dealloc_ts_ns = GEN_T0 + life,
					 .access_samples = next() % 4 ? 0 : next() % 50,
					 .total_access_count = 0 };

			m.total_access_count = m.access_samples * 1000;
			r = store_put_mib(s, &p, k + 1, fr, nf,
					  GEN_T0 + (int64_t)(j % GEN_BUCKETS) * GEN_BUCKET_NS, &m);
			if (r == 0 && (row + 1) % GEN_BATCH == 0) {
				r = store_commit(s);
				if (r == 0)
					r = store_begin(s);
			}
		}
	}
	if (r == 0)
		r = store_commit(s);
	if (r < 0) {
		fprintf(stderr, "gen_store: %s\n", store_errmsg(s));
		store_close(s);
		return 1;
	}
	store_close(s);
	printf("gen_store: %s: %" PRIu64 " contexts, %" PRIu64 " MIB rows, %" PRIu64 " binaries\n",
	       db, nctx, row, nbin);
	return 0;
}
