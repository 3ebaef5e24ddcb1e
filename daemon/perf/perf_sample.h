/* PERF_RECORD_SAMPLE parsing per the perf ABI (linux/perf_event.h), for the sample_type
 * bits the access sources use. Records are hostile input: every field is bounds-checked
 * against header.size and the buffer; a record that does not match its sample_type
 * exactly is -EBADMSG, never a partial result. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>

#define PERF_SAMPLE_MAX_REGS 64      /* bits in a regs mask */
#define PERF_SAMPLE_MAX_CHAIN 512    /* callchain entries accepted (PERF_MAX_STACK_DEPTH-ish) */

/* Fields the parser knows; PERF_SAMPLE_READ and PERF_SAMPLE_BRANCH_STACK need more
 * attr context than a sample_type and are rejected with -EOPNOTSUPP. */
#define PERF_SAMPLE_PARSE_SUPPORTED \
	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
	 PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_REGS_USER | \
	 PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT | \
	 PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION | PERF_SAMPLE_REGS_INTR | \
	 PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP | PERF_SAMPLE_DATA_PAGE_SIZE | \
	 PERF_SAMPLE_CODE_PAGE_SIZE | PERF_SAMPLE_AUX)

struct perf_sample_layout {
	uint64_t sample_type;
	uint64_t regs_user_mask;     /* attr.sample_regs_user */
	uint64_t regs_intr_mask;     /* attr.sample_regs_intr */
};

struct perf_sample {
	uint16_t misc;               /* header.misc (PERF_RECORD_MISC_USER, ...) */
	uint64_t id, ip, time, addr, stream_id, period, data_src, transaction;
	uint32_t pid, tid, cpu;
	uint64_t weight;             /* PERF_SAMPLE_WEIGHT, or WEIGHT_STRUCT's var1_dw */
	uint16_t weight_var2, weight_var3;   /* WEIGHT_STRUCT: instruction latency etc. */
	uint64_t phys_addr, cgroup, data_page_size, code_page_size;
	uint64_t nr_callchain;
	const unsigned char *callchain;     /* nr_callchain u64s, read with perf_sample_chain() */
	uint32_t raw_size;
	const void *raw;
	uint64_t regs_user_abi;      /* PERF_SAMPLE_REGS_ABI_*; 0 = no user regs (kernel thread) */
	unsigned nregs_user;
	uint64_t regs_user[PERF_SAMPLE_MAX_REGS];   /* in mask bit order */
	uint64_t regs_intr_abi;
	unsigned nregs_intr;
	uint64_t regs_intr[PERF_SAMPLE_MAX_REGS];
	uint64_t stack_size, stack_dyn_size;
	const void *stack;
	uint64_t aux_size;
	const void *aux;
};

/* Parses one record (header included) of at most len bytes. 0, -EINVAL (not a sample or
 * header.size out of range), -EBADMSG (fields overrun or underrun header.size),
 * -EOPNOTSUPP (sample_type bits this parser does not handle). */
int perf_sample_parse(const void *rec, size_t len, const struct perf_sample_layout *lay,
		      struct perf_sample *out);
/* i-th callchain entry (i < nr_callchain). */
uint64_t perf_sample_chain(const struct perf_sample *s, uint64_t i);
/* PERF_MEM_OP_LOAD/STORE of a data_src as INSN-style bits: 1 read, 2 write, 0 unknown. */
unsigned perf_data_src_rw(uint64_t data_src);

/* The sample_id trailer attr.sample_id_all appends to every non-sample record: of the
 * TID, TIME, ID, STREAM_ID, CPU and IDENTIFIER bits of sample_type, in that order, as
 * the record's last bytes. */
struct perf_sample_id {
	uint32_t pid, tid, cpu;
	uint64_t time, id, stream_id;
};
/* 0, -EINVAL (rec shorter than its header.size says, or than len), -EBADMSG (header.size
 * cannot hold the trailer). */
int perf_sample_id_parse(const void *rec, size_t len, uint64_t sample_type,
			 struct perf_sample_id *out);
