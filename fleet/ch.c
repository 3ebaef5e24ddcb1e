/* ClickHouse HTTP client (fleet/ch.h) on libcurl. Each request: POST to URL?settings,
 * wait_end_of_query=1 so a failing query is an HTTP error and never a truncated 200;
 * insert_distributed_sync=1 so an INSERT into a Distributed table returns only once
 * every shard has its rows (a push's ledger row is written after its data is there).
 * Bodies of CH_GZIP_MIN bytes or more are gzipped (Content-Encoding: gzip); answers
 * come compressed when the server agrees (enable_http_compression=1). libcurl is opened
 * at the first ch_open (base/dynlib.h), so commands that never reach a server skip it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <zlib.h>

#include "fleet/ch.h"
#include "base/dynlib.h"

#define CH_SETTINGS "wait_end_of_query=1&insert_distributed_sync=1&enable_http_compression=1" \
	"&max_query_size=16777216"
#define CH_ERR_LINE 400           /* bytes of a server error kept */
#define CH_LIBCURL "libcurl.so.4"  /* the ABI of <curl/curl.h> (libcurl4-openssl-dev) */

static struct {
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cu;
static const char *const cu_names[] = {
	"curl_global_init", "curl_global_cleanup", "curl_easy_init", "curl_easy_cleanup",
	"curl_easy_reset", "curl_easy_setopt", "curl_easy_perform", "curl_easy_getinfo",
	"curl_easy_strerror", "curl_easy_escape", "curl_free", "curl_slist_append",
	"curl_slist_free_all" };
static struct dynlib cu_lib = DYNLIB_INIT(CH_LIBCURL, cu_names, cu, 0);

struct ch {
	CURL *curl;
	char *url;
	struct tsv_buf resp, gz, sql;
	char err[512];
};

const char *ch_errmsg(const struct ch *c) { return c->err; }
const char *ch_url(const struct ch *c) { return c->url; }

int ch_open(struct ch **out, const char *url, char *err, size_t errsz)
{
	struct ch *c;

	*out = NULL;
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(err, errsz, "%s: not an http:// or https:// URL", url);
		return -EINVAL;
	}
	if (strchr(url, '?')) {
		snprintf(err, errsz, "%s: give the endpoint without a query string", url);
		return -EINVAL;
	}
	if (dynlib_load(&cu_lib) < 0) {
		snprintf(err, errsz, "%s: %s", CH_LIBCURL, dynlib_error(&cu_lib));
		return -ENOENT;
	}
	/* Reference-counted since libcurl 7.84 (Debian 12 has 7.88): one per endpoint. */
	if (cu.global_init(CURL_GLOBAL_DEFAULT)) {
		snprintf(err, errsz, "libcurl failed to initialise");
		return -EIO;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->url = strdup(url)) || !(c->curl = cu.easy_init())) {
		if (c)
			free(c->url);
		free(c);
		cu.global_cleanup();
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void ch_close(struct ch *c)
{
	if (!c)
		return;
	cu.easy_cleanup(c->curl);
	tsv_free(&c->resp);
	tsv_free(&c->gz);
	tsv_free(&c->sql);
	free(c->url);
	free(c);
	cu.global_cleanup();
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct tsv_buf *b = arg;

	if (b->len + size * n > CH_MAX_RESPONSE)
		return 0;
	tsv_raw(b, p, size * n);
	return b->oom ? 0 : size * n;
}

/* gzip of n bytes at p into c->gz. */
static int gzip_body(struct ch *c, const char *p, size_t n)
{
	z_stream z = { 0 };
	uLong bound;

	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&z, n) + 32;   /* + the gzip header and trailer */
	tsv_reset(&c->gz);
	if (c->gz.cap < bound) {
		char *q = realloc(c->gz.p, bound);

		if (!q) {
			deflateEnd(&z);
			return -ENOMEM;
		}
		c->gz.p = q;
		c->gz.cap = bound;
	}
	z.next_in = (Bytef *)p;
	z.avail_in = (uInt)n;
	z.next_out = (Bytef *)c->gz.p;
	z.avail_out = (uInt)bound;
	int rc = deflate(&z, Z_FINISH);

	c->gz.len = z.total_out;
	deflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : -EIO;
}

static int curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	default: return -EIO;
	}
}

/* The server's error: its first line, at most CH_ERR_LINE bytes. */
static void server_error(struct ch *c, long status)
{
	const char *b = c->resp.p ? c->resp.p : "";
	size_t n = strcspn(b, "\n");

	if (n > CH_ERR_LINE)
		n = CH_ERR_LINE;
	snprintf(c->err, sizeof(c->err), "ClickHouse at %s: HTTP %ld: %.*s", c->url, status,
		 (int)n, n ? b : "(no message)");
}

int ch_exec(struct ch *c, const char *sql, const struct tsv_buf *data, const struct tsv_buf **resp)
{
	const char *body = data ? data->p : sql;
	size_t blen = data ? data->len : strlen(sql);
	struct curl_slist *hdr = NULL;
	bool gz = blen >= CH_GZIP_MIN;
	char *q = NULL;
	int r = 0;

	c->err[0] = '\0';
	tsv_reset(&c->resp);
	tsv_reset(&c->sql);
	tsv_printf(&c->sql, "%s?" CH_SETTINGS, c->url);
	if (data) {
		if (!(q = cu.easy_escape(c->curl, sql, 0)))
			return -ENOMEM;
		tsv_printf(&c->sql, "&query=%s", q);
		cu.free(q);
	}
	if (c->sql.oom)
		return -ENOMEM;
	if (gz) {
		r = gzip_body(c, body, blen);
		if (r) {
			snprintf(c->err, sizeof(c->err), "compressing a request: %s", strerror(-r));
			return r;
		}
		body = c->gz.p;
		blen = c->gz.len;
		hdr = cu.slist_append(hdr, "Content-Encoding: gzip");
	}
	hdr = cu.slist_append(hdr, "Content-Type: text/plain; charset=UTF-8");
	cu.easy_reset(c->curl);
	cu.easy_setopt(c->curl, CURLOPT_URL, c->sql.p);
	cu.easy_setopt(c->curl, CURLOPT_POST, 1L);
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDS, body ? body : "");
	cu.easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	cu.easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdr);
	cu.easy_setopt(c->curl, CURLOPT_ACCEPT_ENCODING, "");
	cu.easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
	cu.easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->resp);
	cu.easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CH_CONNECT_TIMEOUT_MS);
	cu.easy_setopt(c->curl, CURLOPT_TIMEOUT, (long)CH_REQUEST_TIMEOUT_S);
	cu.easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);

	CURLcode rc = cu.easy_perform(c->curl);
	long status = 0;

	cu.slist_free_all(hdr);
	if (rc != CURLE_OK) {
		snprintf(c->err, sizeof(c->err), "ClickHouse at %s: %s", c->url,
			 c->resp.oom ? "answer too large" : cu.easy_strerror(rc));
		return c->resp.oom ? -ENOMEM : curl_errno(rc);
	}
	cu.easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		server_error(c, status);
		return -EPROTO;
	}
	if (resp)
		*resp = &c->resp;
	return 0;
}

void ch_take_response(struct ch *c, struct tsv_buf *out)
{
	tsv_free(out);
	*out = c->resp;
	c->resp = (struct tsv_buf){ 0 };
}

int ch_query(struct ch *c, const struct tsv_buf **resp, const char *fmt, ...)
{
	struct tsv_buf q = { 0 };
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(q.p = malloc((size_t)n + 1)))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(q.p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	r = ch_exec(c, q.p, NULL, resp);
	free(q.p);
	return r;
}
