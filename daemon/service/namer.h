/* The daemon's namer: a child process that names the store's bare frames (namer.c), so
 * that no lookup (a cold DWARF, a debuginfod that answers late) ever holds the loop. */
#pragma once
#include <stdint.h>
#include <sys/types.h>

#define NAMER_POLL_MS 1000      /* a round at least this often, woken or not */
#define NAMER_BATCH 32          /* frames named per transaction: the write lock is held
                                 * far below the daemon's 200 ms busy timeout */
#define NAMER_RESCAN_ROUNDS 600 /* then from the oldest frame again: ids retention freed
                                 * may come back below the mark */
#define NAMER_BUSY_MS 5000      /* its commit waits this long for the daemon's flush */
#define NAMER_ELF_MAX 64        /* ELF symbol tables kept open (by build-id) */
#define NAMER_CACHE_BYTES ((size_t)128 << 20)   /* its DWARF cache (symcache) */

struct namer {
	pid_t pid;                  /* 0: none (the recorder names in its own loop) */
	int wake_fd;                /* the pipe's write end: a byte per flush, EOF to finish */
};

/* Forks the namer for the store at db, before the daemon opens it (no SQLite state
 * crosses the fork); keep_fd... are the parent's fds the child closes (the database's
 * flock). 0, or -errno (then the daemon names in its loop). */
int namer_start(struct namer *n, const char *db, const int *close_fds, int nclose);
/* After a flush committed: a round now (never blocks; a full pipe has one pending). */
void namer_wake(struct namer *n);
/* The namer's CPU time so far (ns; 0: none or unread): the governor counts it as the
 * daemon's own. */
uint64_t namer_cpu_ns(const struct namer *n);
/* EOF: the namer names what is bare and exits; waited for until deadline_ms
 * (CLOCK_MONOTONIC), then killed (what is left, the next daemon's namer names). Returns
 * 1 when it finished, 0 when it was killed or there was none. */
int namer_stop(struct namer *n, int64_t deadline_ms);
