/* Phase trace of record (see phases.h): the process's monotonic and CPU clocks at each
 * mark, kept in this file's one state since marks come from one thread. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "base/clock.h"
#include "daemon/record/phases.h"

static struct {
	bool on;
	uint64_t start, last, last_cpu;
} ph;

void phases_start(void)
{
	ph.on = getenv(PHASES_ENV) != NULL;
	ph.start = ph.last = mono_ns();
	ph.last_cpu = cpu_ns();
}

bool phases_on(void)
{
	return ph.on;
}

void phase_mark(const char *name)
{
	if (!ph.on)
		return;
	uint64_t now = mono_ns(), cpu = cpu_ns();

	fprintf(stderr, "memprofd: phase %s: +%.1f ms wall, +%.1f ms cpu (%.1f ms since start)\n",
		name, (double)(now - ph.last) / 1e6, (double)(cpu - ph.last_cpu) / 1e6,
		(double)(now - ph.start) / 1e6);
	ph.last = now;
	ph.last_cpu = cpu;
}
