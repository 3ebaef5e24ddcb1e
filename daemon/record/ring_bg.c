/* ring_bg (ring_bg.h): one bpf_map_create on one thread, joined once. */
#include "daemon/record/ring_bg.h"

#include <errno.h>
#include <bpf/bpf.h>

static void make(struct ring_bg *b)
{
	b->fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, RING_BG_NAME, 0, 0, (__u32)b->bytes, NULL);
	if (b->fd < 0)
		b->fd = -errno;
}

static void *run(void *arg)
{
	make(arg);
	return NULL;
}

void ring_bg_start(struct ring_bg *b, size_t bytes)
{
	*b = (struct ring_bg){ .bytes = bytes, .fd = -ENOENT };
	if (pthread_create(&b->thread, NULL, run, b) == 0)
		b->running = true;
	else
		make(b);
}

int ring_bg_join(struct ring_bg *b)
{
	int fd;

	if (b->running) {
		pthread_join(b->thread, NULL);
		b->running = false;
	}
	fd = b->fd;
	b->fd = -ENOENT;   /* handed over once */
	return fd;
}
