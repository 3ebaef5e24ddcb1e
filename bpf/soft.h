/* Contract between soft.bpf.c and daemon/access/src_soft.c: one ring-buffer record per user-mode
 * sample of a target process, with the registers the instruction decoder needs. The
 * same program serves PMU sources (pebs/ibs): their data address arrives in `addr`. */
#pragma once

#define SOFT_RINGBUF_BYTES (8 << 20)
#define SOFT_TARGETS_MAX 16384     /* == ALLOC_TARGETS_MAX, so alloc's targets map can be reused */
#define SOFT_CODE_BYTES 16         /* instruction bytes copied at the IP (fallback for JIT code) */
#define SOFT_NREGS 21              /* x86-64 struct pt_regs, in its order */
#define SOFT_LATE_MAX_NS 10000000  /* a timer sample later than this: its due time unknown */
/* Page faults charged to the instruction that took them. Under a hypervisor that backs a
 * guest's memory on first touch (shadow or nested paging), the host's share of a fault is
 * time the guest cannot see: the thread is back in user mode at the faulting instruction
 * when it ends, and a cpu-clock sample due meanwhile lands there, weighed as a period of
 * the program's instructions (here a first touch takes ~10-13 us, with a tail to ~0.5
 * ms; blocks written one store per page were estimated at 5000x their stores). A sample
 * due within the fault window after its thread's last user fault began, at (or
 * SOFT_FAULT_NEAR bytes about) the fault's instruction, is marked SOFT_F_FAULT, as is
 * one due after the fault before it began while faults come closer than the window
 * (a stream of faults: the long ones are in it); src_soft.c takes it as the fault's time
 * when an access it recovers lies in the fault's page (a later run of a generic copy at
 * the same instruction, on other pages, is the program's). The window is
 * SOFT_FAULT_WINDOW_PER_TOUCH first touches as measured at start (soft_calib.h), within
 * [MIN, MAX]: a loop that computes what it stores into fresh pages keeps the samples due
 * past it on each page. */
#define SOFT_FAULT_WINDOW_PER_TOUCH 2
#define SOFT_FAULT_WINDOW_MIN_NS 2000
#define SOFT_FAULT_WINDOW_MAX_NS 2000000
#define SOFT_FAULT_NEAR 256        /* bytes of code either side of the fault's instruction
				    * (the sample may come an instruction or two on) */
#define SOFT_FAULT_THREADS 16384   /* threads whose last fault is kept (LRU) */

enum soft_flags {
	SOFT_F_CODE = 1,           /* code[] holds the bytes at regs' IP */
	SOFT_F_FSBASE = 2,         /* fs_base/gs_base read from task->thread */
	SOFT_F_ADDR = 4,           /* addr is the PMU's sampled data address */
	SOFT_F_FAULT = 8,          /* due in the thread's last user page fault, near its
				    * instruction (above): fault_addr is its address */
};

enum soft_counter {
	SOFTCNT_SAMPLES = 0,          /* program runs */
	SOFTCNT_USER,                 /* user-mode samples of targets sent */
	SOFTCNT_KERNEL,               /* samples of targets taken in kernel mode (dropped) */
	SOFTCNT_NOT_TARGET,           /* samples of other processes (and idle) */
	SOFTCNT_DROP_RINGBUF,         /* lost: ring buffer full */
	SOFTCNT_CODE_UNREAD,          /* code bytes could not be read (page not present) */
	SOFTCNT_MAX,
};

struct soft_event {
	unsigned int tgid, tid;
	unsigned long long start_ns;   /* process start time (group_leader->start_time) */
	unsigned long long time_ns;    /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	unsigned int cpu;
	unsigned int flags;            /* enum soft_flags */
	unsigned long long period;     /* sample_period: ns for cpu-clock, events for PMUs */
	unsigned long long addr;
	unsigned long long fault_addr; /* SOFT_F_FAULT: the address that fault was taken at */
	unsigned long long fs_base, gs_base;
	unsigned long long regs[SOFT_NREGS];   /* r15 ... ss, as struct pt_regs */
	unsigned char code[SOFT_CODE_BYTES];
};
