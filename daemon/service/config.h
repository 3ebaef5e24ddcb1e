/* The daemon's INI configuration (deploy/memprofd.conf documents every key). Invariants:
 * config_load() either fills a complete config (defaults for every key not given) or
 * reports every bad line, one line each "FILE:LINE: why"; unknown sections and keys are
 * errors, never ignored, so a typo cannot silently disable a limit. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_DEFAULT_PATH "/etc/memprofd/memprofd.conf"
#define CONFIG_DEFAULT_DB "/var/lib/memprofd/memprofd.db"
#define CONFIG_MAX_TIERS 8          /* compaction tiers ([store] compact) */
#define CONFIG_DEFAULT_CACHE (2ULL << 20)  /* [store] cache_size: SQLite's own default */
#define CONFIG_MAX_LINE 199         /* libinih's line buffer is 200 bytes */

/* A list of strings (glob patterns, build-ids), in the order given. */
struct strlist {
	char **v;
	size_t n;
};

/* One [target NAME] section: values of one key are OR'ed, different keys AND'ed;
 * an empty key does not constrain. A process is profiled when some target matches
 * and the deny list does not. */
struct target_rule {
	char *name;
	struct strlist exe, comm, cgroup, build_id;
};

struct deny_rule {
	struct strlist exe, comm, cgroup, build_id;
};

/* Old buckets compacted into coarser ones: rows older than age_s go into width_s wide
 * buckets. Tiers are sorted by age, with widths increasing. */
struct compact_tier {
	uint64_t age_s, width_s;
};

enum cfg_alloc { CFG_ALLOC_EXACT, CFG_ALLOC_SAMPLED, CFG_ALLOC_OFF };
enum cfg_access { CFG_ACCESS_AUTO, CFG_ACCESS_PEBS, CFG_ACCESS_IBS, CFG_ACCESS_SPE,
		  CFG_ACCESS_SOFT, CFG_ACCESS_OFF };

struct config {
	char *path;                    /* file it came from; NULL for defaults only */
	/* [store] */
	char *db;
	uint64_t flush_interval_ms;    /* 500; bounds what a crash loses */
	uint64_t max_db_bytes;         /* 0 = unlimited */
	uint64_t retention_s;          /* 0 = keep forever */
	struct compact_tier tiers[CONFIG_MAX_TIERS];
	unsigned ntiers;
	uint64_t maintenance_interval_s; /* retention/compaction/size checks */
	uint64_t checkpoint_interval_s;  /* PRAGMA wal_checkpoint(TRUNCATE) */
	uint64_t memory_limit_bytes;     /* aggregates held in memory while the DB is unwritable */
	uint64_t cache_bytes;            /* the writer's SQLite page cache (PRAGMA cache_size) */
	/* [sampling] */
	enum cfg_alloc alloc;
	uint64_t sample_bytes;         /* sampled mode: mean bytes between sampled allocations */
	enum cfg_access access;
	uint64_t access_freq_hz;       /* soft source, per CPU (SOFT_DEFAULT_FREQ) */
	uint64_t access_period;        /* PMU sources: events per sample; 0: each one's default */
	uint64_t exact_per_process;    /* 1: exact mode's probes per target process (no other
	                                * process traps; at most TARGET_LINKS_RATE targets a
	                                * second, each exec of a literal exe rule held ~2-20 ms
	                                * until its links exist); 0: host-wide, per binary */
	/* [governor] */
	double cpu_budget;             /* fraction of one CPU, 0.01 = 1% */
	uint64_t governor_interval_s;
	double min_scale;              /* rates never go below base * min_scale */
	/* [targets] */
	uint64_t max_processes;        /* processes traced at once */
	uint64_t rescan_interval_s;    /* /proc rescan to catch missed execs; 0 = never */
	struct target_rule *targets;
	size_t ntargets;
	struct deny_rule deny;
	/* [service] */
	uint64_t watchdog_s;           /* informational: systemd's WatchdogSec wins */
	/* [fleet]: where `memprofd push --config` sends the store (NULL: not set) */
	char *fleet_url, *fleet_host;
};

/* Defaults only (no file). */
void config_defaults(struct config *c);
/* Loads path over the defaults. 0 on success. -EINVAL when the file has errors: each
 * is one line "PATH:LINE: why" in *errors (newline separated, malloc'd, caller frees).
 * -errno when it cannot be read ("PATH: cannot read: why" in *errors). On failure c is
 * left freed (config_free is still safe to call). */
int config_load(struct config *c, const char *path, char **errors);
void config_free(struct config *c);

/* Parsers shared with tests: "500ms", "10s", "5m", "2h", "14d" (bare number: unit),
 * "1G"/"512M"/"4096" (binary multiples), "1%" or "0.5%". 0 or -EINVAL. */
int config_parse_duration(const char *s, uint64_t unit_ms, uint64_t *out_ms);
int config_parse_size(const char *s, uint64_t *out);
int config_parse_percent(const char *s, double *out);

const char *config_alloc_name(enum cfg_alloc a);
const char *config_access_name(enum cfg_access a);
