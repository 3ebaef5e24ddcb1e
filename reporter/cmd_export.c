/* `memprofd export pprof|folded|html`: one binary's allocation contexts for people.
 * The store is opened read-only; with -o the export goes to a temporary file renamed
 * over FILE at the end, so a failed export never leaves a truncated file. The compiler
 * and linker formats are dispatched here too and say when this build lacks them. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fleet/src.h"
#include "reporter/export.h"
#include "reporter/format.h"
#include "reporter/query.h"
#include "compiler_feedback/hints.h"
#include "compiler_feedback/memprof_raw.h"
#include "compiler_feedback/memprof_yaml.h"
#include "linker_script_gen/ldgen_export.h"

#define _cleanup_(f) __attribute__((cleanup(f)))
static inline void freep(void *p) { free(*(void **)p); }
#define _cleanup_free_ _cleanup_(freep)
static inline void store_closep(struct store **s) { store_close(*s); }

/* ---- helpers shared by the exports ---- */

unsigned export_frame_lines(const struct store_frame *f, struct export_line *lines,
			    unsigned max)
{
	unsigned n = 0;

	/* DWARF lines (schema >= 3): the inline chain, leaf first, as the store keeps it. */
	for (unsigned i = 0; i < f->nlines && n < max; i++) {
		const struct store_line *l = &f->lines[i];
		const char *fn = l->function ? l->function : i + 1 == f->nlines ? f->function : NULL;

		if (!fn)
			continue;
		lines[n++] = (struct export_line){ .function = fn,
			.mangled = l->mangled ? l->mangled : i + 1 == f->nlines ? f->mangled : NULL,
			.file = l->file, .line = l->line, .column = l->column,
			.start_line = l->decl_line };
	}
	if (n || !max || !f->function)
		return n;
	/* Only the ELF symbol. */
	lines[0] = (struct export_line){ .function = f->function, .mangled = f->mangled };
	return 1;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

void export_frame_name(char *buf, size_t n, const struct store_frame *f,
		       const struct export_line *l)
{
	if (l && l->function) {
		fmt_func_short(buf, n, l->function);
	} else {
		const char *b = base_name(f->path);

		snprintf(buf, n, "%s+0x%" PRIx64, b && *b ? b : "[unknown]", f->offset);
	}
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!*buf)
		snprintf(buf, n, "?");
}

uint64_t export_weight_value(const struct mib *m, enum export_weight w)
{
	switch (w) {
	case EXPORT_WEIGHT_OBJECTS: return m->alloc_count;
	case EXPORT_WEIGHT_ACCESSES: return m->total_access_count;
	default: return m->total_size;
	}
}

static const char *const weights[] = {
	[EXPORT_WEIGHT_BYTES] = "bytes", [EXPORT_WEIGHT_OBJECTS] = "objects",
	[EXPORT_WEIGHT_ACCESSES] = "accesses",
};

const char *export_weight_name(enum export_weight w)
{
	return (unsigned)w < sizeof(weights) / sizeof(weights[0]) ? weights[w] : "bytes";
}

/* ---- the subcommand ---- */

static const struct format {
	const char *name;
	int (*run)(FILE *out, struct store *s, const struct export_opts *o);  /* NULL: absent */
	bool binary_output;   /* refused on a terminal */
} formats[] = {
	{ "pprof", export_pprof, true },
	{ "folded", export_folded, false },
	{ "html", export_html, false },
	{ "memprof-raw", export_memprof_raw, true },
	{ "memprof-yaml", export_memprof_yaml, false },
	{ "hints", export_hints, false },
	{ "ld-script", export_ld_script, false },
	{ "symbol-order", export_symbol_order, false },
	{ "section-prefixes", export_section_prefixes, false },
};

static const char usage_text[] =
	"usage: memprofd export pprof|folded|html [--db PATH | --from URL] --binary PATH|BUILDID\n"
	"                       [-o FILE] [--weight bytes|objects|accesses]\n"
	"\n"
	"Exports one binary's allocation contexts from a memprofd database (read-only).\n"
	"\n"
	"  pprof    gzipped profile.proto for `pprof`: alloc_objects, alloc_space,\n"
	"           accesses (estimated) and lifetime (ms) per allocation context\n"
	"  folded   folded stacks, root first, for flamegraph.pl, speedscope or inferno\n"
	"  html     one self-contained HTML report (summary, top contexts, data symbols,\n"
	"           flame graph, heap map); needs no network to view\n"
	"  memprof-raw  MemProf raw profile v4 for llvm-profdata merge --profiled-binary\n"
	"           (the binary needs -Wl,-z,noseparate-code, a build-id, -gmlt)\n"
	"  memprof-yaml MemProf YAML (LLVM >= 20) for llvm-profdata merge\n"
	"  hints    allocation hints per trimmed context (--format text|json)\n"
	"  ld-script    GNU ld (bfd) INSERT script: hot data input sections first, cold\n"
	"           last (-fdata-sections objects, -Wl,-T,FILE)\n"
	"  symbol-order lld --symbol-ordering-file, hottest data symbol first\n"
	"  section-prefixes objcopy --rename-section lines: .data.SYM -> .data.hot.SYM\n"
	"           and .data.unlikely.SYM (the -fpartition-static-data-sections names)\n"
	"\n"
	"options:\n"
	"  --db PATH            database file (default " QUERY_DEFAULT_DB ")\n"
	"  --from URL           the fleet's ClickHouse (HTTP endpoint) instead of --db:\n"
	"                       every pushed host combined, as `memprofd merge` would\n"
	"  --host GLOB          with --from: only hosts whose name matches GLOB\n"
	"  --since T, --until T with --from: only time buckets (data: runs) in [T, T)\n"
	"  --binary PATH|ID     the executable: its path (resolved) or its build-id\n"
	"  -o, --output FILE    write to FILE instead of standard output\n"
	"  --weight W           bytes|objects|accesses: folded stack values and the HTML\n"
	"                       flame graph's initial weight (default bytes)\n"
	"  --format text|json   hints: the text format (default) or JSON\n"
	"  --hot-share F        linker exports: hot = fewest symbols covering this share\n"
	"                       of sampled accesses (default 0.99)\n"
	"  --cold-min-samples N linker exports: cold (never sampled) only when the window\n"
	"                       has at least N samples (default 1000)\n"
	"  -h, --help           show this help\n";

static int usage_error(const char *what, const char *msg, const char *arg)
{
	fprintf(stderr, "memprofd: %s: ", what);
	fprintf(stderr, msg, arg);
	fputc('\n', stderr);
	return 2;
}

struct bin_find {
	const char *want;
	char *build_id, *path;
	uint64_t contexts;
	bool found, oom;
};

static int bin_cb(const struct store_binary_row *r, void *arg)
{
	struct bin_find *b = arg;

	if (!(r->build_id && *r->build_id && !strcmp(r->build_id, b->want)) &&
	    !(r->path && !strcmp(r->path, b->want)))
		return 0;
	b->found = true;
	b->contexts = r->contexts;
	b->build_id = strdup(r->build_id ? r->build_id : "");
	b->path = strdup(r->path ? r->path : "");
	b->oom = !b->build_id || !b->path;
	return 1;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Writes the export into a temporary file beside path, renamed over path on success. */
static int export_to_file(const struct format *fmt, const char *path, struct store *s,
			  const struct export_opts *o, const char *what)
{
	size_t n = strlen(path) + sizeof(".XXXXXX");
	_cleanup_free_ char *tmp = malloc(n);
	int fd, r;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, n, "%s.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "memprofd: %s: creating %s: %s\n", what, tmp, strerror(errno));
		return -errno;
	}
	fchmod(fd, 0644);

	FILE *f = fdopen(fd, "w");

	if (!f) {
		r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	r = fmt->run(f, s, o);
	if (r < 0) {
		fprintf(stderr, "memprofd: %s: %s\n", what, store_errmsg(s)[0] ? store_errmsg(s) :
			strerror(-r));
		fclose(f);
		unlink(tmp);
		return r;
	}
	if (fflush(f) == EOF || ferror(f) || fsync(fd) < 0 || fclose(f) == EOF) {
		r = -errno;
		fprintf(stderr, "memprofd: %s: writing %s: %s\n", what, path, strerror(errno));
		unlink(tmp);
		return r ? r : -EIO;
	}
	if (rename(tmp, path) < 0) {
		r = -errno;
		fprintf(stderr, "memprofd: %s: renaming %s to %s: %s\n", what, tmp, path,
			strerror(errno));
		unlink(tmp);
		return r;
	}
	return 0;
}

int cmd_export(int argc, char **argv)
{
	enum { O_DB = 1, O_BINARY, O_WEIGHT, O_FORMAT, O_HOT_SHARE, O_COLD_MIN, O_FROM, O_HOST,
	       O_SINCE, O_UNTIL };
	static const struct option longopts[] = {
		{ "db", required_argument, NULL, O_DB },
		{ "binary", required_argument, NULL, O_BINARY },
		{ "output", required_argument, NULL, 'o' },
		{ "weight", required_argument, NULL, O_WEIGHT },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "hot-share", required_argument, NULL, O_HOT_SHARE },
		{ "cold-min-samples", required_argument, NULL, O_COLD_MIN },
		{ "from", required_argument, NULL, O_FROM },
		{ "host", required_argument, NULL, O_HOST },
		{ "since", required_argument, NULL, O_SINCE },
		{ "until", required_argument, NULL, O_UNTIL },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *db = QUERY_DEFAULT_DB, *output = NULL, *binary = NULL;
	_cleanup_free_ char *binary_path = NULL;
	struct export_opts o = { .weight = EXPORT_WEIGHT_BYTES };
	struct fleet_src_opts fleet = { 0 };
	bool db_given = false;
	const struct format *fmt = NULL;
	char what[64] = "export";
	int c, r;

	/* The format may come before or after the options: find it first, for messages. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (argv[i][0] == '-') {
			i += (argv[i][1] == '-' && !strchr(argv[i], '=') && strcmp(argv[i], "--help")) ||
			     !strcmp(argv[i], "-o");
			continue;
		}
		for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
			if (!strcmp(argv[i], formats[k].name)) {
				fmt = &formats[k];
				snprintf(what, sizeof(what), "export %s", fmt->name);
			}
		break;
	}

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case ':':
			return usage_error(what, "option '%s' needs a value", argv[optind - 1]);
		case '?':
			return usage_error(what, "unknown option '%s'", argv[optind - 1]);
		case O_DB:
			if (!*optarg)
				return usage_error(what, "--db: empty path%s", "");
			db = optarg;
			db_given = true;
			break;
		case O_FROM:
		case O_HOST:
			if (!*optarg)
				return usage_error(what, "%s: empty value", argv[optind - 1]);
			*(c == O_FROM ? &fleet.url : &fleet.host_glob) = optarg;
			break;
		case O_SINCE:
		case O_UNTIL:
			if (query_parse_time(optarg, now_ns(), c == O_SINCE ? &fleet.since_ns :
					     &fleet.until_ns) < 0)
				return usage_error(what, c == O_SINCE ? "--since: invalid time '%s'" :
						   "--until: invalid time '%s'", optarg);
			break;
		case O_BINARY:
			if (!*optarg)
				return usage_error(what, "--binary: empty value%s", "");
			free(binary_path);
			binary_path = strchr(optarg, '/') ? realpath(optarg, NULL) : NULL;
			binary = binary_path ? binary_path : optarg;
			break;
		case 'o':
			if (!*optarg)
				return usage_error(what, "-o: empty path%s", "");
			output = strcmp(optarg, "-") ? optarg : NULL;
			break;
		case O_FORMAT:
			if (strcmp(optarg, "text") && strcmp(optarg, "json"))
				return usage_error(what, "--format: unknown format '%s' (text|json)",
						   optarg);
			o.format = optarg;
			break;
		case O_HOT_SHARE: {
			char *end;

			o.hot_share = strtod(optarg, &end);
			if (end == optarg || *end || !(o.hot_share > 0 && o.hot_share <= 1))
				return usage_error(what, "--hot-share: '%s' is not in (0, 1]", optarg);
			break;
		}
		case O_COLD_MIN: {
			char *end;

			errno = 0;
			o.cold_min_samples = strtoull(optarg, &end, 10);
			if (end == optarg || *end || errno || optarg[0] == '-' || !o.cold_min_samples)
				return usage_error(what, "--cold-min-samples: '%s' is not a positive "
						   "integer", optarg);
			break;
		}
		case O_WEIGHT: {
			bool ok = false;

			for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++)
				if (!strcmp(optarg, weights[i])) {
					o.weight = (enum export_weight)i;
					ok = true;
				}
			if (!ok)
				return usage_error(what, "--weight: unknown weight '%s' "
						   "(bytes|objects|accesses)", optarg);
			break;
		}
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	fmt = NULL;
	for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
		if (!strcmp(argv[optind], formats[k].name))
			fmt = &formats[k];
	if (!fmt)
		return usage_error("export", "unknown format '%s' (pprof|folded|html|memprof-raw|"
				   "memprof-yaml|hints|ld-script|symbol-order|section-prefixes)", argv[optind]);
	snprintf(what, sizeof(what), "export %s", fmt->name);
	if (optind + 1 < argc)
		return usage_error(what, "unexpected argument '%s'", argv[optind + 1]);
	if (!fmt->run) {
		fprintf(stderr, "memprofd: %s: not available in this build\n", what);
		return 1;
	}
	if (!fleet.url && (fleet.host_glob || fleet.since_ns || fleet.until_ns))
		return usage_error(what, "--host, --since and --until apply only with --from%s", "");
	if (fleet.url && db_given)
		return usage_error(what, "give --db or --from, not both%s", "");
	if (!binary)
		return usage_error(what, "--binary is required (see memprofd query binaries)%s", "");
	if (!output && fmt->binary_output && isatty(STDOUT_FILENO))
		return usage_error(what, "not writing binary data to a terminal; use -o FILE%s", "");

	char err[512];
	_cleanup_(store_closep) struct store *s = NULL;

	r = fleet.url ? fleet_open_store(&s, &fleet, err, sizeof(err)) :
		store_open(&s, db, STORE_RDONLY, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "memprofd: %s: %s\n", what, err);
		return 1;
	}

	struct bin_find bf = { .want = binary };

	r = store_query_binaries(s, bin_cb, &bf);
	if (r < 0 || bf.oom) {
		fprintf(stderr, "memprofd: %s: %s\n", what, bf.oom ? "out of memory" : store_errmsg(s));
		free(bf.build_id);
		free(bf.path);
		return 1;
	}
	if (!bf.found) {
		fprintf(stderr, "memprofd: %s: no binary '%s' in %s (see memprofd query binaries)\n",
			what, binary, fleet.url ? fleet.url : db);
		return 1;
	}
	o.binary = binary;
	o.build_id = bf.build_id;
	o.path = bf.path;
	o.contexts = bf.contexts;
	o.now_ns = now_ns();
	o.progress = true;
	if (output) {
		r = export_to_file(fmt, output, s, &o, what);
	} else {
		r = fmt->run(stdout, s, &o);
		if (r < 0)
			fprintf(stderr, "memprofd: %s: %s\n", what, store_errmsg(s)[0] ?
				store_errmsg(s) : strerror(-r));
		else if (fflush(stdout) == EOF || ferror(stdout)) {
			fprintf(stderr, "memprofd: %s: writing the export: %s\n", what,
				strerror(errno));
			r = -EIO;
		}
	}
	free(bf.build_id);
	free(bf.path);
	return r < 0 ? 1 : 0;
}
