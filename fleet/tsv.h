/* TabSeparated text as ClickHouse reads and writes it: a growable buffer with writers
 * that escape strings (backslash escapes; in arrays, quoted), and a cursor that reads
 * fields back, arrays included. Parsing never reads past the buffer; a malformed field
 * is -EPROTO. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tsv_buf {
	char *p;
	size_t len, cap;
	bool oom;                /* a write failed: the buffer is incomplete */
};

void tsv_free(struct tsv_buf *b);
void tsv_reset(struct tsv_buf *b);
void tsv_raw(struct tsv_buf *b, const char *s, size_t n);
void tsv_printf(struct tsv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tsv_str(struct tsv_buf *b, const char *s);         /* NULL writes '' */
void tsv_u64(struct tsv_buf *b, uint64_t v);
void tsv_i64(struct tsv_buf *b, int64_t v);
void tsv_tab(struct tsv_buf *b);
void tsv_nl(struct tsv_buf *b);
/* An array field: call tsv_arr_open, then elements, then tsv_arr_close. */
void tsv_arr_open(struct tsv_buf *b);
void tsv_arr_close(struct tsv_buf *b);
void tsv_arr_str(struct tsv_buf *b, const char *s);
void tsv_arr_u64(struct tsv_buf *b, uint64_t v);
/* A string as an SQL literal: 'escaped'. */
void tsv_sql_str(struct tsv_buf *b, const char *s);

/* Reading: a cursor over one response. Strings are unescaped in place (the buffer is
 * modified), so they stay valid as long as the response. */
struct tsv_cur {
	char *p, *end;
	bool bad;                /* a malformed field was seen */
};
void tsv_cur_init(struct tsv_cur *c, const struct tsv_buf *b);
bool tsv_next_row(struct tsv_cur *c);    /* true while a row is left (at its start) */
char *tsv_get_str(struct tsv_cur *c);    /* the next field, unescaped */
uint64_t tsv_get_u64(struct tsv_cur *c);
int64_t tsv_get_i64(struct tsv_cur *c);
double tsv_get_f64(struct tsv_cur *c);
/* An array field: tsv_arr_begin(), then tsv_arr_more() before each element. */
bool tsv_arr_begin(struct tsv_cur *c);
bool tsv_arr_more(struct tsv_cur *c);
char *tsv_arr_get_str(struct tsv_cur *c);
uint64_t tsv_arr_get_u64(struct tsv_cur *c);
void tsv_arr_end(struct tsv_cur *c);
