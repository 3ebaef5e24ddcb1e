/* Overhead governor: pure logic that keeps the daemon under its CPU budget by scaling
 * the sampling rates of its event sources. Invariants: every scale stays in
 * [min_scale, 1] (1 = the configured rate); a decrease happens on the first tick over
 * budget, an increase only after GOV_RAISE_AFTER consecutive calm ticks (hysteresis),
 * so rates do not oscillate around the budget. The caller measures; this decides. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define GOV_MAX_SOURCES 4
#define GOV_TARGET 0.8          /* aim at 80% of the budget when scaling */
#define GOV_LOW_WATER 0.5       /* below 50% of the budget a tick counts as calm */
#define GOV_RAISE_AFTER 3       /* calm ticks in a row before raising rates */
#define GOV_MAX_STEP_DOWN 0.25  /* at most 4x lower per tick */
#define GOV_MAX_STEP_UP 2.0     /* at most 2x higher per tick */
#define GOV_HISTORY 8           /* decisions kept for `memprofd query status` */
#define GOV_TEXT 320

struct governor_cfg {
	double budget;          /* fraction of one CPU (0.01 = 1%) */
	double min_scale;       /* floor for every scale, in (0, 1] */
};

struct gov_source {
	char name[24];          /* "alloc", "access" */
	double scale;           /* multiplier of the configured rate */
	uint64_t events;        /* events in the last tick */
};

enum gov_action { GOV_HOLD, GOV_LOWER, GOV_RAISE, GOV_AT_FLOOR };

struct governor {
	struct governor_cfg cfg;
	struct gov_source src[GOV_MAX_SOURCES];
	unsigned nsrc;
	unsigned calm;          /* consecutive calm ticks */
	uint64_t ticks, lowered, raised;
	double last_usage;      /* CPU fraction of the last tick */
	char history[GOV_HISTORY][GOV_TEXT];   /* ring of changed decisions, newest at hpos-1 */
	unsigned hpos, hcount;
	char last[GOV_TEXT];    /* the last tick's decision, changed or not */
};

/* Clamps cfg into sane bounds (budget > 0, min_scale in (0, 1]). */
void governor_init(struct governor *g, const struct governor_cfg *cfg);
/* Adds a source at scale 1; returns its index or -ENOSPC. */
int governor_add_source(struct governor *g, const char *name);

/* One tick: interval_ns of wall time in which the daemon used cpu_ns of CPU (its own
 * threads, plus the BPF programs' run time where the caller counts it), and source i
 * produced events[i] events. Scales the sources with events proportionally so that the
 * projected usage is GOV_TARGET of the budget. */
enum gov_action governor_tick(struct governor *g, uint64_t interval_ns, uint64_t cpu_ns,
			      const uint64_t *events);

static inline double governor_scale(const struct governor *g, unsigned i)
{
	return i < g->nsrc ? g->src[i].scale : 1.0;
}

/* Multi-line text for `memprofd query status`: budget, usage, scales and the recent
 * decisions, newest first. Writes at most sz bytes; returns the length it wanted. */
int governor_status(const struct governor *g, char *buf, size_t sz);
/* The recent rate changes, newest first, one a line (no trailing newline); same
 * truncation rule. For the store's governor record. */
int governor_history(const struct governor *g, char *buf, size_t sz);
const char *governor_action_name(enum gov_action a);   /* "hold", "lower", ... */
