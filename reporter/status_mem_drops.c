/* The drops of a run at its limits in `memprofd query status` (status_mem_drops.h). */
#include <inttypes.h>
#include "reporter/format.h"
#include "reporter/status_mem_drops.h"

int status_mem_drops_table(FILE *out, struct store *s, int64_t run_id, int indent)
{
	struct store_mem_drops m;
	char lim[FMT_BUF], peak[FMT_BUF];
	int r = store_get_mem_drops(s, run_id, &m);

	if (r <= 0)
		return r;
	if (m.aggregates)
		fprintf(out, "%*sdropped over memory_limit %s, store unwritable: %" PRIu64
			" aggregates, %" PRIu64 " objects\n", indent, "",
			fmt_bytes(lim, m.limit_bytes), m.aggregates, m.objects);
	if (m.peak_bytes)
		fprintf(out, "%*saggregates held while the store was unwritable: at most %s\n",
			indent, "", fmt_bytes(peak, m.peak_bytes));
	if (m.stop_budget_ms)
		fprintf(out, "%*sdropped to stop within %" PRIu64 " ms: %" PRIu64 " ring records, %"
			PRIu64 " aggregates, %" PRIu64 " objects\n", indent, "", m.stop_budget_ms,
			m.stop_records, m.stop_aggregates, m.stop_objects);
	return 0;
}

int status_mem_drops_json(FILE *out, struct store *s, int64_t run_id)
{
	struct store_mem_drops m;
	int r = store_get_mem_drops(s, run_id, &m);

	if (r < 0)
		return r;
	if (m.aggregates || m.peak_bytes)
		fprintf(out, ", \"memory_limit_drops\": {\"aggregates\": %" PRIu64 ", \"objects\": %"
			PRIu64 ", \"memory_limit\": %" PRIu64 ", \"peak_bytes\": %" PRIu64 "}",
			m.aggregates, m.objects, m.limit_bytes, m.peak_bytes);
	else
		fputs(", \"memory_limit_drops\": null", out);
	if (m.stop_budget_ms)
		fprintf(out, ", \"stop_drops\": {\"records\": %" PRIu64 ", \"aggregates\": %" PRIu64
			", \"objects\": %" PRIu64 ", \"budget_ms\": %" PRIu64 "}", m.stop_records,
			m.stop_aggregates, m.stop_objects, m.stop_budget_ms);
	else
		fputs(", \"stop_drops\": null", out);
	return 0;
}
