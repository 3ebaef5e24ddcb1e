/* The governor's decision rule: usage u over a budget b lowers every active source's
 * scale by (GOV_TARGET * b) / u (a source's cost is taken as proportional to its event
 * rate), at most GOV_MAX_STEP_DOWN at a time and never below the floor; GOV_RAISE_AFTER
 * calm ticks (u < GOV_LOW_WATER * b) raise the scales the same way, capped at 1. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "daemon/service/governor.h"

void governor_init(struct governor *g, const struct governor_cfg *cfg)
{
	memset(g, 0, sizeof(*g));
	g->cfg = *cfg;
	if (!(g->cfg.budget > 0))
		g->cfg.budget = 0.01;
	if (!(g->cfg.min_scale > 0) || g->cfg.min_scale > 1)
		g->cfg.min_scale = 1.0 / 64;
	snprintf(g->last, sizeof(g->last), "no measurement yet");
}

int governor_add_source(struct governor *g, const char *name)
{
	if (g->nsrc == GOV_MAX_SOURCES)
		return -ENOSPC;
	struct gov_source *s = &g->src[g->nsrc];

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->scale = 1.0;
	s->events = 0;
	return (int)g->nsrc++;
}

static double clampd(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void remember(struct governor *g)
{
	snprintf(g->history[g->hpos], GOV_TEXT, "%s", g->last);
	g->hpos = (g->hpos + 1) % GOV_HISTORY;
	if (g->hcount < GOV_HISTORY)
		g->hcount++;
}

/* Appends " name a->b" for each source whose scale changed. */
static void describe(struct governor *g, const double *old, int n)
{
	for (unsigned i = 0; i < g->nsrc && n < GOV_TEXT; i++) {
		if (old[i] == g->src[i].scale)
			continue;
		n += snprintf(g->last + n, GOV_TEXT - n, "; %s scale %.4g -> %.4g (%llu events)",
			      g->src[i].name, old[i], g->src[i].scale,
			      (unsigned long long)g->src[i].events);
	}
}

enum gov_action governor_tick(struct governor *g, uint64_t interval_ns, uint64_t cpu_ns,
			      const uint64_t *events)
{
	double old[GOV_MAX_SOURCES], b = g->cfg.budget, floor = g->cfg.min_scale;
	enum gov_action act = GOV_HOLD;
	bool any_active = false, any_change = false;

	g->ticks++;
	if (!interval_ns) {
		snprintf(g->last, sizeof(g->last), "tick %llu: empty interval, holding",
			 (unsigned long long)g->ticks);
		return GOV_HOLD;
	}
	double u = (double)cpu_ns / (double)interval_ns;

	g->last_usage = u;
	for (unsigned i = 0; i < g->nsrc; i++) {
		old[i] = g->src[i].scale;
		g->src[i].events = events ? events[i] : 0;
		any_active |= g->src[i].events > 0;
	}
	int n = snprintf(g->last, sizeof(g->last), "tick %llu: cpu %.3f%% of one CPU, budget %.3f%%",
			 (unsigned long long)g->ticks, u * 100, b * 100);
	if (u > b) {
		g->calm = 0;
		double f = clampd(GOV_TARGET * b / u, GOV_MAX_STEP_DOWN, 1.0);

		for (unsigned i = 0; i < g->nsrc; i++) {
			if (!g->src[i].events)
				continue;   /* a source without events costs nothing to lower */
			g->src[i].scale = clampd(g->src[i].scale * f, floor, 1.0);
			any_change |= g->src[i].scale != old[i];
		}
		if (any_change) {
			act = GOV_LOWER;
			g->lowered++;
			n += snprintf(g->last + n, sizeof(g->last) - n, ": over budget, lowering");
		} else {
			act = GOV_AT_FLOOR;
			n += snprintf(g->last + n, sizeof(g->last) - n, !g->nsrc ?
				      ": over budget, but no source has a rate to lower" : any_active ?
				      ": over budget with every rate at the floor (min_scale %.4g)" :
				      ": over budget, but no source had events (fixed cost)", floor);
		}
	} else if (u < GOV_LOW_WATER * b) {
		g->calm++;
		if (g->calm >= GOV_RAISE_AFTER) {
			double f = u > 0 ? clampd(GOV_TARGET * b / u, 1.0, GOV_MAX_STEP_UP) : GOV_MAX_STEP_UP;

			for (unsigned i = 0; i < g->nsrc; i++) {
				g->src[i].scale = clampd(g->src[i].scale * f, floor, 1.0);
				any_change |= g->src[i].scale != old[i];
			}
			g->calm = 0;
			if (any_change) {
				act = GOV_RAISE;
				g->raised++;
				n += snprintf(g->last + n, sizeof(g->last) - n, ": calm for %d ticks, raising",
					      GOV_RAISE_AFTER);
			}
		}
		if (!any_change)
			n += snprintf(g->last + n, sizeof(g->last) - n, ": under budget, holding");
	} else {
		g->calm = 0;
		n += snprintf(g->last + n, sizeof(g->last) - n, ": within budget, holding");
	}
	if (any_change) {
		describe(g, old, n);
		remember(g);
	}
	return act;
}

int governor_status(const struct governor *g, char *buf, size_t sz)
{
	size_t n = 0;
	int w;

#define PUT(...) do { \
		w = snprintf(buf + (n < sz ? n : sz), n < sz ? sz - n : 0, __VA_ARGS__); \
		n += w > 0 ? (size_t)w : 0; \
	} while (0)
	PUT("governor: budget %.3f%% of one CPU, last usage %.3f%%, %llu ticks, lowered %llu, raised %llu\n",
	    g->cfg.budget * 100, g->last_usage * 100, (unsigned long long)g->ticks,
	    (unsigned long long)g->lowered, (unsigned long long)g->raised);
	for (unsigned i = 0; i < g->nsrc; i++)
		PUT("  %s: scale %.4g of the configured rate%s\n", g->src[i].name, g->src[i].scale,
		    g->src[i].scale <= g->cfg.min_scale ? " (at the floor)" : "");
	PUT("  last: %s\n", g->last);
	for (unsigned k = 0; k < g->hcount; k++)
		PUT("  change: %s\n", g->history[(g->hpos + GOV_HISTORY - 1 - k) % GOV_HISTORY]);
#undef PUT
	return (int)n;
}

const char *governor_action_name(enum gov_action a)
{
	static const char *const names[] = { "hold", "lower", "raise", "at_floor" };

	return (unsigned)a < sizeof(names) / sizeof(names[0]) ? names[a] : "?";
}

int governor_history(const struct governor *g, char *buf, size_t sz)
{
	size_t n = 0;

	if (sz)
		buf[0] = '\0';
	for (unsigned k = 0; k < g->hcount; k++) {
		int w = snprintf(buf + (n < sz ? n : sz), n < sz ? sz - n : 0, "%s%s", k ? "\n" : "",
				 g->history[(g->hpos + GOV_HISTORY - 1 - k) % GOV_HISTORY]);
		n += w > 0 ? (size_t)w : 0;
	}
	return (int)n;
}
