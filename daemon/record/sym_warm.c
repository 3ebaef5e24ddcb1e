/* libc's DWARF opened ahead of the first naming (see sym_warm.h). The thread touches the
 * symcache and its heap job only (never the caller's struct, which may be gone after an
 * abandon); the job's tid and joining fields are atomics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "daemon/record/sym_warm.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define SYMWARM_BUILD_ID_MAX 128      /* hex of the longest build-id note we accept */

struct warm_job {
	struct symcache *sc;
	pid_t tid;                    /* the thread's id, for its priority; 0 until known */
	bool joining;                 /* sym_warm_join has begun: run at base_nice */
	int base_nice;                /* the starting thread's nice value */
	char path[];
};

static void *warm(void *arg)
{
	struct warm_job *j = arg;
	char id[SYMWARM_BUILD_ID_MAX];
	struct dwsym_frames df;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	setpriority(PRIO_PROCESS, (id_t)tid, SYMWARM_NICE);
	__atomic_store_n(&j->tid, tid, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&j->joining, __ATOMIC_SEQ_CST))   /* waited for already */
		setpriority(PRIO_PROCESS, (id_t)tid, j->base_nice);
	/* Any offset opens the file: a miss costs nothing more. */
	if (elf_build_id_of(j->path, id, sizeof(id)) == 0 &&
	    symcache_code(j->sc, id, j->path, NULL, 0, &df) == 0)
		dwsym_frames_free(&df);
	return NULL;
}

void sym_warm_start(struct sym_warm *w, struct symcache *sc, const char *path)
{
	size_t len = strlen(path) + 1;
	struct warm_job *j = sc ? calloc(1, sizeof(*j) + len) : NULL;

	w->running = false;
	w->job = j;
	if (!j)
		return;
	j->sc = sc;
	j->base_nice = getpriority(PRIO_PROCESS, 0);
	memcpy(j->path, path, len);
	w->running = pthread_create(&w->thread, NULL, warm, j) == 0;
	if (!w->running) {
		free(j);
		w->job = NULL;
	}
}

void sym_warm_join(struct sym_warm *w)
{
	if (!w->running)
		return;
	/* Waited for now: at our own priority, not behind every other process (whichever
	 * of the two sees the other's store raises it). */
	__atomic_store_n(&w->job->joining, true, __ATOMIC_SEQ_CST);
	pid_t tid = __atomic_load_n(&w->job->tid, __ATOMIC_SEQ_CST);

	if (tid)
		setpriority(PRIO_PROCESS, (id_t)tid, w->job->base_nice);
	pthread_join(w->thread, NULL);
	free(w->job);
	w->job = NULL;
	w->running = false;
}

void sym_warm_abandon(struct sym_warm *w)
{
	if (!w->running)
		return;
	pthread_detach(w->thread);
	w->job = NULL;                /* the thread's now, until the process exits */
	w->running = false;
}
