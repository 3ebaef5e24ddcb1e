/* perf's event clock against CLOCK_MONOTONIC. Records of an event on the default clock
 * (and a hardware tracer's timestamps converted through the mmap page's time_zero) are
 * in perf_clock() = local_clock() ns, which on arm64 is sched_clock: not the
 * CLOCK_MONOTONIC the allocation events use, and apart by an offset that NTP slews.
 * The offset is measured, not assumed: two dummy events on this thread, one on the
 * default clock and one with use_clockid = CLOCK_MONOTONIC, both stamp the same
 * PERF_RECORD_COMM (a prctl(PR_SET_NAME) to the current name). */
#pragma once
#include <stdint.h>

#define PERF_CLOCK_RECAL_NS 1000000000ULL   /* callers re-measure at most this often */

/* CLOCK_MONOTONIC - perf clock, in ns. 0 or -errno (perf_event_open, mmap, no record). */
int perf_clock_offset(int64_t *mono_minus_perf);
