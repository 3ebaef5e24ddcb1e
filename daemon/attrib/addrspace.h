/* addrspace: what an address of a traced process is, for access attribution (attrib's
 * region and datasym callbacks). Regions come from the process's cached /proc maps,
 * reread when an address falls in no mapping (new mmap, dlopen), at most once per
 * ADDRSPACE_MAPS_RETRY_NS per process; a binary's data symbols are opened once per
 * binary, and the binary is found once per mapped file by (device, inode), so a sample
 * in static data costs lookups, never a file open. */
#pragma once
#include <stdint.h>
#include "daemon/attrib/attrib.h"
#include "daemon/alloc/procs.h"

#define ADDRSPACE_MAPS_RETRY_NS 20000000ULL   /* a miss rereads a process's maps at most this often */
#define ADDRSPACE_FILES_MAX 65536             /* mapped files remembered (then looked up each time) */

struct addrspace;

int addrspace_open(struct addrspace **out, struct proctab *t);
void addrspace_close(struct addrspace *as);
/* p is about to be freed (proc_forget): its retry clock goes with it. */
void addrspace_forget(struct addrspace *as, const struct proc *p);
/* attrib_ops.region: (tgid, start_ns)'s region of addr; REGION_NONE for an unknown process. */
void addrspace_region(struct addrspace *as, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		      uint64_t sp, struct attrib_region *out);
/* attrib_ops.datasym: 0 with out filled (symbol "" where none covers addr), or -ENOENT
 * when the file is not an ELF binary. */
int addrspace_datasym(struct addrspace *as, const struct attrib_region *r, uint64_t addr,
		      struct attrib_datasym *out);
/* Mapped files whose binary was looked up / found in the cache (for tests and stats). */
void addrspace_stats(const struct addrspace *as, uint64_t *file_lookups, uint64_t *file_hits,
		     uint64_t *maps_reads);
