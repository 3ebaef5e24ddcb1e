/* /proc/PID/maps parser. Input is hostile: every field is checked (hex width, perms
 * alphabet, end > start, path length, no NUL bytes), entry count is bounded by
 * MAPS_MAX_ENTRIES, and on any error nothing is returned (out is {NULL, 0}).
 * Invariant of a parsed struct maps: sorted by start, non-overlapping, every path
 * non-NULL and NUL-terminated. */
#include "symbolizer/maps.h"
#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Largest /proc/PID/maps text we accept: MAPS_MAX_ENTRIES lines of ~1 KiB on average. */
#define MAPS_READ_MAX ((size_t)64 << 20)

static const char deleted_suffix[] = " (deleted)";

static int hexval(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* 1..maxdigits hex digits; no sign, no 0x, no overflow possible at maxdigits <= 16. */
static bool parse_hex(const char **p, const char *end, unsigned maxdigits, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	unsigned n = 0;
	int d;

	while (s < end && (d = hexval(*s)) >= 0) {
		if (++n > maxdigits)
			return false;
		x = x << 4 | (uint64_t)d;
		s++;
	}
	if (n == 0)
		return false;
	*p = s;
	*v = x;
	return true;
}

static bool parse_dec(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
		s++;
	}
	*p = s;
	*v = x;
	return true;
}

static bool expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

/* One line (without its '\n') into *e; e->path is malloc'd on success. */
static int parse_line(struct map_entry *e, const char *s, const char *end)
{
	uint64_t major, minor;
	size_t plen;

	if (memchr(s, '\0', (size_t)(end - s)))
		return -EINVAL;
	if (!parse_hex(&s, end, 16, &e->start) || !expect(&s, end, '-') ||
	    !parse_hex(&s, end, 16, &e->end) || !expect(&s, end, ' '))
		return -EINVAL;
	if (e->end <= e->start)
		return -EINVAL;

	if (end - s < 4)
		return -EINVAL;
	e->prot = 0;
	if (s[0] == 'r') e->prot |= PROT_READ; else if (s[0] != '-') return -EINVAL;
	if (s[1] == 'w') e->prot |= PROT_WRITE; else if (s[1] != '-') return -EINVAL;
	if (s[2] == 'x') e->prot |= PROT_EXEC; else if (s[2] != '-') return -EINVAL;
	if (s[3] != 'p' && s[3] != 's') return -EINVAL;
	s += 4;

	if (!expect(&s, end, ' ') || !parse_hex(&s, end, 16, &e->offset) ||
	    !expect(&s, end, ' ') || !parse_hex(&s, end, 8, &major) || !expect(&s, end, ':') ||
	    !parse_hex(&s, end, 8, &minor) || !expect(&s, end, ' ') ||
	    !parse_dec(&s, end, &e->inode))
		return -EINVAL;
	e->dev_major = (unsigned)major;
	e->dev_minor = (unsigned)minor;

	/* The kernel pads to the path column with spaces; anonymous lines end in one space.
	 * Real paths start with '/' or '[', so skipping all the padding loses nothing. */
	if (s < end && *s != ' ')
		return -EINVAL;
	while (s < end && *s == ' ')
		s++;
	plen = (size_t)(end - s);
	if (plen >= MAPS_PATH_MAX)
		return -EINVAL;
	e->deleted = 0;
	if (plen > sizeof(deleted_suffix) - 1 &&
	    !memcmp(s + plen - (sizeof(deleted_suffix) - 1), deleted_suffix,
		    sizeof(deleted_suffix) - 1)) {
		plen -= sizeof(deleted_suffix) - 1;
		e->deleted = 1;
	}
	e->path = strndup(s, plen);
	return e->path ? 0 : -ENOMEM;
}

static int cmp_start(const void *a, const void *b, void *arg)
{
	const struct map_entry *v = arg;
	uint64_t x = v[*(const uint32_t *)a].start, y = v[*(const uint32_t *)b].start;
	return x < y ? -1 : x > y;
}

/* Rare path (the kernel emits sorted maps): sorts v and lines together by start. */
static int sort_entries(struct map_entry *v, unsigned *lines, size_t n)
{
	_cleanup_free_ uint32_t *idx = malloc(n * sizeof(*idx));
	_cleanup_free_ struct map_entry *tv = malloc(n * sizeof(*tv));
	_cleanup_free_ unsigned *tl = malloc(n * sizeof(*tl));

	if (!idx || !tv || !tl)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, n, sizeof(*idx), cmp_start, v);
	for (size_t i = 0; i < n; i++) {
		tv[i] = v[idx[i]];
		tl[i] = lines[idx[i]];
	}
	memcpy(v, tv, n * sizeof(*v));
	memcpy(lines, tl, n * sizeof(*lines));
	return 0;
}

void maps_free(struct maps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

/* Parses every line into m (and each entry's line number into *lines); *lineno is the
 * line being parsed when an error is returned. */
static int parse_all(struct maps *m, unsigned **lines, const char *buf, size_t len,
		     unsigned *lineno)
{
	const char *p = buf, *end = buf + len;
	size_t cap = 0;
	bool sorted = true;
	int r;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		++*lineno;
		if (m->n == MAPS_MAX_ENTRIES)
			return -E2BIG;
		if (m->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct map_entry *nv;
			unsigned *nlines;

			if (ncap > MAPS_MAX_ENTRIES)
				ncap = MAPS_MAX_ENTRIES;
			nv = realloc(m->v, ncap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			m->v = nv;
			nlines = realloc(*lines, ncap * sizeof(*nlines));
			if (!nlines)
				return -ENOMEM;
			*lines = nlines;
			cap = ncap;
		}
		r = parse_line(&m->v[m->n], p, eol);
		if (r < 0)
			return r;
		if (m->n && m->v[m->n].start < m->v[m->n - 1].start)
			sorted = false;
		(*lines)[m->n++] = *lineno;
		p = nl ? nl + 1 : end;
	}

	if (!sorted && (r = sort_entries(m->v, *lines, m->n)) < 0)
		return r;
	for (size_t i = 1; i < m->n; i++) {
		if (m->v[i].start < m->v[i - 1].end) {
			unsigned a = (*lines)[i], b = (*lines)[i - 1];
			*lineno = a > b ? a : b;
			return -EINVAL;
		}
	}
	return 0;
}

int maps_parse(struct maps *out, const char *buf, size_t len, unsigned *bad_line)
{
	__attribute__((cleanup(maps_free))) struct maps m = { 0 };
	_cleanup_free_ unsigned *lines = NULL;
	unsigned lineno = 0;
	int r;

	if (bad_line)
		*bad_line = 0;
	if (!out || (!buf && len))
		return -EINVAL;
	out->v = NULL;
	out->n = 0;
	r = parse_all(&m, &lines, buf, len, &lineno);
	if (r < 0) {
		if (r == -EINVAL && bad_line)
			*bad_line = lineno;
		return r;
	}
	*out = m;
	m = (struct maps){ 0 };
	return 0;
}

int maps_read_pid(struct maps *out, pid_t pid)
{
	char path[64];
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!out || pid <= 0)
		return -EINVAL;
	out->v = NULL;
	out->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;

	for (;;) {
		ssize_t k;

		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 64 << 10;
			char *nb;

			if (cap >= MAPS_READ_MAX)
				return -E2BIG;
			if (ncap > MAPS_READ_MAX)
				ncap = MAPS_READ_MAX;
			nb = realloc(buf, ncap);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			cap = ncap;
		}
		k = read(fd, buf + len, cap - len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == ENOENT ? -ESRCH : -errno;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	/* A zombie (or a process that exited while we read) has no mm: the file reads empty. */
	if (len == 0)
		return -ESRCH;
	return maps_parse(out, buf, len, NULL);
}

const struct map_entry *maps_find(const struct maps *m, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!m || !m->v)
		return NULL;
	hi = m->n;
	/* Last entry with start <= addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	return addr < m->v[lo - 1].end ? &m->v[lo - 1] : NULL;
}
