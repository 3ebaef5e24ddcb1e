/* `memprofd push`: one host's store into the fleet's ClickHouse (deploy/clickhouse/).
 * Idempotent per (host, run, flush): each run has a mark, the FNV-1a hash of its run row,
 * its processes, MIB rows and data rows as they are now (a flush changes them); a run
 * whose (host, run, mark) is in the ledger (memprofd.pushes) is not sent again. A push
 * sends, under a fresh push_id, a full snapshot of the store's dimension tables and the
 * rows of every changed run, then the ledger rows; readers see a push's rows only through
 * its ledger rows, so a push cut short adds nothing, and the next push sends it all again.
 * Cost: one read of the store (marks), then one of what is sent; FLEET_BATCH_ROWS rows per
 * gzipped INSERT. The store is opened read-only and never written. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "daemon/service/config.h"
#include "fleet/fleet.h"
#include "fleet/push.h"
#include "store/store.h"

static const char push_usage[] =
	"usage: memprofd push --db PATH --to URL [--host NAME]\n"
	"       memprofd push --config PATH      # [store] db and [fleet] url, host\n"
	"\n"
	"Sends the store's runs, contexts, frames and lines, MIB rows with histograms, data\n"
	"symbols, processes and binaries to the fleet's ClickHouse (its HTTP endpoint, with\n"
	"deploy/clickhouse/schema.sql applied). Runs already pushed unchanged are skipped, so\n"
	"pushing again, or after an interrupted push, adds nothing twice.\n"
	"  --db PATH      the store (read-only)\n"
	"  --to URL       ClickHouse HTTP endpoint, e.g. http://127.0.0.1:8123/\n"
	"  --host NAME    this host's name in the fleet (default: the system's host name)\n"
	"  --config PATH  take the three from memprofd.conf ([store] db, [fleet] url and\n"
	"                 host; the options above win); no [fleet] url: nothing to do\n"
	"  -h, --help     show this help\n";

static void print_stats(const struct push_opts *o, const struct push_stats *st)
{
	if (!st->runs_sent)
		printf("push: nothing new for host %s (%" PRIu64 " runs already pushed)\n", o->host,
		       st->runs_skipped);
	else
		printf("push: host %s: %" PRIu64 " runs sent (%" PRIu64 " unchanged), %" PRIu64
		       " rows in %.2f s\n", o->host, st->runs_sent, st->runs_skipped, st->rows,
		       st->seconds);
}

/* Fills what the command line left unset from the config's [store] db and [fleet]. */
static int push_config(const char *path, struct config *cfg, struct push_opts *o)
{
	char *errors = NULL;
	int r = config_load(cfg, path, &errors);

	if (r) {
		fprintf(stderr, "memprofd: push: %s\n", errors ? errors : strerror(-r));
		free(errors);
		return r == -EINVAL ? 2 : 1;
	}
	if (!o->db)
		o->db = cfg->db;
	if (!o->url)
		o->url = cfg->fleet_url;
	if (!o->host)
		o->host = cfg->fleet_host;
	return 0;
}

int cmd_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' }, { "to", required_argument, NULL, 't' },
		{ "host", required_argument, NULL, 'H' }, { "help", no_argument, NULL, 'h' },
		{ "config", required_argument, NULL, 'c' },
		{ 0 },
	};
	struct push_opts o = { 0 };
	struct config cfg;
	const char *conf = NULL;
	char host[FLEET_HOST_MAX + 1], err[1024];
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o.db = optarg; break;
		case 't': o.url = optarg; break;
		case 'H': o.host = optarg; break;
		case 'c': conf = optarg; break;
		case 'h': fputs(push_usage, stdout); return 0;
		case ':':
			fprintf(stderr, "memprofd: push: option '%s' needs a value\n", argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "memprofd: push: unknown option '%s'\n", argv[optind - 1]);
			return 2;
		}
	}
	int r = 0;

	if (conf)
		r = push_config(conf, &cfg, &o);   /* config_load() starts from the defaults */
	else
		config_defaults(&cfg);

	if (r) {
		config_free(&cfg);
		return r;
	}
	if (conf && !o.url) {
		printf("push: no [fleet] url in %s: nothing pushed\n", conf);
		config_free(&cfg);
		return 0;
	}
	if (!o.db || !o.url || optind < argc) {
		config_free(&cfg);
		fprintf(stderr, "memprofd: push: give --db PATH and --to URL (see --help)\n");
		return 2;
	}
	if (!o.host) {
		if (gethostname(host, sizeof(host) - 1) < 0)
			snprintf(host, sizeof(host), "localhost");
		host[sizeof(host) - 1] = '\0';
		o.host = host;
	}
	struct push_stats st = { 0 };

	r = !*o.host || strlen(o.host) > FLEET_HOST_MAX ? 2 : push_store(&o, &st, err, sizeof(err));
	if (!r)
		print_stats(&o, &st);
	config_free(&cfg);
	if (r == 2) {
		fprintf(stderr, "memprofd: push: --host: a name of 1 to %d bytes\n", FLEET_HOST_MAX);
		return 2;
	}
	if (r) {
		fprintf(stderr, "memprofd: push: %s\n", err);
		return 1;
	}
	return 0;
}
