/* Shared by `memprofd push` and the fleet readers: the schema version check and the
 * binary key (fleet/fleet.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fleet/fleet.h"

int fleet_check_schema(struct ch *c, char *err, size_t errsz)
{
	const struct tsv_buf *resp;
	int r = ch_query(c, &resp, "SELECT toUInt64(max(value)), toUInt64(count())"
			 " FROM " FLEET_DB ".meta WHERE key = 'schema_version'");

	if (r) {
		if (strstr(ch_errmsg(c), "doesn't exist") || strstr(ch_errmsg(c), "does not exist") ||
		    strstr(ch_errmsg(c), "UNKNOWN_TABLE") || strstr(ch_errmsg(c), "UNKNOWN_DATABASE")) {
			snprintf(err, errsz, "%s has no memprofd schema: run deploy/clickhouse/"
				 "schema.sql on every node", ch_url(c));
			return -ENOENT;
		}
		snprintf(err, errsz, "%s", ch_errmsg(c));
		return r;
	}

	struct tsv_cur cur;

	tsv_cur_init(&cur, resp);
	uint64_t version = tsv_get_u64(&cur), rows = tsv_get_u64(&cur);

	if (cur.bad || !rows) {
		snprintf(err, errsz, "%s has no memprofd schema version: run deploy/clickhouse/"
			 "schema.sql on every node", ch_url(c));
		return -ENOENT;
	}
	if (version > FLEET_SCHEMA_VERSION) {
		snprintf(err, errsz, "%s: fleet schema version %llu is newer than this memprofd "
			 "supports (%d)", ch_url(c), (unsigned long long)version, FLEET_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

void fleet_bin_key(char *buf, size_t n, const char *build_id, const char *path)
{
	if (build_id && *build_id)
		snprintf(buf, n, "%s", build_id);
	else
		snprintf(buf, n, "path:%s", path ? path : "");
}

uint64_t fleet_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}
