/* INI config parsing with libinih: a table of keys (section, name, type, bounds) over
 * struct config, plus the repeatable rule sections [target NAME] and [deny]. A line
 * counter in the reader gives every error its line; inih's own syntax errors are found
 * by the same reader, so every bad line is reported, not only the first. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "daemon/service/config.h"
#include "daemon/access/src_pmu.h"

#define MAX_ERRORS 50    /* further errors are counted, not listed */

enum ktype { K_STR, K_TEXT /* any non-empty string */, K_MS, K_SEC, K_SIZE, K_PERCENT, K_UINT, K_FRACTION, K_ALLOC, K_ACCESS,
	     K_TIERS };

struct key {
	const char *section, *name;
	enum ktype type;
	size_t off;
	uint64_t min, max;      /* in the stored unit (ms, s, bytes, count) */
};

#define OFF(f) offsetof(struct config, f)
static const struct key keys[] = {
	{ "store", "db", K_STR, OFF(db), 0, 0 },
	{ "store", "flush_interval", K_MS, OFF(flush_interval_ms), 50, 60000 },
	{ "store", "max_db_size", K_SIZE, OFF(max_db_bytes), 0, UINT64_MAX },
	{ "store", "retention", K_SEC, OFF(retention_s), 0, 100ULL * 365 * 86400 },
	{ "store", "compact", K_TIERS, 0, 0, 0 },
	{ "store", "maintenance_interval", K_SEC, OFF(maintenance_interval_s), 10, 86400 },
	{ "store", "checkpoint_interval", K_SEC, OFF(checkpoint_interval_s), 1, 86400 },
	{ "store", "memory_limit", K_SIZE, OFF(memory_limit_bytes), 1 << 20, UINT64_MAX },
	{ "store", "cache_size", K_SIZE, OFF(cache_bytes), 64 << 10, 1ULL << 40 },
	{ "sampling", "alloc", K_ALLOC, OFF(alloc), 0, 0 },
	{ "sampling", "sample_bytes", K_SIZE, OFF(sample_bytes), 1, 1ULL << 40 },
	{ "sampling", "access", K_ACCESS, OFF(access), 0, 0 },
	{ "sampling", "access_freq", K_UINT, OFF(access_freq_hz), 1, 100000 },
	{ "sampling", "access_period", K_UINT, OFF(access_period), 0, 1ULL << 32 },
	{ "sampling", "exact_per_process", K_UINT, OFF(exact_per_process), 0, 1 },   /* issue 18 */
	{ "governor", "cpu_budget", K_PERCENT, OFF(cpu_budget), 0, 0 },
	{ "governor", "interval", K_SEC, OFF(governor_interval_s), 1, 3600 },
	{ "governor", "min_scale", K_FRACTION, OFF(min_scale), 0, 0 },
	{ "targets", "max_processes", K_UINT, OFF(max_processes), 1, 16384 },
	{ "targets", "rescan_interval", K_SEC, OFF(rescan_interval_s), 0, 86400 },
	{ "service", "watchdog", K_SEC, OFF(watchdog_s), 0, 3600 },
	{ "fleet", "url", K_TEXT, OFF(fleet_url), 0, 0 },     /* issue 20: memprofd push */
	{ "fleet", "host", K_TEXT, OFF(fleet_host), 0, 0 },
};

static const char *const alloc_names[] = { "exact", "sampled", "off" };
static const char *const access_names[] = { "auto", "pebs", "ibs", "spe", "soft", "off" };

const char *config_alloc_name(enum cfg_alloc a)
{
	return (unsigned)a < 3 ? alloc_names[a] : "?";
}

const char *config_access_name(enum cfg_access a)
{
	return (unsigned)a < 6 ? access_names[a] : "?";
}

void config_defaults(struct config *c)
{
	*c = (struct config){
		.db = strdup(CONFIG_DEFAULT_DB),
		.flush_interval_ms = 500,
		.max_db_bytes = 1ULL << 30,
		.retention_s = 14 * 86400,
		.tiers = { { 3600, 600 }, { 86400, 3600 }, { 7 * 86400, 86400 } },
		.ntiers = 3,
		.maintenance_interval_s = 600,
		.checkpoint_interval_s = 60,
		.memory_limit_bytes = 256ULL << 20,
		.cache_bytes = CONFIG_DEFAULT_CACHE,
		.alloc = CFG_ALLOC_SAMPLED,
		.sample_bytes = 512 * 1024,
		.access = CFG_ACCESS_AUTO,
		.access_freq_hz = SOFT_DEFAULT_FREQ,   /* as `memprofd record` */
		.access_period = 0,                    /* each PMU source's own default */
		.cpu_budget = 0.01,
		.governor_interval_s = 10,
		.min_scale = 1.0 / 64,
		.max_processes = 1024,
		.rescan_interval_s = 60,
		.watchdog_s = 30,
	};
}

/* ---- value parsers ---- */

static int parse_u64(const char *s, const char **end, uint64_t *out)
{
	char *e;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (errno)
		return -EINVAL;
	*out = v;
	*end = e;
	return 0;
}

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -EINVAL : 0;
}

int config_parse_duration(const char *s, uint64_t unit_ms, uint64_t *out_ms)
{
	static const struct { const char *sfx; uint64_t ms; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 },
		{ "w", 7 * 86400000ULL },
	};
	const char *end;
	uint64_t v;

	if (parse_u64(s, &end, &v))
		return -EINVAL;
	if (!*end)
		return mul_ok(v, unit_ms, out_ms);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].sfx))
			return mul_ok(v, units[i].ms, out_ms);
	return -EINVAL;
}

int config_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int shift;

	if (parse_u64(s, &end, &v))
		return -EINVAL;
	switch (*end) {
	case '\0': shift = 0; break;
	case 'K': case 'k': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	default: return -EINVAL;
	}
	if (*end && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
		return -EINVAL;
	return mul_ok(v, 1ULL << shift, out);
}

int config_parse_percent(const char *s, double *out)
{
	char *end;

	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || strcmp(end, "%") || !isfinite(v) || v <= 0 || v > 100 * 64)
		return -EINVAL;
	*out = v / 100.0;
	return 0;
}

/* ---- the parse state ---- */

struct parse {
	struct config *c;
	const char *path;
	FILE *f;
	unsigned line;
	unsigned bad_line;       /* last line the reader already reported */
	char *errs;
	size_t errs_len;
	unsigned nerr;
	bool oom;
	bool tiers_given;
	unsigned retention_line, compact_line;   /* where cross-checked keys were set */
};

static void __attribute__((format(printf, 3, 4))) error_at(struct parse *p, unsigned line,
							     const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	p->nerr++;
	if (p->nerr > MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->nerr == MAX_ERRORS)
		snprintf(msg, sizeof(msg), "too many errors, stopping the list here");
	n = snprintf(NULL, 0, "%s:%u: %s\n", p->path, line, msg);
	char *e = realloc(p->errs, p->errs_len + n + 1);
	if (!e) {
		p->oom = true;
		return;
	}
	p->errs = e;
	snprintf(p->errs + p->errs_len, n + 1, "%s:%u: %s\n", p->path, line, msg);
	p->errs_len += n;
}

static char *skip_ws(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

/* The reader: counts lines and reports the lines inih would reject, with the reason. */
static char *reader(char *str, int num, void *stream)
{
	struct parse *p = stream;

	if (!fgets(str, num, p->f))
		return NULL;
	p->line++;
	size_t len = strlen(str);
	if (len == (size_t)num - 1 && str[len - 1] != '\n' && !feof(p->f)) {
		int ch;

		error_at(p, p->line, "line longer than %d characters", CONFIG_MAX_LINE);
		p->bad_line = p->line;
		while ((ch = fgetc(p->f)) != EOF && ch != '\n')
			;
		str[0] = '\n';     /* hand inih an empty line instead */
		str[1] = '\0';
		return str;
	}
	char *s = skip_ws(str);
	if (!*s || *s == ';' || *s == '#')
		return str;
	if (*s == '[') {
		if (!strchr(s, ']')) {
			error_at(p, p->line, "section header without ']'");
			p->bad_line = p->line;
		}
		return str;
	}
	if (!strpbrk(s, "=:") && s == str) {
		error_at(p, p->line, "expected 'key = value', a [section] or a comment");
		p->bad_line = p->line;
	}
	return str;
}

static int list_add(struct parse *p, struct strlist *l, const char *v)
{
	char **nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
	char *d = strdup(v);

	if (!nv || !d) {
		free(d);
		if (nv)
			l->v = nv;
		p->oom = true;
		return -ENOMEM;
	}
	l->v = nv;
	l->v[l->n++] = d;
	return 0;
}

static void list_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (struct strlist){0};
}

static bool valid_build_id(const char *v)
{
	size_t n = strlen(v);

	if (n < 2 || n > 128 || n % 2)
		return false;
	for (const char *q = v; *q; q++)
		if (!isxdigit((unsigned char)*q))
			return false;
	return true;
}

/* A rule key: exe/comm/cgroup are fnmatch patterns, build_id is hex. */
static int rule_key(struct parse *p, struct strlist *exe, struct strlist *comm,
		    struct strlist *cgroup, struct strlist *bid, const char *section,
		    const char *name, const char *value)
{
	if (!*value) {
		error_at(p, p->line, "[%s] %s: empty value", section, name);
		return 0;
	}
	if (!strcmp(name, "exe")) {
		if (value[0] != '/' && value[0] != '*' && value[0] != '?' && value[0] != '[') {
			error_at(p, p->line, "[%s] exe: '%s' is not an absolute path glob", section, value);
			return 0;
		}
		return list_add(p, exe, value);
	}
	if (!strcmp(name, "comm"))
		return list_add(p, comm, value);
	if (!strcmp(name, "cgroup")) {
		if (value[0] != '/' && value[0] != '*') {
			error_at(p, p->line, "[%s] cgroup: '%s' is not a cgroup path glob (starts with /)",
				 section, value);
			return 0;
		}
		return list_add(p, cgroup, value);
	}
	if (!strcmp(name, "build_id")) {
		if (!valid_build_id(value)) {
			error_at(p, p->line, "[%s] build_id: '%s' is not a hex build-id", section, value);
			return 0;
		}
		char lower[129];
		size_t i;

		for (i = 0; value[i]; i++)
			lower[i] = (char)tolower((unsigned char)value[i]);
		lower[i] = '\0';
		return list_add(p, bid, lower);
	}
	error_at(p, p->line, "[%s] unknown key '%s' (expected exe, comm, cgroup or build_id)",
		 section, name);
	return 0;
}

static struct target_rule *target_get(struct parse *p, const char *tname)
{
	struct config *c = p->c;

	for (size_t i = 0; i < c->ntargets; i++)
		if (!strcmp(c->targets[i].name, tname))
			return &c->targets[i];
	struct target_rule *t = realloc(c->targets, (c->ntargets + 1) * sizeof(*t));
	if (!t) {
		p->oom = true;
		return NULL;
	}
	c->targets = t;
	t = &c->targets[c->ntargets];
	*t = (struct target_rule){ .name = strdup(tname) };
	if (!t->name) {
		p->oom = true;
		return NULL;
	}
	c->ntargets++;
	return t;
}

/* "1h:10m 1d:1h": AGE:WIDTH pairs, separated by spaces or commas. */
static int parse_tiers(struct parse *p, const char *value)
{
	struct config *c = p->c;
	char buf[CONFIG_MAX_LINE + 1];
	char *save = NULL;
	unsigned n = 0;
	struct compact_tier t[CONFIG_MAX_TIERS];

	snprintf(buf, sizeof(buf), "%s", value);
	if (!strcmp(buf, "off")) {
		c->ntiers = 0;
		return 0;
	}
	for (char *tok = strtok_r(buf, " ,\t", &save); tok; tok = strtok_r(NULL, " ,\t", &save)) {
		char *colon = strchr(tok, ':');
		uint64_t age, width;

		if (n == CONFIG_MAX_TIERS) {
			error_at(p, p->line, "[store] compact: at most %d tiers", CONFIG_MAX_TIERS);
			return -EINVAL;
		}
		if (!colon) {
			error_at(p, p->line, "[store] compact: '%s' is not AGE:WIDTH (e.g. 1d:1h)", tok);
			return -EINVAL;
		}
		*colon = '\0';
		if (config_parse_duration(tok, 1000, &age) || config_parse_duration(colon + 1, 1000, &width) ||
		    age % 1000 || width % 1000) {
			error_at(p, p->line, "[store] compact: '%s:%s' is not AGE:WIDTH in whole seconds",
				 tok, colon + 1);
			return -EINVAL;
		}
		age /= 1000;
		width /= 1000;
		/* The daemon rewrites a bucket until it closes: compacting younger data would
		 * race with its own flushes. */
		if (age < 600 || width < 60 || width > age) {
			error_at(p, p->line, "[store] compact: %s:%s: need AGE >= 10m, 1m <= WIDTH <= AGE",
				 tok, colon + 1);
			return -EINVAL;
		}
		if (n && (age <= t[n - 1].age_s || width <= t[n - 1].width_s || width % t[n - 1].width_s)) {
			error_at(p, p->line, "[store] compact: tiers must grow in age and in width, each "
				 "width a multiple of the previous one");
			return -EINVAL;
		}
		t[n++] = (struct compact_tier){ age, width };
	}
	if (!n) {
		error_at(p, p->line, "[store] compact: empty (write 'off' to disable compaction)");
		return -EINVAL;
	}
	memcpy(c->tiers, t, sizeof(t[0]) * n);
	c->ntiers = n;
	return 0;
}

static int set_enum(struct parse *p, const struct key *k, const char *value,
		    const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(value, names[i])) {
			*(int *)((char *)p->c + k->off) = (int)i;
			return 0;
		}
	char list[128] = "";
	for (unsigned i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 i ? (i + 1 == n ? " or " : ", ") : "", names[i]);
	error_at(p, p->line, "[%s] %s: expected %s, got '%s'", k->section, k->name, list, value);
	return -EINVAL;
}

static void bound_error(struct parse *p, const struct key *k, const char *value, const char *what)
{
	error_at(p, p->line, "[%s] %s: '%s' %s", k->section, k->name, value, what);
}

static int set_key(struct parse *p, const struct key *k, const char *value)
{
	char *base = (char *)p->c + k->off;
	uint64_t v = 0, ms;
	double d;

	switch (k->type) {
	case K_STR:
	case K_TEXT: {
		if (!*value || (k->type == K_STR && value[0] != '/')) {
			bound_error(p, k, value, k->type == K_STR ? "is not an absolute path" : "is empty");
			return -EINVAL;
		}
		char *dup = strdup(value);
		if (!dup) {
			p->oom = true;
			return -ENOMEM;
		}
		free(*(char **)base);
		*(char **)base = dup;
		return 0;
	}
	case K_MS: case K_SEC:
		if (config_parse_duration(value, k->type == K_MS ? 1 : 1000, &ms)) {
			bound_error(p, k, value, "is not a duration (e.g. 500ms, 10s, 5m, 2h, 14d)");
			return -EINVAL;
		}
		if (k->type == K_SEC && ms % 1000) {
			bound_error(p, k, value, "is not a whole number of seconds");
			return -EINVAL;
		}
		v = k->type == K_SEC ? ms / 1000 : ms;
		break;
	case K_SIZE:
		if (config_parse_size(value, &v)) {
			bound_error(p, k, value, "is not a size (e.g. 4096, 512K, 64M, 1G)");
			return -EINVAL;
		}
		break;
	case K_UINT: {
		const char *end;

		if (parse_u64(value, &end, &v) || *end) {
			bound_error(p, k, value, "is not a non-negative integer");
			return -EINVAL;
		}
		break;
	}
	case K_PERCENT:
		if (config_parse_percent(value, &d) || d < 0.0001) {
			bound_error(p, k, value, "is not a percentage of one CPU between 0.01% and 6400% (e.g. 1%)");
			return -EINVAL;
		}
		*(double *)base = d;
		return 0;
	case K_FRACTION: {
		char *end;

		errno = 0;
		d = strtod(value, &end);
		if (errno || end == value || *end || !(d > 0 && d <= 1)) {
			bound_error(p, k, value, "is not a fraction in (0, 1] (e.g. 0.015625)");
			return -EINVAL;
		}
		*(double *)base = d;
		return 0;
	}
	case K_ALLOC:
		return set_enum(p, k, value, alloc_names, 3);
	case K_ACCESS:
		return set_enum(p, k, value, access_names, 6);
	case K_TIERS:
		p->tiers_given = true;
		p->compact_line = p->line;
		return parse_tiers(p, value);
	}
	if (v < k->min || v > k->max) {
		char why[96];

		snprintf(why, sizeof(why), "is out of range [%llu, %llu]",
			 (unsigned long long)k->min, (unsigned long long)k->max);
		bound_error(p, k, value, why);
		return -EINVAL;
	}
	*(uint64_t *)base = v;
	if (k->off == OFF(retention_s))
		p->retention_line = p->line;
	return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;

	if (p->line == p->bad_line)
		return 1;      /* already reported by the reader */
	if (!strncmp(section, "target", 6) && (section[6] == ' ' || section[6] == '\0')) {
		const char *tname = section[6] ? section + 7 : "";

		while (*tname == ' ')
			tname++;
		if (!*tname) {
			error_at(p, p->line, "[target] needs a name: [target NAME]");
			return 1;
		}
		struct target_rule *t = target_get(p, tname);
		if (t)
			rule_key(p, &t->exe, &t->comm, &t->cgroup, &t->build_id, section, name, value);
		return 1;
	}
	if (!strcmp(section, "deny")) {
		struct deny_rule *d = &p->c->deny;

		rule_key(p, &d->exe, &d->comm, &d->cgroup, &d->build_id, section, name, value);
		return 1;
	}
	bool section_known = false;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(keys[i].section, section))
			continue;
		section_known = true;
		if (!strcmp(keys[i].name, name)) {
			set_key(p, &keys[i], value);
			return 1;
		}
	}
	if (!*section)
		error_at(p, p->line, "'%s' is outside any section", name);
	else if (!section_known)
		error_at(p, p->line, "unknown section [%s]", section);
	else
		error_at(p, p->line, "[%s] unknown key '%s'", section, name);
	return 1;
}

void config_free(struct config *c)
{
	free(c->path);
	free(c->db);
	free(c->fleet_url);
	free(c->fleet_host);
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target_rule *t = &c->targets[i];

		free(t->name);
		list_free(&t->exe);
		list_free(&t->comm);
		list_free(&t->cgroup);
		list_free(&t->build_id);
	}
	free(c->targets);
	list_free(&c->deny.exe);
	list_free(&c->deny.comm);
	list_free(&c->deny.cgroup);
	list_free(&c->deny.build_id);
	*c = (struct config){0};
}

/* Checks that need several keys. */
static void cross_check(struct parse *p)
{
	struct config *c = p->c;
	unsigned line = p->retention_line ? p->retention_line : p->compact_line;

	if (c->retention_s && c->ntiers && c->tiers[c->ntiers - 1].age_s >= c->retention_s)
		error_at(p, line, "[store] retention (%llus) must be longer than the oldest "
			 "compaction tier (%llus)", (unsigned long long)c->retention_s,
			 (unsigned long long)c->tiers[c->ntiers - 1].age_s);
	if (c->retention_s && c->retention_s < 3600)
		error_at(p, p->retention_line, "[store] retention: at least 1h (the daemon rewrites open "
			 "buckets for up to a minute)");
}

int config_load(struct config *c, const char *path, char **errors)
{
	struct parse p = { .c = c, .path = path };
	int r;

	*errors = NULL;
	config_defaults(c);
	c->path = strdup(path);
	p.f = fopen(path, "re");
	struct stat st;
	if (p.f && fstat(fileno(p.f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(p.f);
		p.f = NULL;
		errno = EISDIR;
	}
	if (!p.f) {
		r = -errno;
		if (asprintf(errors, "%s: cannot read the config: %s\n", path, strerror(-r)) < 0)
			*errors = NULL;
		config_free(c);
		return r;
	}
	r = ini_parse_stream(reader, &p, handler, &p);
	if (ferror(p.f)) {
		int e = errno ? errno : EIO;

		error_at(&p, p.line, "read error: %s", strerror(e));
	} else if (r > 0 && p.nerr == 0) {
		error_at(&p, (unsigned)r, "syntax error");
	} else if (r < 0) {
		error_at(&p, 0, "out of memory while parsing");
	}
	fclose(p.f);
	if (!p.nerr)
		cross_check(&p);
	if (p.oom && !p.nerr)
		error_at(&p, p.line, "out of memory");
	if (p.nerr) {
		*errors = p.errs;
		config_free(c);
		return p.oom && !p.errs ? -ENOMEM : -EINVAL;
	}
	free(p.errs);
	return 0;
}
