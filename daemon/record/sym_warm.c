/* libc's DWARF opened ahead of the first naming (see sym_warm.h). The thread touches the
 * symcache and its own struct only; tid and joining are atomics. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "daemon/record/sym_warm.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define SYMWARM_BUILD_ID_MAX 128      /* hex of the longest build-id note we accept */

static void *warm(void *arg)
{
	struct sym_warm *w = arg;
	char id[SYMWARM_BUILD_ID_MAX];
	struct dwsym_frames df;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	setpriority(PRIO_PROCESS, (id_t)tid, SYMWARM_NICE);
	__atomic_store_n(&w->tid, tid, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->joining, __ATOMIC_SEQ_CST))   /* waited for already */
		setpriority(PRIO_PROCESS, (id_t)tid, w->base_nice);
	/* Any offset opens the file: a miss costs nothing more. */
	if (elf_build_id_of(w->path, id, sizeof(id)) == 0 &&
	    symcache_code(w->sc, id, w->path, NULL, 0, &df) == 0)
		dwsym_frames_free(&df);
	return NULL;
}

void sym_warm_start(struct sym_warm *w, struct symcache *sc, const char *path)
{
	w->sc = sc;
	w->tid = 0;
	w->joining = false;
	w->base_nice = getpriority(PRIO_PROCESS, 0);
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->running = sc && pthread_create(&w->thread, NULL, warm, w) == 0;
}

void sym_warm_join(struct sym_warm *w)
{
	if (!w->running)
		return;
	/* Waited for now: at our own priority, not behind every other process (whichever
	 * of the two sees the other's store raises it). */
	__atomic_store_n(&w->joining, true, __ATOMIC_SEQ_CST);
	pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_SEQ_CST);

	if (tid)
		setpriority(PRIO_PROCESS, (id_t)tid, w->base_nice);
	pthread_join(w->thread, NULL);
	w->running = false;
}
