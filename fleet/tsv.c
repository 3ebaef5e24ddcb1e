/* TabSeparated writing and reading for the ClickHouse client (fleet/tsv.h). Escapes are
 * ClickHouse's: \\ \t \n \r \b \f \0 and, inside quoted strings, \'. A write that cannot
 * grow the buffer sets oom and is dropped; callers check oom once per batch. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/tsv.h"

#define TSV_MIN_CAP 4096

static bool grow(struct tsv_buf *b, size_t more)
{
	if (b->oom)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : TSV_MIN_CAP;

	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);

	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void tsv_free(struct tsv_buf *b)
{
	free(b->p);
	*b = (struct tsv_buf){ 0 };
}

void tsv_reset(struct tsv_buf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->p)
		b->p[0] = '\0';
}

void tsv_raw(struct tsv_buf *b, const char *s, size_t n)
{
	if (!grow(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void tsv_printf(struct tsv_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !grow(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void escaped(struct tsv_buf *b, const char *s, bool quote)
{
	if (!s)
		s = "";
	if (!grow(b, 2 * strlen(s) + 2))
		return;
	char *o = b->p + b->len;

	if (quote)
		*o++ = '\'';
	for (; *s; s++) {
		char e = 0;

		switch (*s) {
		case '\\': e = '\\'; break;
		case '\t': e = 't'; break;
		case '\n': e = 'n'; break;
		case '\r': e = 'r'; break;
		case '\b': e = 'b'; break;
		case '\f': e = 'f'; break;
		case '\'': e = '\''; break;
		}
		if (e) {
			*o++ = '\\';
			*o++ = e;
		} else {
			*o++ = *s;
		}
	}
	if (quote)
		*o++ = '\'';
	*o = '\0';
	b->len = (size_t)(o - b->p);
}

void tsv_str(struct tsv_buf *b, const char *s) { escaped(b, s, false); }
void tsv_sql_str(struct tsv_buf *b, const char *s) { escaped(b, s, true); }
void tsv_u64(struct tsv_buf *b, uint64_t v) { tsv_printf(b, "%" PRIu64, v); }
void tsv_i64(struct tsv_buf *b, int64_t v) { tsv_printf(b, "%" PRId64, v); }
void tsv_tab(struct tsv_buf *b) { tsv_raw(b, "\t", 1); }
void tsv_nl(struct tsv_buf *b) { tsv_raw(b, "\n", 1); }

void tsv_arr_open(struct tsv_buf *b) { tsv_raw(b, "[", 1); }

void tsv_arr_close(struct tsv_buf *b)
{
	if (b->len && b->p[b->len - 1] == ',')
		b->p[--b->len] = '\0';
	tsv_raw(b, "]", 1);
}

void tsv_arr_str(struct tsv_buf *b, const char *s)
{
	escaped(b, s, true);
	tsv_raw(b, ",", 1);
}

void tsv_arr_u64(struct tsv_buf *b, uint64_t v)
{
	tsv_printf(b, "%" PRIu64 ",", v);
}

/* ---- reading ---- */

void tsv_cur_init(struct tsv_cur *c, const struct tsv_buf *b)
{
	c->p = b ? b->p : NULL;
	c->end = c->p ? c->p + b->len : NULL;
	c->bad = false;
}

bool tsv_next_row(struct tsv_cur *c)
{
	return c->p && c->p < c->end && !c->bad;
}

static char unescape_char(char e)
{
	switch (e) {
	case 't': return '\t';
	case 'n': return '\n';
	case 'r': return '\r';
	case 'b': return '\b';
	case 'f': return '\f';
	case '0': return '\0';
	default: return e;
	}
}

/* Consumes the separator after a field: a tab, or a newline (end of the row). */
static void sep(struct tsv_cur *c)
{
	if (c->p < c->end && (*c->p == '\t' || *c->p == '\n'))
		c->p++;
}

char *tsv_get_str(struct tsv_cur *c)
{
	if (!c->p || c->p >= c->end) {
		c->bad = true;
		return (char *)"";
	}
	char *start = c->p, *o = c->p;

	while (c->p < c->end && *c->p != '\t' && *c->p != '\n') {
		if (*c->p == '\\' && c->p + 1 < c->end) {
			*o++ = unescape_char(c->p[1]);
			c->p += 2;
		} else {
			*o++ = *c->p++;
		}
	}
	char *end = c->p;

	sep(c);
	*o = '\0';          /* o <= end: the separator (or the buffer's NUL) is overwritten */
	(void)end;
	return start;
}

uint64_t tsv_get_u64(struct tsv_cur *c)
{
	char *s = tsv_get_str(c), *e;
	uint64_t v = strtoull(s, &e, 10);

	if (e == s || *e)
		c->bad = true;
	return v;
}

int64_t tsv_get_i64(struct tsv_cur *c)
{
	char *s = tsv_get_str(c), *e;
	int64_t v = strtoll(s, &e, 10);

	if (e == s || *e)
		c->bad = true;
	return v;
}

double tsv_get_f64(struct tsv_cur *c)
{
	char *s = tsv_get_str(c), *e;
	double v = strtod(s, &e);

	if (e == s || *e)
		c->bad = true;
	return v;
}

bool tsv_arr_begin(struct tsv_cur *c)
{
	if (!c->p || c->p >= c->end || *c->p != '[') {
		c->bad = true;
		return false;
	}
	c->p++;
	return true;
}

bool tsv_arr_more(struct tsv_cur *c)
{
	if (c->bad || c->p >= c->end)
		return false;
	if (*c->p == ',')
		c->p++;
	return c->p < c->end && *c->p != ']';
}

char *tsv_arr_get_str(struct tsv_cur *c)
{
	if (c->p >= c->end || *c->p != '\'') {
		c->bad = true;
		return (char *)"";
	}
	char *start = ++c->p, *o = c->p;

	while (c->p < c->end && *c->p != '\'') {
		if (*c->p == '\\' && c->p + 1 < c->end) {
			*o++ = unescape_char(c->p[1]);
			c->p += 2;
		} else {
			*o++ = *c->p++;
		}
	}
	if (c->p >= c->end) {
		c->bad = true;
		return (char *)"";
	}
	c->p++;             /* the closing quote */
	*o = '\0';          /* o < the quote's old place: nothing unread is overwritten */
	return start;
}

uint64_t tsv_arr_get_u64(struct tsv_cur *c)
{
	char *e;
	uint64_t v = strtoull(c->p, &e, 10);

	if (e == c->p)
		c->bad = true;
	c->p = e;
	return v;
}

void tsv_arr_end(struct tsv_cur *c)
{
	if (c->p < c->end && *c->p == ']')
		c->p++;
	else
		c->bad = true;
	sep(c);
}
