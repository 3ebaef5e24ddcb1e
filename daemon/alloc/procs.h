/* Process instances the recorder has seen, keyed by (tgid, start_ns) so that a reused
 * PID is a new process, and the registry of binaries by build-id (path to read symbols
 * from, checked against the build-id before use so a replaced file is never trusted). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "daemon/alloc/intern.h"
#include "symbolizer/maps.h"

struct elfsym;
struct datasym;

struct proc {
	uint32_t pid, ppid;
	uint64_t start_ns;         /* task start time (monotonic ns), from BPF */
	const char *exe;           /* interned path, "" if unknown */
	const char *build_id;      /* interned hex of exe, "" if unknown */
	const char *comm;          /* interned */
	bool exited;
	int64_t exit_ns;           /* CLOCK_REALTIME */
	uint64_t exit_mono_ns;     /* its exit event's time, set before its objects are reaped:
				    * an object dead at or after it was live at exit */
	bool exit_written;
	bool gone_unseen;          /* found gone with no exit record yet (targets_end_gone) */
	struct hmap stacks;        /* BPF stack key -> struct istack * */
	struct maps maps;          /* /proc/PID/maps, loaded on demand */
	struct maps maps_kept;     /* its image's file mappings, for once it is gone
	                            * (procmaps.c: exec, last read, the parent's at fork) */
	bool maps_loaded;
	bool maps_proc;            /* maps were read from /proc, of this image */
	struct maps maps_ev;       /* files mapped executable as EV_MMAP told (procmaps.c) */
	uint64_t mm_ev;            /* the address space maps_ev belongs to */
	uint64_t exe_ino;          /* the image's executable (EV_MMAP at exec, or the parent's
	                            * at fork): /proc shows another image once it differs */
	unsigned exe_dev_major, exe_dev_minor;
	bool exe_known;
	struct unwinder *uw;       /* DWARF unwinder of this image (daemon/alloc/unwind.c), lazily */
	bool fp_checked;           /* its objects were checked for frame pointers (fpcheck.c) */
	bool fp_mode;              /* and all keep them: BPF walks them (unwind_modes) */
	bool fp_reached_own;       /* a walked stack reached the program's own frames */
	signed char fp_shape;      /* 1: its executable keeps frame pointers, so every stack
	                            * ends as their walks do (ustack.c fp_shape), whichever
	                            * mode takes it; -1: no; 0: not known yet */
	uint64_t stack_top;        /* main stack copied up to here (ustack.c), 0: whole */
	bool deep_copy;            /* a walk ran past an ALLOC_USTACK_MAX copy: BPF copies more */
	unsigned maps_reloads;     /* re-reads of maps for frames outside them (ustack.c) */
	bool forget;               /* recorder_forget_exited's scratch mark */
};

struct binary {
	const char *build_id;      /* interned, true length */
	unsigned char raw[20];     /* the same, zero padded: the table's key */
	const char *path;          /* interned, where it can be opened */
	struct elfsym *sym;        /* opened lazily */
	bool sym_failed;
	struct datasym *ds;        /* data symbols, opened lazily by access attribution */
	bool ds_failed;
	signed char fp;            /* keeps frame pointers: 1 yes, -1 no, 0 not checked */
	int fd;                    /* kept open when path dies with a process, else -1 */
	const char *fd_path;       /* "/proc/self/fd/N" of fd, interned; NULL without one */
};

/* Descriptors kept for binaries named through a process (/proc/PID/root/..., /proc/PID/
 * exe): those paths die with it, before its frames are named. Beyond this many, such
 * binaries keep only their path. */
#define BIN_KEPT_FDS_MAX 256

struct proctab {
	struct hmap procs;         /* hash(tgid, start) -> struct proc * */
	struct hmap bins;          /* hash(20-byte padded build-id) -> struct binary * */
	struct hmap files;         /* hash(dev, inode, path) -> struct filebin * (ustack.c) */
	struct interner *in;
	unsigned kept_fds;         /* binaries holding a descriptor (<= BIN_KEPT_FDS_MAX) */
};

struct proc *proc_find(struct proctab *t, uint32_t tgid, uint64_t start_ns);
/* Whether process pid still is the one that started at start_ns (task start time,
 * CLOCK_MONOTONIC ns, as BPF reports it): false once it ended (a zombie too) or its PID
 * was reused. */
bool proc_running(uint32_t pid, uint64_t start_ns);
/* Finds or creates; a new process takes exe/comm from /proc if it is still alive. */
struct proc *proc_get(struct proctab *t, uint32_t tgid, uint64_t start_ns);
void proc_set_exe(struct proctab *t, struct proc *p, const char *path);
/* Removes p from the table and frees it; no aggregate may still point at it. */
void proc_forget(struct proctab *t, struct proc *p);
void proctab_free(struct proctab *t);

/* Registers the file at path (reads its build-id); returns the binary or NULL. */
struct binary *bin_register(struct proctab *t, const char *path, const char *open_path);
/* Binary whose build-id, zero padded to 20 bytes, equals raw (as the kernel reports it). */
struct binary *bin_by_raw(struct proctab *t, const unsigned char raw[20]);
/* Where we can open a file the process names `logical`: through /proc/PID/root when the
 * process lives in another mount namespace (a container), else the path itself. */
void proc_file_path(const struct proc *p, const char *logical, char *out, size_t n);
/* Registers the file of p's mapping e (through /proc/PID/map_files, checked to be the
 * file the maps name); NULL when it cannot be read or is no longer mapped there. */
struct binary *bin_register_map(struct proctab *t, const struct proc *p, const struct map_entry *e);
/* Registers every file mapped by the live process (via /proc/PID/map_files). */
void bin_scan_process(struct proctab *t, struct proc *p);
/* Path to open for the binary with this build-id (hex), or NULL if none is known. */
const char *bin_path(struct proctab *t, const char *build_id);
/* The same, but its kept descriptor's /proc/self/fd/N when it has one: that opens the
 * very file after the process that named it is gone. For reading, never for storing. */
const char *bin_open_path(struct proctab *t, const char *build_id);
/* Function symbol (demangled and mangled, interned) at a return address in a binary. */
int bin_function(struct proctab *t, const char *build_id, uint64_t offset,
		 const char **demangled, const char **mangled);
