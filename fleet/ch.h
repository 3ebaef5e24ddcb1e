/* A ClickHouse endpoint over its HTTP interface (libcurl): one statement per request,
 * INSERT data and long SQL sent gzip-compressed, responses read whole into memory.
 * Every request has a connect and a total timeout (named below); a failure is one line
 * in ch_errmsg(): the server's own first line, or curl's reason with the URL. */
#pragma once
#include <stddef.h>
#include "fleet/tsv.h"

#define CH_CONNECT_TIMEOUT_MS 5000    /* a stopped server is reported after this */
#define CH_REQUEST_TIMEOUT_S 600      /* the longest one statement may run */
#define CH_MAX_RESPONSE (1ull << 32)  /* bytes; a larger answer is an error */
#define CH_GZIP_MIN 4096              /* bodies from this size on are sent compressed */

struct ch;

/* url: http://host:port/ (the path is kept; no query string). */
int ch_open(struct ch **out, const char *url, char *err, size_t errsz);
void ch_close(struct ch *c);
const char *ch_errmsg(const struct ch *c);
const char *ch_url(const struct ch *c);

/* Runs sql. With data (INSERT ... FORMAT TabSeparated), sql goes in the URL and data is
 * the body; without, sql is the body. The answer (TabSeparated text) is in *resp, owned
 * by c and valid until the next call. 0, or -EIO/-ECONNREFUSED/-ETIMEDOUT/-ENOMEM/-EPROTO
 * with ch_errmsg() set. */
int ch_exec(struct ch *c, const char *sql, const struct tsv_buf *data, const struct tsv_buf **resp);
/* Moves the last answer into out (freeing out's old text): it then outlives later calls. */
void ch_take_response(struct ch *c, struct tsv_buf *out);
/* printf-style SQL, no data. */
int ch_query(struct ch *c, const struct tsv_buf **resp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
