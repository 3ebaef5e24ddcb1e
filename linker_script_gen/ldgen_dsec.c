/* -fdata-sections check from DWARF. A CU whose producer lists its switches (gcc's default
 * -grecord-gcc-switches, clang's -grecord-command-line) but not -fdata-sections put each
 * kind of its data in one input section: its symbols of that kind move as one block. */
#include "linker_script_gen/ldgen_dsec.h"
#include "base/log.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DSEC_MAX_DEPTH 8   /* nesting walked for function-static variables */

struct cu_group {
	/* [kind][0]: hot names, [kind][1]: cold names (the first few of each) */
	const char *names[LDGEN_NKINDS][2][LDGEN_DSEC_MAX_NAMES];
	size_t nnames[LDGEN_NKINDS][2];   /* hot, cold symbols of the kind in the CU */
	size_t nall[LDGEN_NKINDS];        /* all symbols of the kind in the CU */
};

struct ctx {
	const struct ldgen_set *s;
	const struct ldgen_sym **byaddr;
	size_t n;
};

static int cmp_addr(const void *a, const void *b)
{
	const struct ldgen_sym *x = *(const struct ldgen_sym *const *)a;
	const struct ldgen_sym *y = *(const struct ldgen_sym *const *)b;

	return x->address < y->address ? -1 : x->address > y->address;
}

static const struct ldgen_sym *find(const struct ctx *c, Dwarf_Addr a)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->byaddr[mid]->address < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->n && c->byaddr[lo]->address == a ? c->byaddr[lo] : NULL;
}

static void walk(const struct ctx *c, Dwarf_Die *die, struct cu_group *g, int depth)
{
	Dwarf_Die child;

	if (depth > DSEC_MAX_DEPTH || dwarf_child(die, &child) != 0)
		return;
	do {
		Dwarf_Attribute at;
		Dwarf_Op *ops;
		size_t nops;
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_variable && dwarf_attr(&child, DW_AT_location, &at) &&
		    dwarf_getlocation(&at, &ops, &nops) == 0 && nops >= 1 &&
		    ops[0].atom == DW_OP_addr) {
			const struct ldgen_sym *y = find(c, ops[0].number);

			if (y && y->kind < LDGEN_NKINDS) {
				g->nall[y->kind]++;
				if (y->cls != LDGEN_OTHER) {
					int c = y->cls == LDGEN_COLD;
					size_t *n = &g->nnames[y->kind][c];

					if (*n < LDGEN_DSEC_MAX_NAMES)
						g->names[y->kind][c][*n] = y->name;
					(*n)++;
				}
			}
		}
		if (tag == DW_TAG_subprogram || tag == DW_TAG_lexical_block ||
		    tag == DW_TAG_namespace || tag == DW_TAG_inlined_subroutine)
			walk(c, &child, g, depth + 1);
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* Whether the producer's switches leave -fdata-sections on (the last of the pair wins). */
static bool data_sections_on(const char *producer)
{
	const char *on = NULL, *off = NULL;

	for (const char *p = producer; (p = strstr(p, "-fdata-sections")); p++)
		on = p;
	for (const char *p = producer; (p = strstr(p, "-fno-data-sections")); p++)
		off = p;
	return on && (!off || on > off);
}

static void warn(const char *tool, char *notes, size_t cap, const char *line)
{
	size_t len = strlen(notes);

	log_error("export %s: warning: %s", tool, line);
	if (len + strlen(line) + 11 < cap)
		snprintf(notes + len, cap - len, "warning: %s\n", line);
}

int ldgen_dsec_check(const char *path, const struct ldgen_set *s, const char *tool,
		     char *notes, size_t cap)
{
	struct ctx c = { .s = s };
	Dwarf_Off off = 0, next;
	size_t hsize;
	int fd, shared = 0, unknown = 0;
	Dwarf *dw;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (!(dw = dwarf_begin(fd, DWARF_C_READ))) {
		close(fd);
		warn(tool, notes, cap, "no DWARF in the binary: cannot tell whether it was built "
		     "with -fdata-sections (without it, symbols of one unit move together)");
		return -ENODATA;
	}
	c.byaddr = malloc((s->n ? s->n : 1) * sizeof(*c.byaddr));
	if (!c.byaddr) {
		dwarf_end(dw);
		close(fd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].kind < LDGEN_NKINDS)
			c.byaddr[c.n++] = &s->v[i];
	qsort(c.byaddr, c.n, sizeof(*c.byaddr), cmp_addr);

	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		Dwarf_Attribute at;
		const char *producer = NULL, *name;

		if (dwarf_offdie(dw, off + hsize, &cu)) {
			if (dwarf_attr(&cu, DW_AT_producer, &at))
				producer = dwarf_formstring(&at);
			name = dwarf_diename(&cu);
			if (!producer || !strstr(producer, " -")) {
				unknown++;
			} else if (!data_sections_on(producer)) {
				struct cu_group *g = calloc(1, sizeof(*g));

				if (!g)
					break;
				walk(&c, &cu, g, 0);
				for (int k = 0; k < LDGEN_NKINDS; k++) {
					char line[2048];
					int len;

					size_t nh = g->nnames[k][0], nc = g->nnames[k][1];

					/* Only hot data sharing with other data, or cold sharing with
					 * warmer data, is a layout that cannot be had. */
					if (!((nh && nh < g->nall[k]) || (nc && nc < g->nall[k])))
						continue;
					shared++;
					len = snprintf(line, sizeof(line), "%s built without "
						       "-fdata-sections: its %zu %s symbols share one "
						       "section and cannot be moved apart (%zu hot, %zu "
						       "cold):", name ? name : "?", g->nall[k],
						       ldgen_kind_section((enum ldgen_kind)k), nh, nc);
					for (int c = 0; c < 2; c++)
						for (size_t j = 0; j < g->nnames[k][c] &&
						     j < LDGEN_DSEC_MAX_NAMES && len > 0 &&
						     (size_t)len < sizeof(line) - 64; j++)
							len += snprintf(line + len, sizeof(line) - (size_t)len,
									" %s%s", c ? "" : "hot:",
									g->names[k][c][j]);
					warn(tool, notes, cap, line);
				}
				free(g);
			}
		}
		off = next;
	}
	if (unknown) {
		char line[256];

		snprintf(line, sizeof(line), "%d compile units record no compiler switches "
			 "(clang: -grecord-command-line): cannot tell whether they used "
			 "-fdata-sections", unknown);
		if (unknown && shared == 0 && c.n)
			warn(tool, notes, cap, line);
	}
	free(c.byaddr);
	dwarf_end(dw);
	close(fd);
	return shared;
}
