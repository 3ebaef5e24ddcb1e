/* Arm SPE (Statistical Profiling Extension) record decoder: the byte stream an arm_spe
 * PMU writes into a perf AUX buffer -> packets -> one record per sampled operation.
 * Encodings from the Arm ARM (DDI 0487, "Statistical Profiling Extension" packet
 * formats), cross-checked against Linux's tools/perf/util/arm-spe-decoder. The input is
 * hostile: nothing is read past len, a truncated or unknown packet is counted and
 * skipped, the record it was in is dropped, and decoding resumes at the next record. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPE_PKT_MAX_BYTES 10           /* 2-byte extended header + 8-byte payload */
#define SPE_RECORD_MAX_PACKETS 64      /* a longer "record" is garbage: dropped, resynced */

enum spe_pkt_type {
	SPE_PKT_PAD = 1,
	SPE_PKT_END,
	SPE_PKT_TIMESTAMP,
	SPE_PKT_ADDRESS,
	SPE_PKT_COUNTER,
	SPE_PKT_CONTEXT,
	SPE_PKT_OP_TYPE,
	SPE_PKT_EVENTS,
	SPE_PKT_DATA_SOURCE,
	SPE_PKT_ALIGN,                 /* extended-header alignment padding */
};

/* Address packet indexes (header bits [2:0], 5 bits with an extended header). */
enum { SPE_ADDR_PC = 0, SPE_ADDR_BRANCH_TARGET = 1, SPE_ADDR_DATA_VA = 2,
       SPE_ADDR_DATA_PA = 3, SPE_ADDR_PREV_BRANCH = 4 };
/* Counter packet indexes. */
enum { SPE_CNT_TOTAL = 0, SPE_CNT_ISSUE = 1, SPE_CNT_XLAT = 2 };
/* Operation type packet classes (header bits [1:0]). */
enum { SPE_OPC_OTHER = 0, SPE_OPC_LDST = 1, SPE_OPC_BRANCH = 2 };

/* Events packet bits (the architected ones we use). */
#define SPE_EV_EXCEPTION  (1ULL << 0)
#define SPE_EV_RETIRED    (1ULL << 1)
#define SPE_EV_L1D_ACCESS (1ULL << 2)
#define SPE_EV_L1D_REFILL (1ULL << 3)
#define SPE_EV_TLB_ACCESS (1ULL << 4)
#define SPE_EV_TLB_WALK   (1ULL << 5)
#define SPE_EV_LLC_ACCESS (1ULL << 8)
#define SPE_EV_LLC_MISS   (1ULL << 9)
#define SPE_EV_REMOTE     (1ULL << 10)

struct spe_packet {
	enum spe_pkt_type type;
	uint8_t index;                 /* address/counter index, context EL-1, op class */
	uint8_t len;                   /* bytes of the whole packet, header included */
	uint8_t payload_len;
	uint64_t payload;              /* little-endian payload, 0 if none */
};

/* One packet at buf[0..len): the bytes it takes (> 0), 0 if buf ends inside it
 * (truncated), -EBADMSG for a header byte that is no SPE packet. */
int spe_packet_decode(const uint8_t *buf, size_t len, uint64_t buf_off, struct spe_packet *p);

enum spe_op { SPE_OP_OTHER = 0, SPE_OP_LOAD, SPE_OP_STORE, SPE_OP_BRANCH };

/* spe_record.has: which packets the record carried. */
#define SPE_HAS_PC      (1u << 0)
#define SPE_HAS_VA      (1u << 1)
#define SPE_HAS_PA      (1u << 2)
#define SPE_HAS_TS      (1u << 3)
#define SPE_HAS_CONTEXT (1u << 4)
#define SPE_HAS_OP      (1u << 5)
#define SPE_HAS_EVENTS  (1u << 6)
#define SPE_HAS_SOURCE  (1u << 7)
#define SPE_HAS_LAT     (1u << 8)
#define SPE_HAS_ISSUE   (1u << 9)
#define SPE_HAS_XLAT    (1u << 10)

/* spe_record.op_flags (load/store class). */
#define SPE_OPF_ATOMIC  (1u << 0)      /* atomic read-modify-write: reads and writes */
#define SPE_OPF_EXCL    (1u << 1)      /* load/store exclusive */
#define SPE_OPF_ACQREL  (1u << 2)      /* acquire/release */
#define SPE_OPF_SIMD_FP (1u << 3)
#define SPE_OPF_SVE     (1u << 4)
#define SPE_OPF_SVE_SG  (1u << 5)      /* SVE gather/scatter */
#define SPE_OPF_SVE_PRED (1u << 6)     /* SVE predicated */

struct spe_record {
	uint32_t has;                  /* SPE_HAS_* */
	enum spe_op op;
	uint32_t op_flags;             /* SPE_OPF_* */
	uint8_t op_class, op_payload;  /* raw operation type packet */
	uint16_t sve_evl_bits;         /* SVE effective vector length, 0 if not SVE */
	uint64_t pc;                   /* sign-extended from bit 55 */
	uint8_t pc_el;                 /* exception level the PC was at (0 = user) */
	bool pc_ns;
	uint64_t va;                   /* data virtual address, tag byte dropped, sign-extended */
	uint64_t pa;                   /* data physical address (pa_enable) */
	uint64_t branch_target;
	uint64_t ts;                   /* generic-timer count (ts_enable) */
	uint32_t context;              /* CONTEXTIDR_ELx: the thread id when the kernel has
	                                * CONFIG_PID_IN_CONTEXTIDR */
	uint8_t context_el;            /* 1 or 2 */
	uint16_t lat_total, lat_issue, lat_xlat;   /* cycles (saturated counters) */
	uint64_t events;               /* SPE_EV_* */
	uint64_t data_source;          /* implementation defined (Neoverse: L1/L2/SLC/DRAM...) */
	uint32_t size;                 /* bytes accessed; 0: SPE does not report it */
	uint64_t offset;               /* buf_off of the record's first byte */
};

struct spe_decode_stats {
	uint64_t records;              /* complete records delivered */
	uint64_t loads, stores, other_ops;
	uint64_t bad_packets;          /* unknown header bytes (each skipped) */
	uint64_t truncated;            /* buffers that ended inside a packet or record */
	uint64_t dropped_records;      /* records lost to a bad packet, truncation or overlength */
	uint64_t unknown_index;        /* well-formed packets of an index we do not use */
	uint64_t pad_bytes;
};

struct spe_decoder {
	const uint8_t *buf;
	size_t len, pos;
	uint64_t base_off;             /* offset of buf[0] in the AUX buffer (for alignment) */
	bool resync;                   /* after a bad packet: drop the record it ends in */
	struct spe_decode_stats st;
};

/* Decodes buf[0..len), whose first byte is at base_off in the AUX buffer. Stats are kept
 * across spe_decoder_reset calls. */
void spe_decoder_init(struct spe_decoder *d);
void spe_decoder_reset(struct spe_decoder *d, const void *buf, size_t len, uint64_t base_off);
/* The next complete record: 1 and *r filled, or 0 when the buffer is used up. */
int spe_decoder_next(struct spe_decoder *d, struct spe_record *r);
