/* `--alloc sampled` (daemon/alloc/alloc_sampled.c): allocations sampled in the process by
 * libmemprofd_sampler and read through its USDT probes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/sampled.h"
#include "daemon/record/recorder.h"

/* ---- `--alloc sampled` (daemon/alloc/alloc_sampled.c) ------------------------------------
 * Its own BPF object and ring buffer; shares the recorder's interner, process table
 * and aggregates. Counters use alloc.h's enum alloc_counter indices (so recorder_flush
 * can store them as exact mode's), followed by bpf/sampled.h's enum sampled_counter. */
struct sampled;
/* Loads and attaches the lifecycle programs; *out is set even on failure (close it). */
int sampled_open(struct sampled **out, struct recorder *r);
/* Attaches memprofd:alloc/free in the ELF file path (pid -1: every process that maps
 * it, including ones started later), else the OpenTelemetry contract's otel_memory:
 * alloc/free. 1 memprofd's attached, SAMPLED_OTEL otel_memory's, 0 path has neither,
 * -errno. */
#define SAMPLED_OTEL 2
int sampled_attach_binary(struct sampled *s, const char *path, int pid);
/* memprofd:watch (which turns the sampler's in-process watches on) for the samplers
 * sampled_attach_binary attached before the recorder's watch opened (it attaches it
 * itself once the watch is open); call after access_setup. Returns the probes attached
 * (none when the watch did not open or r->watch_inprocess is off). sampled_attach_links
 * never attaches it. */
int sampled_attach_watch(struct sampled *s);
/* From now on a pid -1 attachment (sampled_attach_binary) leaves memprofd:watch out: the
 * caller links it per target process (record, daemon/record/watch_targets.c). */
void sampled_watch_per_target(struct sampled *s);
/* memprofd:watch of path for pid alone, attached now: 1, 0 (watch or in-process watches
 * off), -errno. */
int sampled_attach_watch_pid(struct sampled *s, const char *path, int pid);
/* The memprofd:watch sites of the sampler file at path and the program to link them to
 * (*prog_fd), for multi-uprobe links the caller makes per process (the daemon's selected
 * processes, daemon/service/watch_links.c). 0, -EOPNOTSUPP (no watch, in-process watches
 * off, or no multi-uprobe links), -ENOENT (no such probe), -errno. */
struct usdt_sites;
int sampled_watch_sites(struct sampled *s, const char *path, struct usdt_sites *out, int *prog_fd);
/* The same, with the two links (memprofd:alloc, memprofd:free) handed to the caller, who
 * destroys them (usdt_link_destroy) to detach, and without registering path for symbols
 * (the daemon attaches each sampler file once, through a descriptor it holds). */
#define SAMPLED_LINKS 2
#define SAMPLED_WATCH_PENDING 16   /* samplers attached before the watch opened, remembered */
#include "daemon/alloc/usdt_multi.h"
int sampled_attach_links(struct sampled *s, const char *path, int pid,
			 struct usdt_link out[SAMPLED_LINKS]);
/* Whether the file at path may hold otel_memory probes (its bytes name the provider). */
bool sampled_may_have_otel(const char *path);
/* The sampler a running process has (preloaded/dlopen'ed library, or linked into its
 * executable): 1 attached, 0 none, -errno. */
int sampled_attach_pid(struct sampled *s, int pid);
/* The same for a child of a --pid target, read at its fork record: errors are returned,
 * not logged (-ENOENT: it is gone already). */
int sampled_attach_child(struct sampled *s, int pid);
/* One error line: pid has no sampler, and the ways to load it (unit Environment=, -l). */
void sampled_report_missing(int pid, const char *sampler_path);
/* The two ways to load the sampler, as the end of such a line ("restart it with ..."). */
void sampled_missing_hint(int pid, const char *sampler_path, char *buf, size_t n);
/* Path of libmemprofd_sampler.so to inject: $MEMPROFD_SAMPLER, next to memprofd's build
 * or install prefix, then the system library directories. 0 or -ENOENT. */
int sampled_find_library(char *out, size_t outsz);
/* A copy of environ with LD_PRELOAD=sampler_path[:old LD_PRELOAD]; free with
 * sampled_free_env(). 0 or -ENOMEM. */
int sampled_setup_child_env(char ***envp_out, const char *sampler_path);
void sampled_free_env(char **envp);
int sampled_add_target(struct sampled *s, uint32_t pid);
int sampled_poll(struct sampled *s, int timeout_ms, bool *more);
/* Every record the BPF side made before this (CLOCK_MONOTONIC ns) has been consumed by
 * sampled_poll: the allocation watermark for attribution. */
uint64_t sampled_watermark(const struct sampled *s);
int sampled_drain(struct sampled *s);          /* consumes everything queued */
int sampled_targets_fd(const struct sampled *s);
int sampled_live_fd(const struct sampled *s);      /* its live map (struct live_key keys) */
int sampled_ring_fd(const struct sampled *s);      /* epoll fd of its ring buffer */
/* Thinning (bpf/sampled.bpf.c keep_q16): keeps each sample with probability keep, its
 * weight divided by keep. Returns the probability in force (keep rounded to 1/65536). */
double sampled_set_keep(struct sampled *s, double keep);
/* With access attribution: the BPF side also sends each sampled allocation (EV_SALLOC). */
void sampled_send_allocs(struct sampled *s, bool on);
struct attrib_object;
/* A sampled object settled in attribution: aggregated with its accesses, weighted. */
void sampled_object(struct sampled *s, const struct attrib_object *o);
int sampled_reap(struct sampled *s, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns, uint32_t cpu);
void sampled_counters(struct sampled *s, uint64_t out[SCNT_MAX]);
/* Sampled allocation and free records the BPF side made so far (what thinning reduces):
 * those read, plus every record a full ring lost. Counting only those read would measure
 * the reader's speed, not the rate, whenever the reader falls behind. Walks the per-CPU
 * counters once (for periodic use). */
uint64_t sampled_records(struct sampled *s);
/* Samples aggregated so far and the objects they stand for (sum of weights). */
void sampled_stats(const struct sampled *s, uint64_t *samples, double *est_objects);
void sampled_close(struct sampled *s);
