/* record's event ring made on a thread while the main thread opens and loads the BPF
 * object (issue 18): the kernel allocates and zeroes a 64 MiB ring in ~5-17 ms, a third
 * of the load's kernel time, independent of everything else in it; the load then adopts
 * it (bpf_map__reuse_fd) instead of making its own. Invariant: the fd is the thread's
 * until ring_bg_join, and the caller closes it once the object holds its own copy. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define RING_BG_NAME "events"     /* the BPF object's ring map (bpf/alloc_common.bpf.h) */

struct ring_bg {
	size_t bytes;
	pthread_t thread;
	bool running;                 /* started, not joined */
	int fd;                       /* the ring's fd, or -errno */
};

/* Starts making a ring of bytes (a power of two, page multiple). */
void ring_bg_start(struct ring_bg *b, size_t bytes);
/* The ring's fd (the caller's to close), or -errno (the load then makes its own). */
int ring_bg_join(struct ring_bg *b);
