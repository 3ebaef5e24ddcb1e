/* exact_prep (exact_prep.h): one thread, which writes only into its struct exact_prep and
 * the private_libs it was given; the join publishes both to the caller. */
#include "daemon/record/exact_prep.h"

#include <errno.h>

static void prep(struct exact_prep *p)
{
	p->err = private_libs_make(p->pl, p->find);
	for (size_t i = 0; !p->err && i < p->pl->n; i++)
		p->nsites[i] = exact_sites_of(p->pl->copy[i], &p->sites[i]);
	p->done = true;
}

static void *run(void *arg)
{
	prep(arg);
	return NULL;
}

void exact_prep_start(struct exact_prep *p, struct private_libs *pl,
		      int (*find)(const char *name, char *out, size_t n))
{
	*p = (struct exact_prep){ .pl = pl, .find = find };
	if (pthread_create(&p->thread, NULL, run, p) == 0)
		p->running = true;
	else
		prep(p);
}

int exact_prep_join(struct exact_prep *p)
{
	if (p->running) {
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	return p->done ? p->err : -ENOENT;
}
