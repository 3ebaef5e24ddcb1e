/* A one-line progress bar on stderr for long exports: drawn only when stderr is a
 * terminal and the job is big enough, redrawn at most once per percent, erased at the end. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct progress {
	bool on;
	const char *what;
	uint64_t total, done;
	int last_pct;
};

/* Draws nothing unless enabled, stderr is a TTY and total >= min_total. */
void progress_start(struct progress *p, const char *what, uint64_t total, uint64_t min_total,
		    bool enabled);
void progress_step(struct progress *p);
void progress_end(struct progress *p);
