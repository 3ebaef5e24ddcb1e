/* dynlib_load (base/dynlib.h): dlopen with RTLD_LAZY|RTLD_LOCAL, then dlsym of each
 * name into the caller's table; all or nothing, remembered under the dynlib's lock; a
 * loud dynlib's failure is printed once.
 * The handle is never closed: the table points into it for the rest of the process. */
#include "base/dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "base/log.h"

static int load_locked(struct dynlib *l)
{
	void *h = dlopen(l->soname, RTLD_LAZY | RTLD_LOCAL);
	const char *e;

	if (!h) {
		e = dlerror();
		snprintf(l->err, sizeof(l->err), "%s", e ? e : l->soname);
		return -ENOENT;
	}
	for (size_t i = 0; i < l->n; i++) {
		void *f = dlsym(h, l->names[i]);

		if (!f) {
			snprintf(l->err, sizeof(l->err), "%s: no symbol %s", l->soname, l->names[i]);
			for (size_t j = 0; j < i; j++)
				l->fns[j] = NULL;
			dlclose(h);
			return -ENOENT;
		}
		l->fns[i] = f;
	}
	return 1;
}

int dynlib_load(struct dynlib *l)
{
	int s = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);

	if (s > 0)   /* loaded: the table is complete (published by the release below) */
		return 0;
	pthread_mutex_lock(&l->lock);
	if (!l->state) {
		__atomic_store_n(&l->state, load_locked(l), __ATOMIC_RELEASE);
		if (l->state < 0 && l->loud)   /* said once: later calls give the same answer silently */
			log_error("loading %s: %s", l->soname, l->err);
	}
	s = l->state;
	pthread_mutex_unlock(&l->lock);
	return s > 0 ? 0 : s;
}

const char *dynlib_error(const struct dynlib *l)
{
	return l->err[0] ? l->err : "not loaded";
}
