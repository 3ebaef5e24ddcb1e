/* Output primitives for `memprofd query`: JSON strings and CSV fields (base/escape.h),
 * human units of bounded width, and terminal-safe table cells (printable ASCII only, so
 * width = bytes). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "base/escape.h"

#define FMT_TABLE_WIDTH 100   /* table output never exceeds this many columns */
#define FMT_BYTES_MAX 9       /* longest fmt_bytes() result: "999.9 KiB" */
#define FMT_DURATION_MAX 8    /* longest fmt_duration_ns() result: "999.9 ms" */
#define FMT_COUNT_MAX 6       /* longest fmt_count() result: "999.9k" */
#define FMT_DENSITY_MAX 8     /* longest fmt_density() result: "1.23e+04" */
#define FMT_BUF 32            /* a buffer big enough for any of the above */

/* Human units, written into buf (FMT_BUF bytes) and returned. */
const char *fmt_bytes(char *buf, uint64_t bytes);         /* 512 B, 7.0 MiB */
const char *fmt_duration_ns(char *buf, uint64_t ns);      /* 0.5 ms, 3.0 s, 27.8 h, 90 d */
const char *fmt_count(char *buf, uint64_t v);             /* 9999, 30.0k, 1.2M */
const char *fmt_density(char *buf, double d);             /* %.3g */

/* Copies src into dst as at most width columns of printable ASCII (other bytes become
 * '?'), ending in "..." when cut; dst must hold width + 1 bytes. Returns the length. */
size_t fmt_cell(char *dst, size_t width, const char *src);

/* A function name for display: a demangled name's return type, parameter list and
 * trailing qualifiers are dropped ("void ns::f<int>(int) const" -> "ns::f<int>").
 * Writes into dst (dstsz). */
void fmt_func_short(char *dst, size_t dstsz, const char *func);
/* fmt_func_short(), then every template argument list collapsed to "<...>", for narrow
 * columns: "std::vector<...>::_M_realloc_insert<...>". An operator's own '<' and '>'
 * ("operator<<", "operator->") are kept. */
void fmt_func_compact(char *dst, size_t dstsz, const char *func);
