/* The daemon's stop within a bound: SIGTERM -> exit within DAEMON_STOP_BOUND_MS even when
 * the daemon was fed faster than it keeps up (stop.c). */
#pragma once
#include <stdint.h>

struct recorder;

#define STOP_DRAIN_MS 400      /* ring records handled until signal + this */
#define STOP_DISCARD_MS 100    /* then what is left is counted, not handled, this long */
#define STOP_WRITE_MS 900      /* the final flush writes aggregates until signal + this */
#define STOP_FLUSH_MS 1200     /* and has committed by then (the lock's wait included) */
#define STOP_NAME_MS 1700      /* new stacks named until then (the rest: the next writer) */
#define DAEMON_STOP_BOUND_MS 2000   /* signal -> exit, probes and store closed */

/* Handles the ring's records until stop_ms + STOP_DRAIN_MS, then counts (r->stop_records)
 * and discards what is left for at most STOP_DISCARD_MS more; sets the final flush's
 * deadlines from stop_ms (CLOCK_MONOTONIC ms of the signal). */
void stop_drain(struct recorder *r, int64_t stop_ms);
