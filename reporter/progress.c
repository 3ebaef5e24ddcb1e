/* Progress bar for long exports (see progress.h). Writes to stderr only, never to the
 * export itself; a non-TTY stderr (logs, tests) sees nothing. */
#include <stdio.h>
#include <unistd.h>

#include "reporter/progress.h"

#define PROGRESS_WIDTH 40   /* cells in the bar */

void progress_start(struct progress *p, const char *what, uint64_t total, uint64_t min_total,
		    bool enabled)
{
	*p = (struct progress){ .what = what, .total = total, .last_pct = -1 };
	p->on = enabled && total && total >= min_total && isatty(STDERR_FILENO);
}

void progress_step(struct progress *p)
{
	if (!p->on)
		return;
	p->done++;

	int pct = (int)(p->done >= p->total ? 100 : p->done * 100 / p->total);

	if (pct == p->last_pct)
		return;
	p->last_pct = pct;

	char bar[PROGRESS_WIDTH + 1];
	int fill = pct * PROGRESS_WIDTH / 100;

	for (int i = 0; i < PROGRESS_WIDTH; i++)
		bar[i] = i < fill ? '#' : ' ';
	bar[PROGRESS_WIDTH] = '\0';
	fprintf(stderr, "\r%s [%s] %3d%%", p->what, bar, pct);
	fflush(stderr);
}

void progress_end(struct progress *p)
{
	if (p->on && p->last_pct >= 0)
		fprintf(stderr, "\r\033[K");
	p->on = false;
}
