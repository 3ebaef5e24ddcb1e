/* Hot/cold selection over a binary's static data symbols and the three linker-input
 * writers. Pure: no store, no ELF; ldgen_export.c feeds it. Invariant after
 * ldgen_classify(): v[0..nhot) are the hot symbols hottest first, cold ones last. */
#include "linker_script_gen/ldgen.h"
#include "base/array.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_sections[LDGEN_NKINDS] = {
	[LDGEN_DATA] = ".data", [LDGEN_RODATA] = ".rodata", [LDGEN_BSS] = ".bss",
	[LDGEN_RELRO] = ".data.rel.ro",
};

/* Input-section names gcc/clang -fdata-sections give a symbol S of each output section:
 * "%s" is S. PIE data with relocations goes to .data.rel(.local).S. */
static const char *const kind_inputs[LDGEN_NKINDS][4] = {
	[LDGEN_DATA] = { ".data.%s", ".data.rel.%s", ".data.rel.local.%s", NULL },
	[LDGEN_RODATA] = { ".rodata.%s", NULL },
	[LDGEN_BSS] = { ".bss.%s", NULL },
	[LDGEN_RELRO] = { ".data.rel.ro.%s", ".data.rel.ro.local.%s", NULL },
};

enum ldgen_kind ldgen_kind_of(const char *section)
{
	for (int k = 0; section && k < LDGEN_NKINDS; k++)
		if (!strcmp(section, kind_sections[k]))
			return (enum ldgen_kind)k;
	return LDGEN_UNMOVABLE;
}

const char *ldgen_kind_section(enum ldgen_kind k)
{
	return k < LDGEN_NKINDS ? kind_sections[k] : "(tls)";
}

void ldgen_init(struct ldgen_set *s)
{
	memset(s, 0, sizeof(*s));
}

void ldgen_free(struct ldgen_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
	ldgen_init(s);
}

bool ldgen_name_ok(const char *name)
{
	/* Glob characters, spaces, quotes and comment openers would change an ld pattern. */
	if (!name || !*name || strlen(name) > 4096)
		return false;
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || strchr("*?[]\\\"'(){};,#=/", *p))
			return false;
	return true;
}

static int cmp_addr_name(const void *a, const void *b)
{
	const struct ldgen_sym *x = a, *y = b;

	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Ties keep the order of arrival, so the fold merges rows as arrival order would. */
static int cmp_addr_name_seq(const void *a, const void *b)
{
	const struct ldgen_sym *x = a, *y = b;
	int c = cmp_addr_name(a, b);

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Merges a later row of y's symbol into y. */
static void merge_into(struct ldgen_sym *y, uint64_t size, enum ldgen_kind kind,
		       uint64_t samples, uint64_t est)
{
	y->samples += samples;
	y->est += est;
	if (size > y->size)
		y->size = size;
	if (y->kind == LDGEN_UNMOVABLE)
		y->kind = kind;
}

/* Sorts the sampled rows by (address, name) and keeps one row per symbol, its samples
 * summed, its size the largest, its kind the first movable one in arrival order. */
static void fold_sampled(struct ldgen_set *s)
{
	size_t w = 0;

	if (s->folded)
		return;
	s->folded = true;
	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(s->v[0]), cmp_addr_name_seq);
	for (size_t i = 1; i < s->n; i++) {
		struct ldgen_sym *x = &s->v[i];

		if (!cmp_addr_name(&s->v[w], x)) {
			merge_into(&s->v[w], x->size, x->kind, x->samples, x->est);
			free(x->name);
		} else {
			s->v[++w] = *x;
		}
	}
	s->n = s->nsampled = w + 1;
}

/* (name, address) among the folded sampled prefix v[0..nsampled). */
static struct ldgen_sym *find_sampled(struct ldgen_set *s, const char *name, uint64_t address)
{
	struct ldgen_sym key = { .name = (char *)name, .address = address };

	return s->nsampled ? bsearch(&key, s->v, s->nsampled, sizeof(s->v[0]), cmp_addr_name)
			   : NULL;
}

static int append(struct ldgen_set *s, const char *name, const char *section, uint64_t address,
		  uint64_t size, uint64_t samples, uint64_t est, bool sampled)
{
	if (s->n >= LDGEN_MAX_SYMBOLS && !s->folded && sampled)
		fold_sampled(s);   /* repeats of one symbol do not count against the limit */
	if (s->n >= LDGEN_MAX_SYMBOLS)
		return -E2BIG;
	if (ARRAY_GROW(s->v, s->cap, s->n, 256) < 0)
		return -ENOMEM;
	char *dup = strdup(name);

	if (!dup)
		return -ENOMEM;
	s->v[s->n++] = (struct ldgen_sym){
		.name = dup, .kind = ldgen_kind_of(section), .address = address, .size = size,
		.samples = samples, .est = est, .sampled = sampled, .seq = s->arrivals++,
	};
	if (sampled) {
		s->nsampled++;
		s->folded = false;
	}
	return 0;
}

int ldgen_add(struct ldgen_set *s, const char *name, const char *section, uint64_t address,
	      uint64_t size, uint64_t samples, uint64_t est, bool sampled)
{
	/* Store rows come first (sampled) and are appended; the binary's own symbols come
	 * next: a symbol of the binary that was sampled is already here and only needs its
	 * kind, found by binary search in the folded prefix. */
	struct ldgen_sym *y;

	if (sampled) {
		if (s->nsampled < s->n)
			return -EINVAL;   /* sampled rows must all come before the binary's */
		return append(s, name, section, address, size, samples, est, true);
	}
	fold_sampled(s);
	y = find_sampled(s, name, address);
	if (!y)
		return append(s, name, section, address, size, samples, est, false);
	merge_into(y, size, ldgen_kind_of(section), samples, est);
	return 0;
}

static int cmp_heat(const void *a, const void *b)
{
	const struct ldgen_sym *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if (x->est != y->est)
		return x->est > y->est ? -1 : 1;
	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_final(const void *a, const void *b)
{
	const struct ldgen_sym *x = a, *y = b;
	static const int rank[] = { [LDGEN_HOT] = 0, [LDGEN_OTHER] = 1, [LDGEN_COLD] = 2 };

	if (rank[x->cls] != rank[y->cls])
		return rank[x->cls] - rank[y->cls];
	if (x->cls == LDGEN_HOT)
		return cmp_heat(a, b);
	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	return strcmp(x->name, y->name);
}

int ldgen_classify(struct ldgen_set *s, const struct ldgen_opts *o)
{
	struct ldgen_opts opts = o ? *o : (struct ldgen_opts){ 0 };

	if (opts.hot_share == 0)
		opts.hot_share = LDGEN_DEFAULT_HOT_SHARE;
	if (!(opts.hot_share > 0 && opts.hot_share <= 1))
		return -EINVAL;
	if (opts.cold_min_samples == 0)
		opts.cold_min_samples = LDGEN_DEFAULT_COLD_MIN_SAMPLES;
	fold_sampled(s);
	s->opts = opts;
	s->total_samples = s->hot_samples = 0;
	s->nhot = s->ncold = 0;
	for (size_t i = 0; i < s->n; i++) {
		s->v[i].cls = LDGEN_OTHER;
		s->total_samples += s->v[i].samples;
	}
	if (s->n)
		qsort(s->v, s->n, sizeof(s->v[0]), cmp_heat);
	/* The smallest covering set is a prefix of the samples-descending order. Samples on
	 * unmovable (TLS) symbols count in the total but cannot be placed. */
	double want = opts.hot_share * (double)s->total_samples;

	for (size_t i = 0; i < s->n && s->v[i].samples && (double)s->hot_samples < want; i++) {
		s->hot_samples += s->v[i].samples;
		if (s->v[i].kind != LDGEN_UNMOVABLE) {
			s->v[i].cls = LDGEN_HOT;
			s->nhot++;
		}
	}
	s->cold_decided = s->total_samples >= opts.cold_min_samples;
	for (size_t i = 0; s->cold_decided && i < s->n; i++)
		if (!s->v[i].samples && s->v[i].kind != LDGEN_UNMOVABLE) {
			s->v[i].cls = LDGEN_COLD;
			s->ncold++;
		}
	if (s->n)
		qsort(s->v, s->n, sizeof(s->v[0]), cmp_final);
	s->folded = false;   /* no longer by address: a later ldgen_add sorts again */
	return 0;
}

/* The header both formats share, each line prefixed by open (and closed by close). */
static void header(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h,
		   const char *open, const char *close)
{
	size_t col = 0;

	fprintf(f, "%smemprofd export %s for %s (build-id %s)%s\n", open, h->tool,
		h->binary ? h->binary : "?", h->build_id && *h->build_id ? h->build_id : "none",
		close);
	fprintf(f, "%shot: %zu symbols, the fewest covering >= %.4g%% of %" PRIu64
		" sampled accesses (they have %" PRIu64 ")%s\n", open, s->nhot,
		s->opts.hot_share * 100, s->total_samples, s->hot_samples, close);
	if (s->cold_decided)
		fprintf(f, "%scold: %zu symbols with no sample in a window of %" PRIu64
			" samples (>= %" PRIu64 " needed)%s\n", open, s->ncold, s->total_samples,
			s->opts.cold_min_samples, close);
	else
		fprintf(f, "%scold: none decided: %" PRIu64 " samples, fewer than the %" PRIu64
			" a cold call needs%s\n", open, s->total_samples, s->opts.cold_min_samples,
			close);
	for (size_t i = 0; i < s->nhot; i++)
		fprintf(f, "%s  hot %-40s %-13s %8" PRIu64 " bytes %8" PRIu64 " samples%s\n", open,
			s->v[i].name, ldgen_kind_section(s->v[i].kind), s->v[i].size,
			s->v[i].samples, close);
	for (size_t i = s->n - s->ncold; i < s->n; i++) {
		size_t len = strlen(s->v[i].name) + 1;

		if (col && col + len > 96) {
			fprintf(f, "%s\n", close);
			col = 0;
		}
		if (!col)
			col = (size_t)fprintf(f, "%s  cold", open);
		col += (size_t)fprintf(f, " %s", s->v[i].name);
	}
	if (col)
		fprintf(f, "%s\n", close);
	for (const char *p = h->notes; p && *p;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		fprintf(f, "%s%.*s%s\n", open, len, p, close);
		p += len + (nl != NULL);
	}
}

/* Sampled symbols below the hot share: most samples first (ties: est, address). */
static int by_samples_desc(const void *a, const void *b)
{
	const struct ldgen_sym *x = *(const struct ldgen_sym *const *)a;
	const struct ldgen_sym *y = *(const struct ldgen_sym *const *)b;

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	if (x->est != y->est)
		return x->est > y->est ? -1 : 1;
	return x->address < y->address ? -1 : x->address > y->address;
}

/* Every sampled symbol, hottest first: the hot ones, then the other sampled ones, so
 * that nothing sampled stays among the unsampled (lld places listed symbols first, in
 * the file's order). */
int ldgen_write_symbol_order(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h)
{
	const struct ldgen_sym **rest = NULL;
	size_t nrest = 0;

	if (s->n > s->nhot && !(rest = calloc(s->n - s->nhot, sizeof(*rest))))
		return -ENOMEM;
	for (size_t i = s->nhot; i < s->n; i++)
		if (s->v[i].samples && s->v[i].kind != LDGEN_UNMOVABLE)
			rest[nrest++] = &s->v[i];
	if (nrest)
		qsort(rest, nrest, sizeof(*rest), by_samples_desc);
	header(f, s, h, "# ", "");
	fprintf(f, "# then %zu more sampled symbols below the hot share, most samples first\n",
		nrest);
	fputs("# use: -fdata-sections, then link with -fuse-ld=lld "
	      "-Wl,--symbol-ordering-file=THIS\n", f);
	for (size_t i = 0; i < s->nhot; i++)
		if (ldgen_name_ok(s->v[i].name))
			fprintf(f, "%s\n", s->v[i].name);
	for (size_t i = 0; i < nrest; i++)
		if (ldgen_name_ok(rest[i]->name))
			fprintf(f, "%s\n", rest[i]->name);
	free(rest);
	return ferror(f) ? -EIO : 0;
}

/* One INSERT command placing the class's input sections of kind k; false if none. */
static bool script_block(FILE *f, const struct ldgen_set *s, enum ldgen_kind k,
			 enum ldgen_class cls, const char *where, const char *anchor)
{
	const char *out = kind_sections[k];
	size_t lo = cls == LDGEN_HOT ? 0 : s->n - s->ncold;
	size_t hi = cls == LDGEN_HOT ? s->nhot : s->n;
	bool any = false;

	for (size_t i = lo; i < hi && !any; i++)
		any = s->v[i].kind == k && ldgen_name_ok(s->v[i].name);
	if (!any)
		return false;
	fprintf(f, "SECTIONS\n{\n  %s%s :\n  {\n", out, cls == LDGEN_HOT ? ".hot" : ".unlikely");
	for (size_t i = lo; i < hi; i++) {
		if (s->v[i].kind != k || !ldgen_name_ok(s->v[i].name))
			continue;
		fputs("    *(", f);
		for (int j = 0; kind_inputs[k][j]; j++) {
			fputs(j ? " " : "", f);
			fprintf(f, kind_inputs[k][j], s->v[i].name);
		}
		fputs(")\n", f);
	}
	fprintf(f, "  }\n}\nINSERT %s %s;\n\n", where, anchor);
	return true;
}

int ldgen_write_ld_script(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h)
{
	header(f, s, h, "/* ", " */");
	fputs("/* use: objects built with -fdata-sections, linked by GNU ld (bfd) with\n"
	      "   -Wl,-T,THIS. INSERT keeps the linker's own default script (PIE or not) and\n"
	      "   only adds <out>.hot right before <out> (after .rodata, which a segment start\n"
	      "   precedes) and <out>.unlikely right after <out> (and .rodata.hot);\n"
	      "   the input sections named here are assigned before the default wildcards. */\n\n",
	      f);
	for (int k = 0; k < LDGEN_NKINDS; k++) {
		const char *out = kind_sections[k];
		char hot[32];

		/* The default scripts start the read-only segment with an assignment right
		 * before .rodata; INSERT BEFORE .rodata would land ahead of it, in the
		 * executable segment. So hot read-only data follows .rodata's own leftovers
		 * (crt objects, merged strings) instead of preceding them. */
		if (k == LDGEN_RODATA) {
			bool h = script_block(f, s, LDGEN_RODATA, LDGEN_HOT, "AFTER", out);

			snprintf(hot, sizeof(hot), "%s.hot", out);
			script_block(f, s, LDGEN_RODATA, LDGEN_COLD, "AFTER", h ? hot : out);
			continue;
		}
		script_block(f, s, (enum ldgen_kind)k, LDGEN_HOT, "BEFORE", out);
		script_block(f, s, (enum ldgen_kind)k, LDGEN_COLD, "AFTER", out);
	}
	return ferror(f) ? -EIO : 0;
}

int ldgen_write_section_prefixes(FILE *f, const struct ldgen_set *s, const struct ldgen_hdr *h)
{
	header(f, s, h, "# ", "");
	fputs("# the .hot/.unlikely section prefixes of -fpartition-static-data-sections, for\n"
	      "# objects built with -fdata-sections and no profile-aware compiler:\n"
	      "#   grep -v '^#' THIS > rename.rsp; objcopy @rename.rsp obj.o\n"
	      "# then lld -z keep-data-section-prefix (LLVM >= 21) keeps .data.hot/.unlikely\n"
	      "# output sections; other linkers fold them into .data and friends.\n", f);
	for (size_t i = 0; i < s->n; i++) {
		const struct ldgen_sym *y = &s->v[i];

		if (y->cls == LDGEN_OTHER || y->kind == LDGEN_UNMOVABLE || !ldgen_name_ok(y->name))
			continue;
		for (int j = 0; kind_inputs[y->kind][j]; j++) {
			const char *pat = kind_inputs[y->kind][j];
			size_t plen = strlen(pat) - 2;   /* the prefix before "%s", ending in '.' */

			fputs("--rename-section ", f);
			fprintf(f, pat, y->name);
			fprintf(f, "=%.*s%s.%s\n", (int)plen - 1, pat,
				y->cls == LDGEN_HOT ? ".hot" : ".unlikely", y->name);
		}
	}
	return ferror(f) ? -EIO : 0;
}
