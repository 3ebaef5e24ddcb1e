/* The store opened on a thread (see store_bg.h). The thread calls store_open alone and
 * writes only into its struct store_bg, which the main thread reads after the join. */
#include <errno.h>
#include <string.h>
#include "daemon/record/store_bg.h"
#include "store/store.h"

static void *open_store(void *arg)
{
	struct store_bg *b = arg;

	b->err = store_open(&b->store, b->path, STORE_RDWR, b->errbuf, sizeof(b->errbuf));
	return NULL;
}

void store_bg_start(struct store_bg *b, const char *path)
{
	b->path = path;
	b->store = NULL;
	b->errbuf[0] = '\0';
	b->running = pthread_create(&b->thread, NULL, open_store, b) == 0;
	if (!b->running)
		open_store(b);
}

int store_bg_join(struct store_bg *b, struct store **out)
{
	if (b->running) {
		pthread_join(b->thread, NULL);
		b->running = false;
	}
	*out = b->store;
	return b->err;
}
