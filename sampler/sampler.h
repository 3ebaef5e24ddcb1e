/* libmemprofd_sampler's public surface besides the malloc family it replaces: the USDT
 * probe contract the daemon attaches to (bpf/sampled.bpf.c) and a statistics call.
 * Built with SAMPLER_PREFIX (unit tests), every entry point is named mps_<name>. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define SAMPLER_DEFAULT_MEAN (512u << 10)       /* MEMPROFD_SAMPLE_BYTES default */
#define SAMPLER_DEFAULT_REGION_MB 1024          /* MEMPROFD_SAMPLER_REGION_MB default */
#define SAMPLER_PAGE 4096u                      /* region granule: every sampled object starts on one */
#define SAMPLER_BOOT_BYTES (64u << 10)          /* bootstrap arena (allocations made inside dlsym) */
#define SAMPLER_WEIGHT_SHIFT 16                 /* probe weights are fixed point, Q48.16 */

/* USDT probes (provider "memprofd"), both with semaphores:
 *   memprofd:alloc(addr, size, weight_q16, flags, caller)
 *     weight_q16: objects this sample stands for, * 2^16 (1/(1-exp(-size/mean)));
 *     flags: SAMPLER_F_*; caller: the return address into the allocating function,
 *     so the BPF side can drop the sampler's own frames from the stack.
 *   memprofd:free(addr)  -- only for objects of the region (their free is seen).
 * and the OpenTelemetry eBPF profiler's contract (provider "otel_memory", semaphores too):
 *   otel_memory:alloc(ptr, size, weight)  weight: the bytes the sample stands for
 *   otel_memory:free(ptr)                 for objects of the region, as memprofd:free.
 *   memprofd:watch(addr, hits, watched_ns, flags, granule)  at the free of a region object
 *     the sampler watched (only while a tracer holds this probe's semaphore: attaching
 *     it is the request): a read/write breakpoint on one random `granule`-byte granule
 *     of the object, armed on the allocating thread at its allocation, so only that
 *     thread's accesses are counted. hits: traps counted; watched_ns: the time the
 *     watch was enabled (traps included; it stops at the K-th trap, when the kernel
 *     disarms it); flags: K (low 16 bits) | 0x10000 when K was reached (capped)
 *     | 0x20000 when ended 20 ms after arming with the object still live (it then fires
 *     at a later sampled allocation or free, maybe on another thread) | 0x40000 when
 *     freed by another thread than the allocating one (whose accesses were not
 *     watched) | n << 24: n (<= 255) debug traps the sampler's SIGTRAP guard swallowed
 *     since the last report (sampler_trap.c); addr 0: no object, only that count (at exit).
 *     Else fires before memprofd:free of the same object. Budget: MEMPROFD_SAMPLER_WATCH_PPM
 *     (CPU time of syscalls and traps, parts per million of one CPU; default 10000, 0 off).
 * memprofd attaches memprofd:* where an object has both. */
#define SAMPLER_F_REGION 1u    /* object lives in the region: its free will fire memprofd:free */
#define SAMPLER_F_REALLOC 2u   /* made by realloc */

struct memprofd_sampler_stats {
	uint64_t mean_bytes;        /* configured mean sampling interval */
	uint64_t samples;           /* allocations the countdown selected */
	uint64_t samples_untraced;  /* ... while no tracer was attached (left to the allocator) */
	uint64_t region_allocs, region_frees;
	uint64_t region_full;       /* sampled but the region had no room: normal allocation */
	uint64_t region_live_bytes; /* pages held by live region objects */
	uint64_t boot_allocs;       /* served by the bootstrap arena */
	uint64_t bad_frees;         /* region pointers that were not a live object's start */
	uintptr_t region_lo;
	size_t region_size;
	/* In-process watches (memprofd:watch): armed; skipped because the debug registers
	 * were taken (ENOSPC/EBUSY) or the budget was spent; refused by the PMU (watches
	 * then stay off); traps counted at the frees. */
	uint64_t watch_armed, watch_busy, watch_budget, watch_errors, watch_hits;
};

#ifdef SAMPLER_PREFIX
#define SAMPLER_SYM(n) mps_##n
#else
#define SAMPLER_SYM(n) n
#endif

void SAMPLER_SYM(memprofd_sampler_get_stats)(struct memprofd_sampler_stats *out);
/* Whether p lies in the sampled-object region (the free path's one compare). */
int SAMPLER_SYM(memprofd_sampler_in_region)(const void *p);

#ifdef SAMPLER_PREFIX
/* Test hooks (prefixed build only). */
void mps_test_reset(uint64_t mean, int force_region, uint64_t seed);
void *mps_malloc(size_t n);
void *mps_calloc(size_t n, size_t size);
void *mps_realloc(void *p, size_t n);
void *mps_reallocarray(void *p, size_t n, size_t size);
void mps_free(void *p);
int mps_posix_memalign(void **out, size_t align, size_t n);
void *mps_aligned_alloc(size_t align, size_t n);
void *mps_memalign(size_t align, size_t n);
void *mps_valloc(size_t n);
void *mps_pvalloc(size_t n);
size_t mps_malloc_usable_size(void *p);
void *mps__Znwm(size_t n);
void *mps__ZnwmSt11align_val_t(size_t n, size_t align);
void mps__ZdlPv(void *p);
void mps__ZdlPvm(void *p, size_t n);
/* Last probe arguments the sampler would have passed (set whether or not a tracer is
 * attached, only in the prefixed build): */
struct mps_last_probe { uint64_t addr, size, weight_q16, flags, nalloc, nfree; };
extern struct mps_last_probe mps_last;
extern unsigned short memprofd_alloc_semaphore, memprofd_free_semaphore;
#endif
