/* Multi-uprobe links (Linux >= 6.6) register all of a binary's probes in one go: each
 * classic uprobe costs an RCU grace period (~100 ms here) to attach and again to detach,
 * ten seconds for the ~45 probes of libc and libstdc++. libbpf 1.1 predates them:
 * programs loaded for one get UPROBE_MULTI_ATTACH_TYPE as expected attach type, and the
 * link is made here with the raw syscall (the UAPI layout is fixed). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UPROBE_MULTI_ATTACH_TYPE 48    /* BPF_TRACE_UPROBE_MULTI */

/* Whether the kernel has multi-uprobe links (and MEMPROFD_NO_UPROBE_MULTI is unset). */
bool uprobe_multi_supported(void);
/* Attaches program prog_fd at n file offsets of path in every process, as uretprobes
 * when ret, each with its cookie. Returns the link's fd (close it to detach) or -errno. */
int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs,
		      const uint64_t *cookies, size_t n, bool ret);
/* The same with semaphores (ref_ctr_offs: n file offsets of counters the kernel
 * increments while a probe is attached, 0 for none; NULL: none at all) and, when
 * pid > 0, only in process pid (all its threads, across exec; not its children). */
int uprobe_multi_link_pid(int prog_fd, const char *path, const uint64_t *offs,
			  const uint64_t *ref_ctr_offs, const uint64_t *cookies, size_t n,
			  bool ret, int pid);
