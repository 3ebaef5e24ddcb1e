/* `memprofd export pprof|folded|html`: one binary's allocation contexts for people.
 * The store is opened read-only; with -o the export goes to a temporary file renamed
 * over FILE at the end, so a failed export never leaves a truncated file. The compiler
 * and linker formats are dispatched here too and say when this build lacks them. The
 * dispatch lives in cli/ because it calls the writers of three layers (reporter/,
 * compiler_feedback/, linker_script_gen/), which themselves only build on reporter/. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "fleet/src.h"
#include "reporter/binsel.h"
#include "reporter/export.h"
#include "reporter/query.h"
#include "compiler_feedback/hints.h"
#include "compiler_feedback/memprof_raw.h"
#include "compiler_feedback/memprof_yaml.h"
#include "linker_script_gen/ldgen_export.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/log.h"

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
	"usage: memprofd export pprof|folded|html|memprof-raw|memprof-yaml|hints|ld-script|\n"
	"                       symbol-order|section-prefixes [--db PATH | --from URL] --binary PATH|BUILDID\n"
	"                       [-o FILE] [--weight bytes|objects|accesses] [--format text|json]\n"
	"                       [--hot-share F] [--cold-min-samples N]\n"
	"\n"
	"Exports one binary's allocation contexts from a memprofd database (read-only).\n"
	"\n"
	"  pprof    gzipped profile.proto for `pprof`: alloc_objects, alloc_space,\n"
	"           accesses (estimated) and lifetime (ms) per allocation context\n"
	"  folded   folded stacks, root first, for flamegraph.pl, speedscope or inferno\n"
	"  html     one self-contained HTML report (summary, top contexts with file:line,\n"
	"           live at exit, heap over time, top-down/bottom-up flame graph with\n"
	"           search, data symbols); needs no network to view\n"
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
	"  --since T            with --from: only time buckets (data: runs) from T on\n"
	"  --until T            with --from: only those starting before T\n"
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

/* Why fmt->run failed, in one line: its own words, the store's, or errno's. */
static const char *run_error(const struct export_opts *o, struct store *s, int r)
{
	if (o->err && o->err[0])
		return o->err;
	return store_errmsg(s)[0] ? store_errmsg(s) : strerror(-r);
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
		log_error("%s: creating %s: %s", what, tmp, strerror(errno));
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
		log_error("%s: %s", what, run_error(o, s, r));
		fclose(f);
		unlink(tmp);
		return r;
	}
	if (fflush(f) == EOF || ferror(f) || fsync(fd) < 0 || fclose(f) == EOF) {
		r = -errno;
		log_error("%s: writing %s: %s", what, path, strerror(errno));
		unlink(tmp);
		return r ? r : -EIO;
	}
	if (rename(tmp, path) < 0) {
		r = -errno;
		log_error("%s: renaming %s to %s: %s", what, tmp, path,
			strerror(errno));
		unlink(tmp);
		return r;
	}
	return 0;
}

/* What the command line asked for. */
struct export_args {
	const char *db, *output, *binary;  /* binary: as given, resolved by binsel_resolve() */
	struct export_opts o;
	struct fleet_src_opts fleet;     /* --from URL (and --host, --since, --until) */
	bool db_given;
	const struct format *fmt;
	char what[64];                   /* "export FORMAT", the messages' prefix */
};

/* Returned by the argument steps when the export may go on (else an exit code). */
#define EXPORT_GO (-1)

static const struct format *format_named(const char *name)
{
	for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
		if (!strcmp(name, formats[k].name))
			return &formats[k];
	return NULL;
}

/* The format may come before or after the options: finds it first, for messages. */
static void prescan_format(int argc, char **argv, struct export_args *a)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (argv[i][0] == '-') {
			i += (argv[i][1] == '-' && !strchr(argv[i], '=') && strcmp(argv[i], "--help")) ||
			     !strcmp(argv[i], "-o");
			continue;
		}
		a->fmt = format_named(argv[i]);
		if (a->fmt)
			snprintf(a->what, sizeof(a->what), "export %s", a->fmt->name);
		break;
	}
}

static int parse_weight(const char *arg, struct export_args *a)
{
	for (int i = EXPORT_WEIGHT_BYTES; i <= EXPORT_WEIGHT_ACCESSES; i++)
		if (!strcmp(arg, export_weight_name(i))) {
			a->o.weight = (enum export_weight)i;
			return EXPORT_GO;
		}
	return usage_error(a->what, "--weight: unknown weight '%s' "
			   "(bytes|objects|accesses)", arg);
}

enum { O_DB = 1, O_BINARY, O_WEIGHT, O_FORMAT, O_HOT_SHARE, O_COLD_MIN, O_FROM, O_HOST,
       O_SINCE, O_UNTIL };

/* --from, --host, --since, --until: the fleet's ClickHouse (fleet/src.h). */
static int parse_fleet_option(int c, char *arg, struct export_args *a)
{
	if (!*arg)
		return usage_error(a->what, "an option has an empty value%s", "");
	if (c == O_FROM || c == O_HOST) {
		*(c == O_FROM ? &a->fleet.url : &a->fleet.host_glob) = arg;
		return EXPORT_GO;
	}
	if (query_parse_time(arg, real_ns(), c == O_SINCE ? &a->fleet.since_ns :
			     &a->fleet.until_ns) < 0)
		return usage_error(a->what, c == O_SINCE ? "--since: invalid time '%s'" :
				   "--until: invalid time '%s'", arg);
	return EXPORT_GO;
}

/* One option with its value (c as getopt_long returns it). */
static int parse_option(int c, char *arg, struct export_args *a)
{
	char *end;

	switch (c) {
	case O_DB:
		if (!*arg)
			return usage_error(a->what, "--db: empty path%s", "");
		a->db = arg;
		a->db_given = true;
		break;
	case O_FROM: case O_HOST: case O_SINCE: case O_UNTIL:
		return parse_fleet_option(c, arg, a);
	case O_BINARY:
		if (!*arg)
			return usage_error(a->what, "--binary: empty value%s", "");
		a->binary = arg;
		break;
	case 'o':
		if (!*arg)
			return usage_error(a->what, "-o: empty path%s", "");
		a->output = strcmp(arg, "-") ? arg : NULL;
		break;
	case O_FORMAT:
		if (strcmp(arg, "text") && strcmp(arg, "json"))
			return usage_error(a->what, "--format: unknown format '%s' (text|json)", arg);
		a->o.format = arg;
		break;
	case O_HOT_SHARE:
		a->o.hot_share = strtod(arg, &end);
		if (end == arg || *end || !(a->o.hot_share > 0 && a->o.hot_share <= 1))
			return usage_error(a->what, "--hot-share: '%s' is not in (0, 1]", arg);
		break;
	case O_COLD_MIN:
		errno = 0;
		a->o.cold_min_samples = strtoull(arg, &end, 10);
		if (end == arg || *end || errno || arg[0] == '-' || !a->o.cold_min_samples)
			return usage_error(a->what, "--cold-min-samples: '%s' is not a positive "
					   "integer", arg);
		break;
	case O_WEIGHT:
		return parse_weight(arg, a);
	}
	return EXPORT_GO;
}

static int parse_args(int argc, char **argv, struct export_args *a)
{
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
	int c, r;

	prescan_format(argc, argv, a);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c == ':')
			return usage_error(a->what, "option '%s' needs a value", argv[optind - 1]);
		if (c == '?')
			return usage_error(a->what, "unknown option '%s'", argv[optind - 1]);
		r = parse_option(c, optarg, a);
		if (r != EXPORT_GO)
			return r;
	}
	return EXPORT_GO;
}

/* The format operand and what it needs: a binary, and no binary data on a terminal. */
static int check_args(int argc, char **argv, struct export_args *a)
{
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	a->fmt = format_named(argv[optind]);
	if (!a->fmt)
		return usage_error("export", "unknown format '%s' (pprof|folded|html|memprof-raw|"
				   "memprof-yaml|hints|ld-script|symbol-order|section-prefixes)", argv[optind]);
	snprintf(a->what, sizeof(a->what), "export %s", a->fmt->name);
	if (optind + 1 < argc)
		return usage_error(a->what, "unexpected argument '%s'", argv[optind + 1]);
	if (!a->fmt->run) {
		log_error("%s: not available in this build", a->what);
		return 1;
	}
	if (!a->fleet.url && (a->fleet.host_glob || a->fleet.since_ns || a->fleet.until_ns))
		return usage_error(a->what, "--host, --since and --until apply only with --from%s", "");
	if (a->fleet.url && a->db_given)
		return usage_error(a->what, "give --db or --from, not both%s", "");
	if (!a->binary)
		return usage_error(a->what, "--binary is required (see memprofd query binaries)%s", "");
	if (!a->output && a->fmt->binary_output && isatty(STDOUT_FILENO))
		return usage_error(a->what, "not writing binary data to a terminal; use -o FILE%s", "");
	return EXPORT_GO;
}

/* The export to -o FILE (atomically) or to standard output: 0 or -errno, said on stderr. */
static int write_export(struct store *s, const struct export_args *a)
{
	int r;

	if (a->output)
		return export_to_file(a->fmt, a->output, s, &a->o, a->what);
	r = a->fmt->run(stdout, s, &a->o);
	if (r < 0)
		log_error("%s: %s", a->what, run_error(&a->o, s, r));
	else if (fflush(stdout) == EOF || ferror(stdout)) {
		log_error("%s: writing the export: %s", a->what,
			strerror(errno));
		r = -EIO;
	}
	return r;
}

/* Opens the store, finds the binary, writes the export: the exit code. */
static int run_export(struct export_args *a)
{
	char err[512], why[1024] = "";
	_cleanup_(store_closep) struct store *s = NULL;
	_cleanup_(binsel_free) struct binsel bin = { 0 };
	int r;

	r = a->fleet.url ? fleet_open_store(&s, &a->fleet, err, sizeof(err)) :
		store_open(&s, a->db, STORE_RDONLY, err, sizeof(err));
	if (r < 0) {
		log_error("%s: %s", a->what, err);
		return 1;
	}
	/* One resolution for query and export: unknown or rebuilt binaries are refused. */
	if (binsel_resolve(s, a->binary, a->fleet.url ? a->fleet.url : a->db, &bin, err,
			   sizeof(err)) < 0) {
		log_error("%s: %s", a->what, err);
		return 1;
	}
	/* The store's key filters; a path the user gave stays the file to read (memprof-raw,
	 * the linker exports), the recorded path otherwise. */
	_cleanup_free_ char *file = strchr(a->binary, '/') ? realpath(a->binary, NULL) : NULL;

	a->o.binary = *bin.build_id ? bin.build_id : bin.path;
	a->o.build_id = bin.build_id;
	a->o.path = file ? file : bin.path;
	a->o.contexts = bin.contexts;
	a->o.err = why;
	a->o.errsz = sizeof(why);
	a->o.now_ns = real_ns();
	a->o.progress = true;
	r = write_export(s, a);
	return r < 0 ? 1 : 0;
}

int cmd_export(int argc, char **argv)
{
	struct export_args a = { .db = QUERY_DEFAULT_DB, .o = { .weight = EXPORT_WEIGHT_BYTES },
				 .what = "export" };
	int r;

	r = parse_args(argc, argv, &a);
	if (r == EXPORT_GO)
		r = check_args(argc, argv, &a);
	if (r == EXPORT_GO)
		r = run_export(&a);
	return r;
}
