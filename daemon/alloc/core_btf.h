/* A minimized kernel BTF per BPF object (issue 18): libbpf's CO-RE relocation searches
 * the whole vmlinux BTF (~130k types) once per local type, ~65M of the ~80M instructions
 * a skeleton's load spent in user space; against the few types an object uses
 * (`bpftool gen min_core_btf`, ~2 KiB) the load costs ~15M. Cached under
 * $XDG_CACHE_HOME/memprofd/btf (else ~/.cache/...), one file per (kernel, object) key:
 * the kernel's release, version, machine and BTF size, and the object's CRC-32 and size.
 * A missing file is made by a detached, niced process for the next run (this one loads
 * against vmlinux as before), so no recording waits for bpftool. A file is used only if
 * it is a regular file of ours, not a symlink, at most CORE_BTF_MAX bytes; libbpf parses
 * and checks it, and the kernel verifies every program against its own BTF. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <bpf/libbpf.h>

#define CORE_BTF_SUBDIR "memprofd/btf"
#define CORE_BTF_MAX (1u << 20)          /* bytes of a minimized BTF file */
#define CORE_BTF_VMLINUX "/sys/kernel/btf/vmlinux"
#define CORE_BTF_OFF_ENV "MEMPROFD_NO_CORE_BTF_CACHE"   /* set: always the whole vmlinux BTF */

struct core_btf {
	char dir[PATH_MAX];
	char path[PATH_MAX];      /* the object's file in dir */
	bool have;                /* path is there and usable: pass it as btf_custom_path */
	bool can_make;            /* a directory and a key: core_btf_make_later may run */
};

/* Looks up the minimized BTF of object obj (name: its skeleton's, for the file name). */
void core_btf_find(struct core_btf *b, const char *name, const void *obj, size_t size);
/* Starts a detached process that makes b->path from obj with bpftool (nothing when
 * bpftool is not installed); returns at once. */
void core_btf_make_later(const struct core_btf *b, const void *obj, size_t size);

/* One BPF skeleton as core_btf_load drives it. open opens the object with oo (its
 * btf_custom_path is the minimized file or NULL) and keeps the skeleton where arg says;
 * configure sets what the load needs; destroy frees the skeleton and forgets it. Each
 * returns 0 or -errno. */
struct core_btf_skel {
	const char *name;              /* the cache file's prefix */
	const void *obj;               /* the object's ELF bytes (the cache key) */
	size_t objsz;
	int (*open)(void *arg, const struct bpf_object_open_opts *oo);
	int (*configure)(void *arg);
	int (*load)(void *arg);
	void (*destroy)(void *arg);
	void *arg;
};

enum core_btf_stage { CORE_BTF_OPEN, CORE_BTF_CONFIGURE, CORE_BTF_LOAD };

/* Opens, configures and loads k against its cached minimized kernel BTF where there is
 * one; a file that does not serve (open or load refused) is dropped for the whole
 * vmlinux BTF and made again for the next run. 0 with *used telling whether the file
 * served, or the failing stage's -errno with *stage set (the skeleton may be left for
 * the caller's cleanup). */
int core_btf_load(const struct core_btf_skel *k, bool *used, enum core_btf_stage *stage);

