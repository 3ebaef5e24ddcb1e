/* Generates a memprofd store of a chosen size through the store's own writer
 * (store_put_mib, store_put_data), for bench/query_bench.py and the export tests:
 * N contexts of 4..20 frames (leaf first, main last) drawn from a pool of call sites with
 * C and C++ names (long templates included), mangled names and DWARF lines (a quarter of
 * the sites with an inline chain), spread over B binaries with P processes each; M MIB
 * rows (context x process x one-minute bucket), 1% of the contexts long-running with
 * HEAVY_FACTOR times the rows; cold, hot and notcold contexts; static data symbols.
 * Deterministic for a given --seed. Triggers and secondary indexes on mib are dropped
 * during the load and re-created at the end (struct bulk).
 * usage: gen_store --db PATH [--contexts N] [--rows M] [--binaries B] [--procs P]
 *                  [--buckets K] [--seed S] [--first-context F]
 * --first-context F: the contexts are the generator's F..F+N-1 (bench/fleet_bench.py gives
 * each host its own range, overlapping its neighbour's). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sqlite3.h>

#include "store/store.h"

#define GEN_BATCH 500000          /* MIB rows per transaction */
#define GEN_ACCESS_WEIGHT 1000    /* accesses one generated access sample stands for */
#define GEN_SITES 20000           /* call sites (return addresses) per binary */
#define GEN_ALLOC_SITES 2000      /* of which leaves: the sites that call an allocator */
#define GEN_FUNCS 4000            /* functions per binary */
#define GEN_INLINE_FUNCS 300      /* small functions that get inlined */
#define GEN_MIN_FRAMES 4
#define GEN_MAX_FRAMES 20
#define GEN_NAME_MAX 320
#define GEN_BUCKET_NS 60000000000ll   /* the daemon's AGG_BUCKET_SECONDS */
#define GEN_T0 1700000000000000000ll  /* 2023-11-14T22:13:20Z, the first bucket */
#define GEN_HEAVY_EVERY 100       /* every 100th context is long-running... */
#define GEN_HEAVY_FACTOR 20       /* ...with 20x the average rows */
#define GEN_DATA_SYMBOLS 2000     /* static data symbols per binary */
#define GEN_DATA_PERIOD 10000     /* accesses one data sample stands for */
#define GEN_MAX_SCHEMA 16         /* indexes and triggers on mib */

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t mix(uint64_t x)   /* a fixed hash: names do not depend on the seed */
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static const char *const namespaces[] = { "app", "net", "db", "cache", "io", "rpc", "json", "util" };
static const char *const classes[] = { "Shard", "Buffer", "Parser", "Session", "Pool", "Node",
				       "Table", "Request", "Encoder", "Index", "Arena", "Cursor" };
static const char *const methods[] = { "insert", "grow", "parse", "emplace", "reserve", "handle",
				       "clone", "flush", "resize", "append", "decode", "make_entry" };
#define PICK(a, h) a[(h) % (sizeof(a) / sizeof(a[0]))]

struct func {
	char name[GEN_NAME_MAX], mangled[GEN_NAME_MAX], file[64];
	unsigned decl_line;
};

struct site {
	unsigned func, line, column;
	unsigned ninl;           /* inlined functions at this address, 0..2 */
	unsigned inl[2], inl_line[2];
};

struct binary {
	char exe[64], build_id[40], comm[16];
	struct func *funcs;      /* GEN_FUNCS + GEN_INLINE_FUNCS */
	struct site *sites;
};

/* A name of one of four shapes: C, C++ method, C++ template (long), const member. */
static void make_func(struct func *f, unsigned b, unsigned i)
{
	uint64_t h = mix(((uint64_t)b << 32) | i);
	const char *ns = PICK(namespaces, h), *cl = PICK(classes, h >> 8);
	const char *me = PICK(methods, h >> 16);

	switch ((h >> 24) % 4) {
	case 0:
		snprintf(f->name, sizeof(f->name), "%s_%s_%u", ns, me, i);
		snprintf(f->mangled, sizeof(f->mangled), "%s", f->name);
		break;
	case 1:
		snprintf(f->name, sizeof(f->name), "%s::%s::%s_%u(unsigned long)", ns, cl, me, i);
		snprintf(f->mangled, sizeof(f->mangled), "_ZN%zu%s%zu%s%zu%s_%uEm", strlen(ns), ns,
			 strlen(cl), cl, strlen(me) + 1 + (size_t)snprintf(NULL, 0, "%u", i), me, i);
		break;
	case 2:
		snprintf(f->name, sizeof(f->name), "void std::vector<%s::%s%u<std::__cxx11::basic_string<"
			 "char, std::char_traits<char>, std::allocator<char> > >, std::allocator<%s::%s%u> "
			 ">::_M_realloc_insert<%s::%s%u const&>(__gnu_cxx::__normal_iterator<%s::%s%u*>, "
			 "%s::%s%u const&)", ns, cl, i, ns, cl, i, ns, cl, i, ns, cl, i, ns, cl, i);
		snprintf(f->mangled, sizeof(f->mangled), "_ZNSt6vectorIN%zu%s%zu%sEE17_M_realloc_insert"
			 "IJRKS1_EEEvN9__gnu_cxx17__normal_iteratorIPS1_S3_EEDpOT_%u", strlen(ns), ns,
			 strlen(cl), cl, i);
		break;
	default:
		snprintf(f->name, sizeof(f->name), "%s::%s<int>::%s_%u() const", ns, cl, me, i);
		snprintf(f->mangled, sizeof(f->mangled), "_ZNK%zu%s%zu%sIiE%zu%s_%uEv", strlen(ns), ns,
			 strlen(cl), cl, strlen(me) + 1 + (size_t)snprintf(NULL, 0, "%u", i), me, i);
	}
	snprintf(f->file, sizeof(f->file), "src/%s/%s.cc", ns, cl);
	f->decl_line = 10 + (unsigned)(h >> 40) % 4000;
}

static int binary_init(struct binary *bin, unsigned b)
{
	snprintf(bin->exe, sizeof(bin->exe), "/srv/gen/app%u", b);
	snprintf(bin->build_id, sizeof(bin->build_id), "9e%014x", b);
	snprintf(bin->comm, sizeof(bin->comm), "app%u", b);
	bin->funcs = calloc(GEN_FUNCS + GEN_INLINE_FUNCS, sizeof(*bin->funcs));
	bin->sites = calloc(GEN_SITES, sizeof(*bin->sites));
	if (!bin->funcs || !bin->sites)
		return -ENOMEM;
	for (unsigned i = 0; i < GEN_FUNCS + GEN_INLINE_FUNCS; i++)
		make_func(&bin->funcs[i], b, i);
	snprintf(bin->funcs[0].name, GEN_NAME_MAX, "main");
	snprintf(bin->funcs[0].mangled, GEN_NAME_MAX, "main");
	for (unsigned i = 0; i < GEN_SITES; i++) {
		uint64_t h = mix(((uint64_t)b << 40) ^ (0x5173ull << 20) ^ i);
		struct site *s = &bin->sites[i];

		s->func = i == 0 ? 0 : 1 + (unsigned)(h % (GEN_FUNCS - 1));
		s->line = bin->funcs[s->func].decl_line + 1 + (unsigned)(h >> 20) % 80;
		s->column = 3 + (unsigned)(h >> 28) % 40;
		s->ninl = i && (h >> 36) % 4 == 0 ? 1 + (unsigned)(h >> 40) % 2 : 0;   /* not main */
		for (unsigned j = 0; j < s->ninl; j++) {
			s->inl[j] = GEN_FUNCS + (unsigned)(h >> (44 + 8 * j)) % GEN_INLINE_FUNCS;
			s->inl_line[j] = bin->funcs[s->inl[j]].decl_line + 1 + j;
		}
	}
	return 0;
}

/* The frame of site i: its inline chain leaf first, then the function it is in. */
static void site_frame(const struct binary *bin, unsigned i, struct store_frame *fr,
		       struct store_line *lines)
{
	const struct site *s = &bin->sites[i];
	const struct func *f = &bin->funcs[s->func];
	unsigned n = 0;

	for (unsigned j = s->ninl; j-- > 0;) {
		const struct func *g = &bin->funcs[s->inl[j]];

		lines[n++] = (struct store_line){ .function = g->name, .mangled = g->mangled,
			.file = g->file, .line = s->inl_line[j], .column = 5,
			.decl_line = g->decl_line, .inlined = true };
	}
	lines[n++] = (struct store_line){ .function = f->name, .mangled = f->mangled,
		.file = f->file, .line = s->line, .column = s->column, .decl_line = f->decl_line };
	*fr = (struct store_frame){ .build_id = bin->build_id, .path = bin->exe,
		.offset = 0x1000 + (uint64_t)i * 0x18, .function = f->name, .mangled = f->mangled,
		.lines = lines, .nlines = n };
}

/* ---- bulk load ---- */

/* The triggers on mib (ctx_totals upkeep: six random index updates per row) and mib's
 * secondary indexes (1440 insertion points each) cost ~20x the MIB insert itself, so
 * they are dropped while loading and re-created from their own SQL at the end, with
 * ctx_totals rebuilt the way migration 1 -> 2 builds it: the store a writer would have
 * made, in minutes instead of an hour. */
struct bulk {
	sqlite3 *db;
	char *sql[GEN_MAX_SCHEMA];   /* indexes first, then triggers */
	unsigned n;
};

#define GEN_BULK_CACHE_KIB 262144    /* the bulk connection's page cache, for the rebuild */

static int sql_fail(sqlite3 *db, const char *what)
{
	fprintf(stderr, "gen_store: %s: %s\n", what, sqlite3_errmsg(db));
	return -EIO;
}

/* Through a second connection, while the store's is idle. */
static int bulk_begin(struct bulk *bk, const char *path)
{
	sqlite3_stmt *st;
	char pragma[64];
	int rc;

	if (sqlite3_open_v2(path, &bk->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return sql_fail(bk->db, path);
	sqlite3_busy_timeout(bk->db, STORE_BUSY_TIMEOUT_MS);
	snprintf(pragma, sizeof(pragma), "PRAGMA cache_size = -%d", GEN_BULK_CACHE_KIB);
	if (sqlite3_exec(bk->db, pragma, NULL, NULL, NULL) != SQLITE_OK)
		return sql_fail(bk->db, pragma);
	if (sqlite3_prepare_v2(bk->db, "SELECT type, name, sql FROM sqlite_master"
			       " WHERE tbl_name = 'mib' AND type IN ('index', 'trigger')"
			       " AND sql IS NOT NULL ORDER BY type, name", -1, &st, NULL) != SQLITE_OK)
		return sql_fail(bk->db, "reading the schema");
	char drops[GEN_MAX_SCHEMA][160];

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (bk->n == GEN_MAX_SCHEMA) {
			sqlite3_finalize(st);
			fprintf(stderr, "gen_store: more than %d indexes and triggers on mib\n",
				GEN_MAX_SCHEMA);
			return -E2BIG;
		}
		snprintf(drops[bk->n], sizeof(drops[0]), "DROP %s \"%s\"",
			 strcmp((const char *)sqlite3_column_text(st, 0), "index") ? "TRIGGER" : "INDEX",
			 sqlite3_column_text(st, 1));
		bk->sql[bk->n++] = strdup((const char *)sqlite3_column_text(st, 2));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return sql_fail(bk->db, "reading the schema");
	for (unsigned i = 0; i < bk->n; i++)
		if (!bk->sql[i] || sqlite3_exec(bk->db, drops[i], NULL, NULL, NULL) != SQLITE_OK)
			return sql_fail(bk->db, drops[i]);
	return 0;
}

static int bulk_end(struct bulk *bk)
{
	static const char rebuild[] = "BEGIN IMMEDIATE; DELETE FROM ctx_totals;"
		"INSERT INTO ctx_totals(context_id, binary_id, rows, alloc_count, total_size,"
		"  total_lifetime_ns, total_access_count)"
		"  SELECT m.context_id, c.binary_id, count(*), sum(m.alloc_count), sum(m.total_size),"
		"  sum(m.total_lifetime_ns), sum(m.total_access_count)"
		"  FROM mib m JOIN contexts c ON c.id = m.context_id WHERE m.alloc_count > 0"
		"  GROUP BY m.context_id;";

	if (sqlite3_exec(bk->db, rebuild, NULL, NULL, NULL) != SQLITE_OK)
		return sql_fail(bk->db, "rebuilding ctx_totals");
	for (unsigned i = 0; i < bk->n; i++)
		if (sqlite3_exec(bk->db, bk->sql[i], NULL, NULL, NULL) != SQLITE_OK)
			return sql_fail(bk->db, bk->sql[i]);
	if (sqlite3_exec(bk->db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) !=
	    SQLITE_OK)
		return sql_fail(bk->db, "committing");
	return 0;
}

static void bulk_free(struct bulk *bk)
{
	for (unsigned i = 0; i < bk->n; i++)
		free(bk->sql[i]);
	sqlite3_close(bk->db);
}

/* ---- rows ---- */

struct plan {
	uint64_t nctx, nrows, nbin, nproc, nbuckets;
	uint64_t first;   /* --first-context: stack hashes start at first + 1 (fleet hosts) */
	uint64_t heavy_rows, heavy_extra, light_rows, light_extra, nheavy, nlight;
};

static bool is_heavy(uint64_t k) { return k % GEN_HEAVY_EVERY == 0; }

/* Heavy contexts get GEN_HEAVY_FACTOR x the average rows (as far as the total allows),
 * light ones the rest, so that the total is exactly nrows. */
static int plan_rows(struct plan *p)
{
	uint64_t slots = p->nproc * p->nbuckets, per = p->nrows / p->nctx;

	p->nheavy = (p->nctx + GEN_HEAVY_EVERY - 1) / GEN_HEAVY_EVERY;
	p->nlight = p->nctx - p->nheavy;
	p->heavy_rows = per * GEN_HEAVY_FACTOR;
	if (p->heavy_rows > slots)
		p->heavy_rows = slots;
	if (p->nheavy * p->heavy_rows + p->nlight > p->nrows)
		p->heavy_rows = (p->nrows - p->nlight) / p->nheavy;
	if (!p->nlight) {
		p->heavy_rows = p->nrows / p->nheavy;
		p->heavy_extra = p->nrows % p->nheavy;
	} else {
		uint64_t rest = p->nrows - p->nheavy * p->heavy_rows;

		p->light_rows = rest / p->nlight;
		p->light_extra = rest % p->nlight;
	}
	if (p->heavy_rows + (p->heavy_extra > 0) > slots || p->light_rows + (p->light_extra > 0) > slots) {
		fprintf(stderr, "gen_store: %" PRIu64 " rows per context do not fit in %" PRIu64
			" processes x %" PRIu64 " buckets: raise --procs or --buckets\n",
			p->light_rows > p->heavy_rows ? p->light_rows + 1 : p->heavy_rows + 1,
			p->nproc, p->nbuckets);
		return -EINVAL;
	}
	return 0;
}

static uint64_t rows_of(const struct plan *p, uint64_t k)
{
	uint64_t idx = is_heavy(k) ? k / GEN_HEAVY_EVERY : k - k / GEN_HEAVY_EVERY - 1;

	if (is_heavy(k))
		return p->heavy_rows + (idx < p->heavy_extra);
	return p->light_rows + (idx < p->light_extra);
}

enum kind { K_NORMAL, K_COLD, K_HOT };

/* One row's MIB; the kind decides lifetime and accesses, hence the class. */
static void make_mib(struct mib *m, enum kind kind, uint64_t size, bool heavy, int64_t bucket)
{
	uint64_t cnt = heavy ? 100 + next() % 10000 : 1 + next() % 100, life;

	switch (kind) {
	case K_COLD: life = 200000000000ull + next() % 7000000000000ull; break;  /* 200 s..2 h */
	case K_HOT: life = 100000 + next() % 900000; break;                       /* 0.1..1 ms */
	default: life = 1000000 + next() % 10000000000ull;                        /* 1 ms..10 s */
	}
	*m = (struct mib){ .alloc_count = cnt, .total_size = cnt * size, .min_size = size,
		.max_size = size * (1 + next() % 4), .total_lifetime_ns = cnt * life,
		.min_lifetime_ns = life / 2, .max_lifetime_ns = life * 2,
		.alloc_ts_ns = (uint64_t)bucket + next() % GEN_BUCKET_NS,
		.alloc_cpu = (uint32_t)(next() % 16), .dealloc_cpu = (uint32_t)(next() % 16),
		.num_migrated_cpu = next() % 2, .num_lifetime_overlaps = next() % cnt,
		.num_same_alloc_cpu = next() % cnt, .num_same_dealloc_cpu = next() % cnt };
	m->dealloc_ts_ns = m->alloc_ts_ns + life;
	switch (kind) {
	case K_COLD:
		m->total_access_count = next() % 8 ? 0 : cnt * 1000;
		break;
	case K_HOT:   /* >= 2 accesses per byte in <= 1 ms: density > 1000 */
		m->total_access_count = m->total_size * (2 + next() % 8);
		break;
	default:
		m->total_access_count = next() % 4 ? 0 : (next() % 50) * 1000;
	}
	m->access_samples = m->total_access_count / GEN_ACCESS_WEIGHT + (m->total_access_count > 0);
	m->min_access_count = m->total_access_count / cnt / 2;
	m->max_access_count = m->total_access_count / cnt * 2;
}

static int put_context(struct store *s, const struct plan *pl, const struct binary *bin,
		       unsigned b, uint64_t k, int64_t run_id, uint64_t *row)
{
	struct store_frame fr[GEN_MAX_FRAMES];
	struct store_line lines[GEN_MAX_FRAMES][3];
	unsigned nf = GEN_MIN_FRAMES + (unsigned)(next() % (GEN_MAX_FRAMES - GEN_MIN_FRAMES + 1));
	uint64_t rows = rows_of(pl, k);
	uint64_t u = next() % 100;
	enum kind kind = u < 8 ? K_COLD : u < 11 ? K_HOT : K_NORMAL;
	/* Heavy-tailed sizes so that "top 20" means something. */
	uint64_t size = 16ull << (next() % (is_heavy(k) ? 14 : 12));
	int r = 0;

	for (unsigned i = 0; i < nf; i++) {
		unsigned site = i == nf - 1 ? 0 : i == 0 ? 1 + (unsigned)(next() % GEN_ALLOC_SITES) :
			1 + (unsigned)(next() % (GEN_SITES - 1));

		site_frame(bin, site, &fr[i], lines[i]);
	}
	/* Rows: every process of the binary in turn, buckets spread over the whole span. */
	uint64_t nb = (rows + pl->nproc - 1) / pl->nproc, stride = pl->nbuckets / nb;
	uint64_t b0 = next() % pl->nbuckets, p0 = next() % pl->nproc;

	for (uint64_t j = 0; j < rows && r == 0; j++, (*row)++) {
		uint64_t pi = (p0 + j) % pl->nproc, bi = (b0 + (j / pl->nproc) * stride) % pl->nbuckets;
		int64_t bucket = GEN_T0 + (int64_t)bi * GEN_BUCKET_NS;
		struct store_proc p = { .pid = 1000 + (int32_t)(b * pl->nproc + pi),
					.start_ns = 1000000000ull * (1 + pi), .ppid = 1,
					.exe = bin->exe, .build_id = bin->build_id, .comm = bin->comm,
					.run_id = run_id };
		struct mib m;

		make_mib(&m, kind, size, is_heavy(k), bucket);
		r = store_put_mib(s, &p, pl->first + k + 1, fr, nf, bucket, &m);
		if (r == 0 && (*row + 1) % GEN_BATCH == 0) {
			r = store_commit(s);
			if (r == 0)
				r = store_begin(s);
		}
	}
	return r;
}

/* Static data: a tenth hot (> 1000 accesses per byte per second over the run), a third
 * sampled a little, the rest never. */
static int put_data(struct store *s, const struct binary *bin, int64_t run_id, uint64_t run_s)
{
	static const char *const sections[] = { ".data", ".bss", ".rodata", ".data.rel.ro" };
	char name[64];
	uint64_t addr = 0x404000;
	int r = 0;

	for (unsigned i = 0; i < GEN_DATA_SYMBOLS && r == 0; i++) {
		uint64_t size = 8ull << (next() % 12), est;

		if (next() % 10 == 0)
			est = size * run_s * (1500 + next() % 5000);
		else
			est = next() % 3 ? 0 : (1 + next() % 5) * GEN_DATA_PERIOD;
		snprintf(name, sizeof(name), "%s_table_%u", PICK(namespaces, i), i);

		struct store_data d = { .build_id = bin->build_id, .path = bin->exe, .symbol = name,
			.section = sections[i % 4], .address = addr, .size = size,
			.access_samples = (est + GEN_DATA_PERIOD - 1) / GEN_DATA_PERIOD,
			.est_accesses = est };

		addr += size;
		r = store_put_data(s, run_id, &d);
	}
	return r;
}

static int usage(void)
{
	fprintf(stderr, "usage: gen_store --db PATH [--contexts N] [--rows M] [--binaries B] "
		"[--procs P] [--buckets K] [--seed S] [--first-context F]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' }, { "contexts", required_argument, NULL, 'c' },
		{ "rows", required_argument, NULL, 'r' }, { "binaries", required_argument, NULL, 'b' },
		{ "procs", required_argument, NULL, 'p' }, { "buckets", required_argument, NULL, 'k' },
		{ "seed", required_argument, NULL, 's' },
		{ "first-context", required_argument, NULL, 'f' }, { 0 },
	};
	struct plan pl = { .nctx = 1000, .nrows = 10000, .nbin = 4, .nproc = 8, .nbuckets = 1440 };
	const char *db = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db = optarg; break;
		case 'c': pl.nctx = strtoull(optarg, NULL, 10); break;
		case 'r': pl.nrows = strtoull(optarg, NULL, 10); break;
		case 'b': pl.nbin = strtoull(optarg, NULL, 10); break;
		case 'p': pl.nproc = strtoull(optarg, NULL, 10); break;
		case 'k': pl.nbuckets = strtoull(optarg, NULL, 10); break;
		case 's': rng = strtoull(optarg, NULL, 10) * 2654435761u + 1; break;
		case 'f': pl.first = strtoull(optarg, NULL, 10); break;
		default: return usage();
		}
	}
	if (!db || !pl.nctx || !pl.nbin || pl.nbin > 1000 || !pl.nproc || !pl.nbuckets ||
	    pl.nrows < pl.nctx) {
		fprintf(stderr, "gen_store: --db is required, --rows must be >= --contexts and the "
			"counts > 0\n");
		return usage();
	}
	if (access(db, F_OK) == 0) {
		fprintf(stderr, "gen_store: %s exists: remove it first\n", db);
		return 1;
	}
	if (plan_rows(&pl) < 0)
		return 1;

	struct binary *bins = calloc(pl.nbin, sizeof(*bins));

	for (unsigned b = 0; bins && b < pl.nbin; b++)
		if (binary_init(&bins[b], b) < 0) {
			free(bins);
			bins = NULL;
		}
	if (!bins) {
		fprintf(stderr, "gen_store: out of memory\n");
		return 1;
	}

	struct store *s;
	struct bulk bk = {0};
	char err[512];

	if (store_open(&s, db, STORE_RDWR, err, sizeof(err)) < 0) {
		fprintf(stderr, "gen_store: %s\n", err);
		return 1;
	}
	if (bulk_begin(&bk, db) < 0) {
		store_close(s);
		bulk_free(&bk);
		return 1;
	}

	int64_t run_id = 0;
	uint64_t row = 0;
	struct store_run run = { .command = "daemon (gen_store)", .alloc_mode = "sampled",
				 .access_mode = "soft", .settings = "{}", .started_ns = GEN_T0 };

	int r = store_begin(s);

	if (r == 0)
		r = store_run_begin(s, &run, &run_id);
	for (uint64_t k = 0; k < pl.nctx && r == 0; k++)
		r = put_context(s, &pl, &bins[k % pl.nbin], (unsigned)(k % pl.nbin), k, run_id, &row);
	for (unsigned b = 0; b < pl.nbin && r == 0; b++)
		r = put_data(s, &bins[b], run_id, pl.nbuckets * (GEN_BUCKET_NS / 1000000000));
	/* The run's sample weight, which reporter/classify.c's evidence rule reads. */
	if (r == 0)
		r = store_put_access_class(s, run_id, "heap", 1000, 1000 * GEN_ACCESS_WEIGHT);
	if (r == 0) {
		struct store_run_stats st = { .ended_ns = GEN_T0 + (int64_t)pl.nbuckets * GEN_BUCKET_NS,
					      .events = row, .status = "ok" };

		r = store_run_update(s, run_id, &st);
	}
	if (r == 0)
		r = store_commit(s);
	if (r < 0)
		fprintf(stderr, "gen_store: %s\n", store_errmsg(s));
	store_close(s);
	if (r == 0)
		r = bulk_end(&bk);
	bulk_free(&bk);
	for (unsigned b = 0; b < pl.nbin; b++) {
		free(bins[b].funcs);
		free(bins[b].sites);
	}
	free(bins);
	if (r < 0)
		return 1;
	printf("gen_store: %s: %" PRIu64 " contexts, %" PRIu64 " MIB rows, %" PRIu64 " binaries, %"
	       PRIu64 " processes, %" PRIu64 " buckets\n", db, pl.nctx, row, pl.nbin,
	       pl.nbin * pl.nproc, pl.nbuckets);
	return 0;
}
