/* The memory_limit drops of a run in `memprofd query status` (status_mem_drops.h). */
#include <inttypes.h>
#include "reporter/format.h"
#include "reporter/status_mem_drops.h"

int status_mem_drops_table(FILE *out, struct store *s, int64_t run_id, int indent)
{
	struct store_mem_drops m;
	char lim[FMT_BUF];
	int r = store_get_mem_drops(s, run_id, &m);

	if (r <= 0 || !m.aggregates)
		return r < 0 ? r : 0;
	fprintf(out, "%*sdropped over memory_limit %s, store unwritable: %" PRIu64
		" aggregates, %" PRIu64 " objects\n", indent, "", fmt_bytes(lim, m.limit_bytes),
		m.aggregates, m.objects);
	return 0;
}

int status_mem_drops_json(FILE *out, struct store *s, int64_t run_id)
{
	struct store_mem_drops m;
	int r = store_get_mem_drops(s, run_id, &m);

	if (r < 0)
		return r;
	if (!r) {
		fputs(", \"memory_limit_drops\": null", out);
		return 0;
	}
	fprintf(out, ", \"memory_limit_drops\": {\"aggregates\": %" PRIu64 ", \"objects\": %" PRIu64
		", \"memory_limit\": %" PRIu64 "}", m.aggregates, m.objects, m.limit_bytes);
	return 0;
}
