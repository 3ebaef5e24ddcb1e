/* Cleanup attributes (systemd's style): a variable declared _cleanup_free_ or
 * _cleanup_close_ is released when it goes out of scope, on every return path.
 * Each helper accepts the "nothing held" value (NULL, -1), so early returns need no care. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) { if (*fd >= 0) close(*fd); }

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
