/* Contract between soft.bpf.c and daemon/access/src_soft.c: one ring-buffer record per user-mode
 * sample of a target process, with the registers the instruction decoder needs. The
 * same program serves PMU sources (pebs/ibs): their data address arrives in `addr`. */
#pragma once

#define SOFT_RINGBUF_BYTES (8 << 20)
#define SOFT_TARGETS_MAX 16384     /* == ALLOC_TARGETS_MAX, so alloc's targets map can be reused */
#define SOFT_CODE_BYTES 16         /* instruction bytes copied at the IP (fallback for JIT code) */
#define SOFT_NREGS 21              /* x86-64 struct pt_regs, in its order */

enum soft_flags {
	SOFT_F_CODE = 1,           /* code[] holds the bytes at regs' IP */
	SOFT_F_FSBASE = 2,         /* fs_base/gs_base read from task->thread */
	SOFT_F_ADDR = 4,           /* addr is the PMU's sampled data address */
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
	unsigned long long fs_base, gs_base;
	unsigned long long regs[SOFT_NREGS];   /* r15 ... ss, as struct pt_regs */
	unsigned char code[SOFT_CODE_BYTES];
};
