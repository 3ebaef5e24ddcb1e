/* The daemon's stop within DAEMON_STOP_BOUND_MS: an overloaded daemon (a ring that never
 * empties, thousands of dirty aggregates, stacks to name) drains, writes and names only
 * within fixed shares of the budget, and counts what it leaves: ring records read but not
 * handled, aggregates not written (query status: stop_drops). Unread ring records after
 * the discard's share are not counted: they came after the stop. Costs: the discard is a
 * counter per record; the shares are checked per record and per aggregate. */
#include <errno.h>
#include <bpf/libbpf.h>
#include "base/clock.h"
#include "daemon/alloc/events.h"
#include "daemon/record/recorder.h"
#include "daemon/service/stop.h"

#define NS_PER_MS 1000000ULL

/* Consumes r's ring until end_ns (monotonic) or until it is empty: true if it emptied. */
static bool consume_until(struct recorder *r, uint64_t end_ns)
{
	struct ring_buffer *rb = r->stash.rb;
	int n = 0;

	if (!rb)
		return true;
	r->slice_spent = false;
	r->slice_end_ns = end_ns;
	while (mono_ns() < end_ns && (n = ring_buffer__consume(rb)) > 0 && !r->slice_spent)
		;
	r->slice_end_ns = 0;
	return !r->slice_spent && n >= 0 && mono_ns() < end_ns;
}

void stop_drain(struct recorder *r, int64_t stop_ms)
{
	uint64_t t0 = (uint64_t)stop_ms * NS_PER_MS;

	r->stop_budget_ms = DAEMON_STOP_BOUND_MS;
	if (!consume_until(r, t0 + STOP_DRAIN_MS * NS_PER_MS)) {
		r->stop_discard = true;
		consume_until(r, mono_ns() + STOP_DISCARD_MS * NS_PER_MS);
		r->stop_discard = false;
	}
	r->stop_write_end_ns = t0 + STOP_WRITE_MS * NS_PER_MS;
	r->stop_name_end_ns = t0 + STOP_NAME_MS * NS_PER_MS;
}
