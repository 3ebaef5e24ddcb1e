/* Output primitives (see format.h). Every function here is total: any input bytes give
 * well-formed output of the documented maximum width, never a crash or a bad escape. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "reporter/format.h"

/* v / 1024^k (or 1000^k) with one decimal, promoted while it would print >= 1000. */
static const char *scaled(char *buf, uint64_t v, double base, const char *const *units,
			  unsigned nunits, const char *sep)
{
	double x = (double)v;
	unsigned u = 0;

	while (u + 1 < nunits && x >= 999.95) {
		x /= base;
		u++;
	}
	snprintf(buf, FMT_BUF, "%.1f%s%s", x, sep, units[u]);
	return buf;
}

const char *fmt_bytes(char *buf, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

	if (bytes < 1000) {
		snprintf(buf, FMT_BUF, "%u B", (unsigned)bytes);
		return buf;
	}
	return scaled(buf, bytes, 1024.0, units, sizeof(units) / sizeof(units[0]), " ");
}

const char *fmt_count(char *buf, uint64_t v)
{
	static const char *const units[] = { "", "k", "M", "G", "T", "P", "E" };

	if (v < 10000) {
		snprintf(buf, FMT_BUF, "%u", (unsigned)v);
		return buf;
	}
	return scaled(buf, v, 1000.0, units, sizeof(units) / sizeof(units[0]), "");
}

const char *fmt_duration_ns(char *buf, uint64_t ns)
{
	double ms = (double)ns / 1e6, s = (double)ns / 1e9;

	if (ms < 999.95)
		snprintf(buf, FMT_BUF, "%.1f ms", ms);
	else if (s < 999.95)
		snprintf(buf, FMT_BUF, "%.1f s", s);
	else if (s / 3600 < 99.95)
		snprintf(buf, FMT_BUF, "%.1f h", s / 3600);
	else
		snprintf(buf, FMT_BUF, "%.0f d", s / 86400);
	return buf;
}

const char *fmt_density(char *buf, double d)
{
	snprintf(buf, FMT_BUF, "%.3g", d);
	return buf;
}

size_t fmt_cell(char *dst, size_t width, const char *src)
{
	size_t len = src ? strlen(src) : 0, n = len <= width ? len : width;
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (len > width && width >= 3)
		memcpy(dst + width - 3, "...", 3);
	dst[n] = '\0';
	return n;
}

static bool strip_suffix(char *s, size_t *len, const char *suffix)
{
	size_t n = strlen(suffix);

	if (*len < n || memcmp(s + *len - n, suffix, n))
		return false;
	*len -= n;
	s[*len] = '\0';
	return true;
}

/* Where a demangled name's qualified name starts: after its return type ("void ns::f"),
 * the last space outside <>, (), [] and {} before any "operator" (whose own spaces, as in
 * "operator new", belong to the name). */
static size_t name_start(const char *s, size_t len)
{
	size_t start = 0;
	int depth = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!depth && !strncmp(s + i, "operator", 8) &&
		    (i == 0 || s[i - 1] == ':' || s[i - 1] == ' ' || s[i - 1] == '*' ||
		     s[i - 1] == '&'))
			break;
		if (c == '<' || c == '(' || c == '[' || c == '{')
			depth++;
		else if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0)
			depth--;
		else if (c == ' ' && !depth)
			start = i + 1;
	}
	return start;
}

void fmt_func_short(char *dst, size_t dstsz, const char *func)
{
	size_t len;

	if (!dstsz)
		return;
	snprintf(dst, dstsz, "%s", func ? func : "");
	len = strlen(dst);
	while (strip_suffix(dst, &len, " const") || strip_suffix(dst, &len, " volatile") ||
	       strip_suffix(dst, &len, " &&") || strip_suffix(dst, &len, " &") ||
	       strip_suffix(dst, &len, " noexcept"))
		;
	bool params = false;

	if (len >= 2 && dst[len - 1] == ')') {
		/* Find the '(' that opens the final parameter list; keep names that start
		 * with one. */
		int depth = 0;

		for (size_t i = len; i-- > 0;) {
			if (dst[i] == ')')
				depth++;
			else if (dst[i] == '(' && --depth == 0) {
				if (i > 0) {
					dst[i] = '\0';
					len = i;
					params = true;
				}
				break;
			}
		}
	}
	/* A return type comes only with a demangled function's parameter list. */
	size_t start = params ? name_start(dst, len) : 0;

	if (start && start < len)
		memmove(dst, dst + start, len - start + 1);
}

void fmt_func_compact(char *dst, size_t dstsz, const char *func)
{
	static const char op_chars[] = "<>=!+-*/%^&|~[](),";
	size_t len = func ? strlen(func) + 1 : 1, n = 0;
	char *src = malloc(len);
	int depth = 0;

	if (!dstsz)
		goto out;
	if (!src) {
		fmt_func_short(dst, dstsz, func);
		return;
	}
	fmt_func_short(src, len, func);
	for (size_t i = 0; src[i] && n + 1 < dstsz; i++) {
		if (!depth && !strncmp(src + i, "operator", 8)) {
			/* The operator's own '<' and '>' are not template brackets. */
			size_t j = i + 8;

			while (src[j] && strchr(op_chars, src[j]))
				j++;
			for (; i < j && n + 1 < dstsz; i++)
				dst[n++] = src[i];
			i--;
			continue;
		}
		if (src[i] == '<') {
			if (depth++ == 0) {
				const char *open = src[i + 1] == '>' ? "<" : "<...";

				for (const char *p = open; *p && n + 1 < dstsz; p++)
					dst[n++] = *p;
			}
			continue;
		}
		if (src[i] == '>' && depth > 0) {
			if (--depth == 0)
				dst[n++] = '>';
			continue;
		}
		if (!depth)
			dst[n++] = src[i];
	}
	dst[n] = '\0';
out:
	free(src);
}
