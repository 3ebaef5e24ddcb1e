/* In-process watches of sampled objects (sampler_watch.c), the sampler's internal API:
 * arm at a sampled region allocation, end at its free, forget in a forked child. All
 * three are safe inside the malloc paths: no allocation, no lock held across a call out. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define SAMPLER_WATCH_MAX 64             /* watches alive at once in a process */
#define SAMPLER_WATCH_PER_THREAD 2       /* of a thread's 4 debug registers, the rest the daemon's */
#define SAMPLER_WATCH_HITS 16            /* K: traps before the kernel disarms a watch */
#define SAMPLER_WATCH_GRANULE 8          /* bytes one debug register watches */
#define SAMPLER_WATCH_PPM 10000          /* default budget: 1% of one CPU (parts per million) */
#define SAMPLER_WATCH_TRAP_NS 50000      /* a trap's charged cost: the recorder calibrated 21-140 us
                                         * here under load (~11 us idle); charging 20 us let
                                         * the traps take several times the budget */
#define SAMPLER_WATCH_F_CAPPED 0x10000u  /* probe flags: K traps taken, the watch disarmed */
#define SAMPLER_WATCH_F_EXPIRED 0x20000u /* ended at SAMPLER_WATCH_LIFE_NS, object still live */
#define SAMPLER_WATCH_F_OTHER_THREAD 0x40000u /* freed by a thread other than the allocating one */
#define SAMPLER_WATCH_STRAY_SHIFT 24  /* probe flags: debug traps the guard swallowed since */
#define SAMPLER_WATCH_STRAY_MAX 255   /* the last report (sampler_trap.c), at most this many */
#define SAMPLER_WATCH_LIFE_NS 20000000ull /* a watch's longest life (it holds a debug register) */

struct sampler_watch_stats { uint64_t armed, busy, budget, errors, hits; };

/* Budget from MEMPROFD_SAMPLER_WATCH_PPM (0 turns watches off), a trap charged trap_ns
 * (MEMPROFD_SAMPLER_WATCH_TRAP_NS; 0: SAMPLER_WATCH_TRAP_NS). Called from init(). */
void sampler_watch_init(uint64_t ppm, uint64_t trap_ns);
/* A sampled region object p of n bytes was made on this thread; rnd picks its granule. */
void sampler_watch_arm(void *p, size_t n, uint64_t rnd);
/* p is being freed: its watch (if any) is read, closed and reported (memprofd:watch). */
void sampler_watch_end(void *p);
/* In a forked child: the parent's watches are not the child's; close their copies. */
void sampler_watch_forget(void);
void sampler_watch_get_stats(struct sampler_watch_stats *out);
