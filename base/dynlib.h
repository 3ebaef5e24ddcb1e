/* Libraries only some commands use (libcurl, libdebuginfod, libcrypto, libsystemd) are
 * opened on first use instead of linked: linked, they and their ~40 dependencies cost
 * every memprofd start ~17M instructions of dynamic linking (issue 18). A dynlib is
 * loaded at most once per process (thread-safe); its symbols stay valid until exit. */
#pragma once
#include <pthread.h>
#include <stddef.h>

struct dynlib {
	const char *soname;        /* e.g. "libcurl.so.4": the ABI the headers describe */
	const char *const *names;  /* n symbol names, resolved into fns[0..n) in order */
	size_t n;
	void **fns;                /* the caller's table of function pointers, n long */
	pthread_mutex_t lock;
	int state;                 /* 0 not tried, 1 loaded, -errno failed (kept) */
	int loud;                  /* print the first failure (else the caller reports it) */
	char err[256];             /* why it failed: dlerror()'s line */
};

/* A dynlib over a static table `tab` of function pointers, one per name of `names_` (checked
 * at compile time). Such tables are the process's only copy of the library's entry points. */
#define DYNLIB_INIT(so, names_, tab, loud_) { .soname = (so), .names = (names_), .loud = (loud_), \
	.n = sizeof(names_) / sizeof((names_)[0]) + 0 * sizeof(struct { int _x; \
		_Static_assert(sizeof(tab) == sizeof(names_) / sizeof((names_)[0]) * sizeof(void *), \
			       "one function pointer per name"); }), \
	.fns = (void **)&(tab), \
	.lock = PTHREAD_MUTEX_INITIALIZER }

/* Opens the library and resolves every name: 0, or -ENOENT (library or a symbol missing;
 * when loud, the first failure prints `memprofd: loading SONAME: why`), the same answer
 * on every call. */
int dynlib_load(struct dynlib *l);
/* "libcurl.so.4: cannot open shared object file..." after a failed dynlib_load. */
const char *dynlib_error(const struct dynlib *l);
