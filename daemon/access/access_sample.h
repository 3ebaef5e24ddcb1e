/* The access sample: what every access source (soft, pmu, spe) hands to attribution,
 * so a source needs this header, not attribution's. */
#pragma once
#include <stdint.h>

/* One access as a source delivers it (src_soft, or a PMU source). */
struct access_sample {
	uint32_t tgid, tid, cpu;
	uint64_t start_ns;        /* process start (task->start_time), with tgid the identity */
	uint64_t time_ns;         /* CLOCK_MONOTONIC, same clock as the allocation events */
	uint64_t addr;
	uint32_t size;            /* bytes accessed (0 unknown) */
	uint8_t rw;               /* 1 read, 2 write, 3 both */
	uint8_t flags;            /* INSN_F_* of symbolizer/insn.h (TLS, STACK, ...) */
	uint64_t weight;          /* estimated accesses this sample stands for */
	uint64_t weight_err;      /* its share of its block's stall-factor error, in accesses
	                           * (soft_stall.h: summed in quadrature); 0: none modeled */
	uint64_t sp;              /* user stack pointer at the sample, 0 unknown */
	uint64_t fs_base;         /* 0 unknown */
};
