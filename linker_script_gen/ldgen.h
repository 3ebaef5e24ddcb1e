/* linker_script_gen: hot/cold static data symbols of one binary -> linker inputs (an lld
 * --symbol-ordering-file, a GNU ld INSERT script, an objcopy section-prefix list).
 * A set is filled with ldgen_add(), classified once with ldgen_classify(), then written;
 * after classification v[] is ordered hot (hottest first), other, cold, and never changes. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LDGEN_DEFAULT_HOT_SHARE 0.99        /* hot covers this share of sampled accesses */
#define LDGEN_DEFAULT_COLD_MIN_SAMPLES 1000 /* cold needs a window with this many samples */
#define LDGEN_MAX_SYMBOLS (1u << 22)        /* more symbols than this is -E2BIG */

enum ldgen_class { LDGEN_OTHER = 0, LDGEN_HOT, LDGEN_COLD };

/* Output sections whose input sections can be moved (TLS is not: its block is fixed). */
enum ldgen_kind { LDGEN_DATA, LDGEN_RODATA, LDGEN_BSS, LDGEN_RELRO, LDGEN_NKINDS,
		  LDGEN_UNMOVABLE = LDGEN_NKINDS };

struct ldgen_sym {
	char *name;
	enum ldgen_kind kind;
	uint64_t address, size;
	uint64_t samples, est;
	enum ldgen_class cls;
	bool sampled;      /* came from the store (else only from the binary's symbols) */
	uint32_t seq;      /* order of arrival among sampled rows (ties of the fold) */
};

struct ldgen_opts {
	double hot_share;          /* (0, 1]; 0 = LDGEN_DEFAULT_HOT_SHARE */
	uint64_t cold_min_samples; /* 0 = LDGEN_DEFAULT_COLD_MIN_SAMPLES */
};

struct ldgen_set {
	struct ldgen_sym *v;
	size_t n, cap;
	size_t nsampled;           /* v[0..nsampled) came from the store */
	bool folded;               /* v[0..nsampled) sorted by (address, name), one row each */
	uint32_t arrivals;         /* rows added so far: the next row's seq */
	/* filled by ldgen_classify */
	struct ldgen_opts opts;
	uint64_t total_samples, hot_samples;
	size_t nhot, ncold;
	bool cold_decided;         /* false: the window had too few samples to call anything cold */
};

/* Kind of a link-time section name (".data", ".bss", ...), LDGEN_UNMOVABLE for TLS/other. */
enum ldgen_kind ldgen_kind_of(const char *section);
const char *ldgen_kind_section(enum ldgen_kind k);   /* ".data", ".rodata", ... */

void ldgen_init(struct ldgen_set *s);
void ldgen_free(struct ldgen_set *s);
/* Adds samples to symbol (name, address), creating it; all sampled (store) rows first,
 * then the binary's symbols (sampled false), which merge into an existing row. 0,
 * -EINVAL for a sampled row after a binary one, -ENOMEM or -E2BIG. Sampled rows are
 * appended and folded (sorted, one row per symbol) once, at the first binary symbol or
 * ldgen_classify(): O(n log n) for n rows; v[] and n are final only after either. */
int ldgen_add(struct ldgen_set *s, const char *name, const char *section, uint64_t address,
	      uint64_t size, uint64_t samples, uint64_t est, bool sampled);
/* Hot: the fewest movable symbols, hottest first, whose samples reach hot_share of all
 * samples; cold: movable symbols without samples, when the total reaches cold_min_samples.
 * Sorts v[] (hot by samples desc; ties: est desc, address, name; then other, cold by
 * address). 0 or -EINVAL (bad options). */
int ldgen_classify(struct ldgen_set *s, const struct ldgen_opts *o);

/* A name that is safe in an ld script pattern and an ordering file. */
bool ldgen_name_ok(const char *name);

struct ldgen_hdr {
	const char *binary, *build_id, *tool;  /* tool: "symbol-order", ... */
	const char *notes;                      /* extra comment lines ('\n'-separated) or NULL */
};

/* lld --symbol-ordering-file: hot symbols hottest first, then every other sampled
 * (movable) symbol by samples, '#' comment header. 0, -ENOMEM or -EIO. */
int ldgen_write_symbol_order(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h);
/* GNU ld script of INSERT commands: hot input sections in <out>.hot before <out>, cold in
 * <out>.unlikely after it, for each of .data, .rodata, .bss, .data.rel.ro. */
int ldgen_write_ld_script(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h);
/* objcopy response lines renaming .data.SYM to .data.hot.SYM / .data.unlikely.SYM. */
int ldgen_write_section_prefixes(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h);
