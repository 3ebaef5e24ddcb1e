/* Contract between alloc.bpf.c and daemon/alloc/alloc_exact.c: the ring-buffer records and the
 * maps' keys and values. Every record starts with struct ev_hdr; sizes are fixed here so
 * both sides agree without BTF. */
#pragma once

#define ALLOC_MAX_FRAMES 64        /* user frames BPF's frame-pointer walk keeps per context */
#define ALLOC_MAX_UFRAMES 512      /* user frames a DWARF walk keeps per context (clang's
                                    * recursive-descent parser: 150-400); >= ALLOC_MAX_FRAMES */
#define ALLOC_STACK_CHUNK 1024     /* bytes of user stack the walk copies at once (power of 2) */
#define ALLOC_LIVE_MAX (1 << 20)   /* live allocations tracked at once (map, no prealloc) */
#define ALLOC_STACKS_MAX 65536     /* stack keys remembered as already sent (LRU) */
#define ALLOC_TARGETS_MAX 16384    /* processes traced at once */
#define ALLOC_HOLD_FILES_MAX 256   /* executables whose execs are held (exact mode) */
#define ALLOC_HELD_MAX 4096        /* processes held at once, until the daemon releases */
#define NEWEXEC_HELD 1             /* ev_newexec.pad: the process was stopped at its exec */
#define ALLOC_HOLDS_RING_BYTES (64 << 10)   /* hold records waiting for the hold thread */
#define ALLOC_RINGBUF_BYTES (16 << 20)
/* `record`'s exact mode: room for a start-up burst of DWARF stack copies (python3's
 * ~1,200 at up to 24 KiB each) while the reader unwinds; the daemon keeps the default so
 * its resident ring stays small. The BPF side reads the size from the ring itself. */
#define ALLOC_RECORD_RINGBUF_BYTES (64 << 20)
#define ALLOC_EXEC_NAME 256
#define ALLOC_USTACK_MIN 1024      /* the shortest copy of a filling ring: the innermost
                                    * frames, a truncated context rather than none */
#define ALLOC_USTACK_MAX 24576     /* user stack bytes copied for DWARF unwinding: sqlite3's
                                    * shell needs more than 16 KiB to reach main; a per-CPU
                                    * map value (the record's scratch) is at most 32 KiB */
#define ALLOC_USTACK_DEEP_MAX (1 << 18)  /* bytes copied for a process whose walks ran past
                                    * ALLOC_USTACK_MAX (unwind_mode_val.deep); a power of 2 */
#define ALLOC_MODES_MAX 16384      /* processes whose unwinding mode user space decided */
#define ALLOC_NREGS 17             /* x86-64 DWARF registers rax..r15, rip (DWARF numbering) */

/* What a probed function takes and returns; picks the argument registers to read. */
enum alloc_kind {
	AK_SIZE1 = 1,       /* malloc(size), valloc, pvalloc, operator new(size, ...) */
	AK_CALLOC,          /* calloc(n, size) */
	AK_SIZE2,           /* aligned_alloc(align, size), memalign(align, size) */
	AK_REALLOC,         /* realloc(ptr, size) */
	AK_REALLOCARRAY,    /* reallocarray(ptr, n, size) */
	AK_POSIX_MEMALIGN,  /* posix_memalign(&ptr, align, size) -> int */
};

/* Attach cookie of free_entry. */
enum free_kind { FK_FREE = 0, FK_DELETE = 1 };

enum ev_type {
	EV_STACK = 1,       /* first allocation seen from a stack: its frames */
	EV_FREE,            /* a tracked allocation died */
	EV_FORK,            /* a traced process forked a new process */
	EV_EXEC,            /* a traced process exec'd */
	EV_EXIT,            /* the last thread of a traced process exited */
	EV_NEWEXEC,         /* any other process exec'd (only with watch_all_exec) */
	EV_USTACK,          /* a stack to unwind in user space: registers and stack copy */
	EV_MMAP,            /* a traced process mapped a file executable */
};

/* Drop and diagnostic counters, a per-CPU array indexed by this enum. */
enum alloc_counter {
	CNT_ALLOCS = 0,     /* allocations entered into the live map */
	CNT_FREES,          /* tracked frees sent */
	CNT_DROP_RINGBUF,   /* records lost: ring buffer full */
	CNT_DROP_LIVE_FULL, /* allocations not tracked: live map full */
	CNT_DROP_STATE_FULL,/* calls not tracked: no per-thread state (allocation failed or busy) */
	CNT_DROP_STACK,     /* allocations whose stack could not be read */
	CNT_UNMATCHED_FREE, /* frees of pointers never seen allocated (allocated before attach) */
	CNT_OVERWRITTEN,    /* an address allocated again before its free was seen */
	CNT_NESTED,         /* allocator calls made from inside another allocator call */
	CNT_USTACKS,        /* stacks copied for user-space (DWARF) unwinding */
	CNT_EXEC_LOST,      /* execs not marked for the daemon's decision (ring or targets full) */
	CNT_USTACK_SHORT,   /* stack copies shortened because the ring was filling (issue 17) */
	CNT_MAX,
};

struct ev_hdr {
	unsigned int type;
	unsigned int tgid;
	unsigned long long start_ns;   /* process start time (task->start_time), with tgid the process identity */
};

/* Same layout as the kernel's struct bpf_stack_build_id. */
struct ev_frame {
	int status;                    /* 0 empty, 1 valid (build_id + offset), 2 ip only */
	unsigned char build_id[20];
	union {
		unsigned long long offset;
		unsigned long long ip;
	};
};

struct ev_stack {
	struct ev_hdr h;
	unsigned long long key;        /* per-process stack key used by ev_free */
	unsigned int nframes;
	unsigned int pad;
	struct ev_frame frames[ALLOC_MAX_FRAMES];
};

/* sent_stacks values (a frame-pointer key's state): 1..ALLOC_STACK_RETRIES-1 its frames
 * came back as bare IPs that many times (sent again); the rest are written by user space
 * (daemon/alloc/ustack.c) once it has unwound the copy sent with the key's first sight,
 * or by BPF at that first sight: */
#define ALLOC_STACK_RETRIES 4      /* sends of a stack whose frames all came back as bare IPs */
#define ALLOC_STACK_SENT 0xff      /* the walk is the copy's DWARF stack: the key stands */
#define ALLOC_STACK_PENDING 0xfe   /* sent, not checked yet: each allocation from the key
                                    * is copied under its own key meanwhile */
#define ALLOC_STACK_CUT 0xfd       /* the walk differs from the copy's (cut, or a frame
                                    * skipped by code without frame pointers): copied so,
                                    * always */

/* How a process's stacks are taken (map unwind_modes, written by daemon/alloc/ustack.c
 * once it has checked the objects the process maps; no entry: undecided). */
enum unwind_mode {
	UNWIND_UNDECIDED = 0,          /* copied, and the reader woken to decide */
	UNWIND_FP = 1,                 /* every object keeps frame pointers: walked in BPF */
	UNWIND_DWARF = 2,              /* an object lacks them: copied for DWARF unwinding */
};

struct unwind_mode_val {
	unsigned long long start_ns;   /* the process instance it was decided for */
	unsigned int mode;             /* enum unwind_mode */
	unsigned int woke;             /* BPF: the reader was woken for this process's first
	                                * copy (user space writes 0) */
	unsigned long long stack_top;  /* UNWIND_DWARF: the main thread's stack is copied only
	                                * up to here, above its outermost frame (0: unknown) */
	unsigned int deep;             /* a walk ran past an ALLOC_USTACK_MAX copy: copy up to
	                                * ALLOC_USTACK_DEEP_MAX, as the ring's room allows */
	unsigned int pad;
};

/* A process not in UNWIND_FP mode (its objects lack frame pointers, or are not checked yet):
 * the registers and the top of the user stack, unwound by daemon/alloc/unwind.c from
 * the objects' CFI. key is unique to this allocation (ALLOC_USTACK_KEY set): user space
 * forgets it at the allocation's death. */
#define ALLOC_USTACK_KEY (1ULL << 63)
struct ev_ustack {
	struct ev_hdr h;
	unsigned long long key;
	unsigned long long caller;     /* sampled mode: cut frames above this return address (0: none) */
	unsigned long long regs[ALLOC_NREGS];  /* DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
	unsigned long long sp;         /* user address of data[0] (= regs[7]) */
	unsigned int len;              /* bytes of data that hold the stack */
	unsigned int pad;
	unsigned char data[ALLOC_USTACK_DEEP_MAX + 4096];  /* a page of slack for BPF's page-wise copy */
};

struct ev_free {
	struct ev_hdr h;
	unsigned long long key;        /* stack key, 0 if the stack could not be read */
	unsigned long long addr;       /* the object, for access attribution */
	unsigned long long size;
	unsigned long long alloc_ns, free_ns;   /* CLOCK_MONOTONIC */
	unsigned int alloc_cpu, free_cpu;
	unsigned long long probe_ns;   /* of [alloc_ns, free_ns), the time our probes took from
	                                * the allocating thread or the process's leading
	                                * one, the larger (an estimate: bpf/alloc.bpf.c) */
};

struct ev_fork {
	struct ev_hdr h;               /* the child */
	unsigned int ppid;
	unsigned int pad;
	unsigned long long parent_start_ns;
};

#define ALLOC_COMM_LEN 16          /* TASK_COMM_LEN */

struct ev_exec {
	struct ev_hdr h;
	unsigned long long ts_ns;      /* the old image's allocations die here */
	unsigned int cpu;
	unsigned int ppid;             /* the kernel's real parent (tgid) */
	char filename[ALLOC_EXEC_NAME];/* the file run: a script's interpreter, as given */
	unsigned long long mm;         /* the new image's mm: the EV_MMAPs of the exec itself
	                                * (executable, loader) came before this record */
};

/* A file mapped executable by a traced process (at exec, and at mmap(2)'s return under
 * `memprofd record`; bpf/mmap_watch.bpf.h): the mappings a
 * copied stack is unwound against once the process is gone, which a short-lived one is
 * before the reader gets to /proc (its libraries mapped and its constructors run within
 * a millisecond). The path is given as its names, innermost first, up to the global
 * root (mounts crossed); user space checks it names the same device and inode. */
#define ALLOC_MMAP_DEPTH 16            /* path names sent: deeper files are not sent */
#define ALLOC_MMAP_NAME 64             /* bytes per name, with its NUL: longer ones cut */
struct ev_mmap {
	struct ev_hdr h;
	unsigned long long mm;         /* the address space mapped into */
	unsigned long long start, end, pgoff;  /* pgoff in bytes */
	unsigned long long ino;
	unsigned int dev;              /* the kernel's s_dev: major << 20 | minor */
	unsigned int nnames;           /* names in names[], 0: the path was not complete */
	unsigned int exe;              /* the executable's text, sent at exec */
	unsigned int pad;
	char names[ALLOC_MMAP_DEPTH][ALLOC_MMAP_NAME];
};
/* A process that is not a target exec'd (only with watch_all_exec). The kernel has
 * already put it in `targets`, so nothing it does is lost while the daemon decides from
 * this record alone (the process may be gone before /proc could be read): a rejected
 * process is taken out of the map again, with its children forked meanwhile. */
/* An executable as the kernel names it: its super block's dev_t (MKDEV: major << 20 |
 * minor) and inode number. */
struct hold_key {
	unsigned long long dev;
	unsigned long long ino;
};

/* held's value: the process's start_ns (a successor of the PID is not it) and when its
 * hold began (bpf_ktime_get_ns, CLOCK_MONOTONIC): a hold older than a bound is ended by
 * the daemon's watchdog (exec_hold_watchdog.c). */
struct hold_val {
	unsigned long long start_ns;
	unsigned long long held_ns;
};

/* The hold ring's record (exec_hold.c): a held process and the file it exec'd. */
struct ev_hold {
	unsigned int pid;
	unsigned int pad;
	unsigned long long start_ns;
	unsigned long long held_ns;
	struct hold_key file;
};

struct ev_newexec {
	struct ev_hdr h;
	unsigned long long ts_ns;
	unsigned int ppid;
	char comm[ALLOC_COMM_LEN];
	unsigned int pad;              /* NEWEXEC_HELD or 0 */
	char filename[ALLOC_EXEC_NAME];
};

struct ev_exit {
	struct ev_hdr h;
	unsigned long long ts_ns;
	unsigned int cpu;
	int exit_code;
};

struct live_key {
	unsigned int tgid;
	unsigned int pad;
	unsigned long long addr;
};

struct live_val {
	unsigned long long size;
	unsigned long long ts_ns;
	unsigned long long key;        /* stack key */
	unsigned long long start_ns;   /* owning process instance */
	unsigned int cpu;
	unsigned int tid;              /* the allocating thread */
	unsigned long long probe_ns;   /* that thread's probe time (tstate.probe_ns) at ts_ns:
	                                * what it is at the free, or in thread_probe_ns at the
	                                * thread's exit, less this, is the probes' share of
	                                * the object's lifetime */
	unsigned long long proc_probe_ns; /* its process's probe clock (proc_probe_ns) at
	                                   * ts_ns: the same with the clock at the free or exit */
};

#define ALLOC_THREAD_PROBE_MAX 16384  /* thread_probe_ns: exited threads kept for the reap */
#define ALLOC_PROBE_WINDOW_NS 10000000 /* a process's probe clock advances by its busiest
                                        * thread's probe time in windows this long */

/* proc_probe_ns values (bpf/alloc.bpf.c): a process's probe clock. */
struct proc_probe {
	unsigned long long clock;      /* ns: the closed windows' maxima, summed */
	unsigned long long win_start;  /* the open window's start */
	unsigned long long win_max;    /* the most probe time one thread has had in it */
};
#define ALLOC_PROBE_GAP_MAX_NS 100000 /* an entry-to-return gap counted as the probes' (above:
                                       * the allocator's own work, a page fault, preemption) */
