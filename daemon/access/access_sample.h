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
	uint64_t bytes;           /* bytes those accesses read or write; 0: weight x size
	                           * (access_sample_bytes) */
	uint64_t weight_err;      /* its share of its block's stall-factor error, in accesses
	                           * (soft_stall.h: summed in quadrature); 0: none modeled */
	uint64_t sp;              /* user stack pointer at the sample, 0 unknown */
	uint64_t fs_base;         /* 0 unknown */
};

/* Width assumed for an access of unknown size (a PMU sample without one): a word. */
#define ACCESS_UNKNOWN_WIDTH 8

/* Bytes accessed a sample stands for: what valgrind DHAT counts (reads + writes in bytes),
 * where weight counts accesses (instructions' memory operands), as MemProf does. */
static inline uint64_t access_sample_bytes(const struct access_sample *s)
{
	return s->bytes ? s->bytes : s->weight * (s->size ? s->size : ACCESS_UNKNOWN_WIDTH);
}
