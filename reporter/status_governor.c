/* `memprofd query status`'s governor block: budget, measured CPU, each scaled source's
 * scale and rate, the last action and when, the recent rate changes, the daemon's
 * memory and its targets (traced, and selected ones lacking the sampler) at that tick. Table lines stay within FMT_TABLE_WIDTH (cells are cut by
 * fmt_cell); JSON carries every field in full. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reporter/format.h"
#include "reporter/status_governor.h"

struct gov_out {
	FILE *out;
	int indent;
	bool any;
};

static const char *iso_utc(char *buf, size_t n, int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, n, "never");
	return buf;
}

/* One table line "<indent><text>" cut to the table width. */
static void line(const struct gov_out *o, int extra, const char *text)
{
	char cell[FMT_TABLE_WIDTH + 1];

	fmt_cell(cell, FMT_TABLE_WIDTH - (size_t)(o->indent + extra), text);
	fprintf(o->out, "%*s%s\n", o->indent + extra, "", cell);
}

static int table_cb(int64_t run_id, const struct store_governor *g, void *arg)
{
	struct gov_out *o = arg;
	char text[512], at[32], changed[32], rss[FMT_BUF], cache[FMT_BUF];

	snprintf(text, sizeof(text), "governor: budget %.3f%% of one CPU, used %.3f%% at tick %"
		 PRIu64 " (%s): %s", g->budget * 100, g->cpu * 100, g->ticks,
		 iso_utc(at, sizeof(at), g->at_ns), g->action ? g->action : "?");
	line(o, 0, text);
	/* The decision text starts with "tick N: cpu ..., budget ...": keep what follows. */
	const char *d = g->decision ? g->decision : "";
	const char *verdict = strstr(d, "%: ");
	line(o, 2, verdict ? verdict + 3 : d);
	snprintf(text, sizeof(text), "rates lowered %" PRIu64 ", raised %" PRIu64 " times, last "
		 "at %s; floor %.4g", g->lowered, g->raised,
		 iso_utc(changed, sizeof(changed), g->changed_ns), g->min_scale);
	line(o, 2, text);
	if (!g->nsrc)
		line(o, 2, "sources: none with a rate to lower (exact allocation tracking)");
	for (unsigned i = 0; i < g->nsrc; i++) {
		const struct store_gov_source *src = &g->src[i];
		char rate[64];

		if (src->rate >= 0)
			snprintf(rate, sizeof(rate), "%.4g %s", src->rate, src->unit ? src->unit : "");
		else
			snprintf(rate, sizeof(rate), "no rate to change");
		snprintf(text, sizeof(text), "%s: scale %.4g of the configured rate, %s, %" PRIu64
			 " events last tick", src->name, src->scale, rate, src->events);
		line(o, 2, text);
	}
	snprintf(text, sizeof(text), "memory: RSS %s, page cache %s, %" PRIu64 " processes and %"
		 PRIu64 " aggregates held", fmt_bytes(rss, g->rss_bytes),
		 fmt_bytes(cache, g->cache_bytes), g->procs_held, g->aggs_held);
	line(o, 2, text);
	const struct store_gov_targets *tg = &g->targets;
	snprintf(text, sizeof(text), "targets: %" PRIu64 " traced, %" PRIu64 " without the "
		 "sampler (not profiled), %" PRIu64 " over max_processes", tg->traced,
		 tg->unsampled, tg->skipped);
	line(o, 2, text);
	for (const char *p = tg->unsampled_list; p && *p;) {
		size_t len = strcspn(p, "\n");

		snprintf(text, sizeof(text), "no sampler: pid %.*s", (int)len, p);
		line(o, 4, text);
		p += len + (p[len] == '\n');
	}
	for (const char *p = g->history; p && *p;) {
		size_t len = strcspn(p, "\n");

		snprintf(text, sizeof(text), "change: %.*s", (int)len, p);
		line(o, 2, text);
		p += len + (p[len] == '\n');
	}
	(void)run_id;
	o->any = true;
	return 0;
}

int status_governor_table(FILE *out, struct store *s, int64_t run_id, int indent)
{
	struct gov_out o = { .out = out, .indent = indent };

	return store_query_governor(s, run_id, table_cb, &o);
}

static void json_history(FILE *out, const char *text)
{
	bool first = true;

	fputc('[', out);
	for (const char *p = text; p && *p;) {
		size_t len = strcspn(p, "\n");
		char item[1024];

		snprintf(item, sizeof(item), "%.*s", (int)len, p);
		fputs(first ? "" : ", ", out);
		fmt_json_str(out, item);
		first = false;
		p += len + (p[len] == '\n');
	}
	fputc(']', out);
}

static int json_cb(int64_t run_id, const struct store_governor *g, void *arg)
{
	struct gov_out *o = arg;
	FILE *out = o->out;

	fprintf(out, ", \"governor\": {\"at_ns\": %" PRId64 ", \"budget\": %.9g, \"cpu\": %.9g,"
		" \"min_scale\": %.9g, \"ticks\": %" PRIu64 ", \"lowered\": %" PRIu64
		", \"raised\": %" PRIu64 ", \"action\": ", g->at_ns, g->budget, g->cpu,
		g->min_scale, g->ticks, g->lowered, g->raised);
	fmt_json_str(out, g->action);
	fprintf(out, ", \"changed_ns\": %" PRId64 ", \"decision\": ", g->changed_ns);
	fmt_json_str(out, g->decision);
	fputs(", \"history\": ", out);
	json_history(out, g->history);
	fputs(", \"sources\": [", out);
	for (unsigned i = 0; i < g->nsrc; i++) {
		const struct store_gov_source *src = &g->src[i];

		fputs(i ? ", {\"name\": " : "{\"name\": ", out);
		fmt_json_str(out, src->name);
		fprintf(out, ", \"scale\": %.9g, \"rate\": ", src->scale);
		if (src->rate >= 0)
			fprintf(out, "%.9g", src->rate);
		else
			fputs("null", out);
		fputs(", \"unit\": ", out);
		fmt_json_str(out, src->rate >= 0 ? src->unit : NULL);
		fprintf(out, ", \"events\": %" PRIu64 "}", src->events);
	}
	fprintf(out, "], \"memory\": {\"rss_bytes\": %" PRIu64 ", \"cache_bytes\": %" PRIu64
		", \"processes\": %" PRIu64 ", \"aggregates\": %" PRIu64 "}", g->rss_bytes,
		g->cache_bytes, g->procs_held, g->aggs_held);
	fprintf(out, ", \"targets\": {\"traced\": %" PRIu64 ", \"unsampled\": %" PRIu64
		", \"skipped\": %" PRIu64 ", \"unsampled_list\": [", g->targets.traced,
		g->targets.unsampled, g->targets.skipped);
	bool first = true;
	for (const char *p = g->targets.unsampled_list; p && *p;) {
		size_t len = strcspn(p, "\n");
		char exe[4096];
		long pid = strtol(p, NULL, 10);
		const char *sp = memchr(p, ' ', len);

		snprintf(exe, sizeof(exe), "%.*s", sp ? (int)(len - (size_t)(sp + 1 - p)) : 0,
			 sp ? sp + 1 : "");
		fprintf(out, "%s{\"pid\": %ld, \"exe\": ", first ? "" : ", ", pid);
		fmt_json_str(out, exe);
		fputc('}', out);
		first = false;
		p += len + (p[len] == '\n');
	}
	fputs("]}}", out);
	(void)run_id;
	o->any = true;
	return 0;
}

int status_governor_json(FILE *out, struct store *s, int64_t run_id)
{
	struct gov_out o = { .out = out };
	int r = store_query_governor(s, run_id, json_cb, &o);

	if (!r && !o.any)
		fputs(", \"governor\": null", out);
	return r;
}
