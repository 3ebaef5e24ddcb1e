/* `--access` (daemon/access/access.c): picks, opens and drives the access-sample source
 * (soft, pmu or spe) and attribution for the recorder (r->soft, r->spe, r->attrib). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/record/recorder.h"

/* access_setup picks and opens the source (after exact_open or sampled_open: it shares
 * the targets map) and prints which one it uses and why others did not open. A source that cannot open is an error when required (asked for); the
 * default records on without access sampling and says why on stderr (then r->attrib is
 * NULL). */
int access_setup(struct recorder *r, const char *mode, bool required, uint64_t freq,
		 uint64_t period);
int access_poll(struct recorder *r);
void access_forget(struct recorder *r, uint32_t tgid);
/* A process exited (after its allocations were reaped): attribution ends its live objects. */
void access_exit(struct recorder *r, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns);
void access_finish(struct recorder *r, uint64_t end_ns);
/* One stderr line: the source, its samples, and the accesses by class. */
void access_report(struct recorder *r);
void access_close(struct recorder *r);
