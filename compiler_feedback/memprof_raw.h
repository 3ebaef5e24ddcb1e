/* The MemProf raw profile, version 4, as llvm/include/llvm/ProfileData/MemProfData.inc
 * (LLVM 19) lays it out and RawMemProfReader (llvm/lib/ProfileData/MemProfReader.cpp)
 * reads it; llvm-profdata-19 accepts raw versions 3 and 4. All integers little-endian:
 *   Header      { Magic, Version = 4, TotalSize, SegmentOffset, MIBOffset, StackOffset }
 *   segments    u64 N, N x SegmentEntry { Start, End, Offset, BuildIdSize, BuildId[32] }
 *   MIBs        u64 N, N x { u64 StackId, MemInfoBlock (144 bytes, packed),
 *                            AccessHistogramSize x u64 counts }
 *   stacks      u64 N, N x { u64 StackId, u64 NumPCs, NumPCs x u64 PC }
 * One segment: the binary's executable PT_LOAD "loaded" at MEMPROF_RAW_PIE_BASE (PIE) or
 * at its link address; PCs are return addresses - 1, in that mapping, as the runtime
 * writes them and as the reader symbolizes them (it adds nothing back). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "reporter/export.h"

#define MEMPROF_RAW_MAGIC_64 \
	((uint64_t)255 << 56 | (uint64_t)'m' << 48 | (uint64_t)'p' << 40 | (uint64_t)'r' << 32 | \
	 (uint64_t)'o' << 24 | (uint64_t)'f' << 16 | (uint64_t)'r' << 8 | (uint64_t)129)
#define MEMPROF_RAW_VERSION 4
#define MEMPROF_RAW_BUILDID_MAX 32
#define MEMPROF_RAW_HEADER_SIZE 48
#define MEMPROF_RAW_SEGMENT_SIZE 64
#define MEMPROF_RAW_MIB_SIZE 144      /* sizeof(MemInfoBlock) in v4 */
/* Where a PIE's first byte is pretended to be mapped (page aligned, like x86-64 Linux). */
#define MEMPROF_RAW_PIE_BASE 0x555555554000ull

struct mib;
struct mib_hist;
/* MemInfoBlock's fields in MIBEntryDef.inc order (v4 appends AccessHistogramSize u32 and
 * AccessHistogram u64 to these), with their raw widths in bytes. */
#define MEMPROF_MIB_NFIELDS 25
struct memprof_mib_field {
	const char *name;
	int width;
};
extern const struct memprof_mib_field memprof_mib_fields_def[MEMPROF_MIB_NFIELDS];
/* The field values for m: lifetimes and timestamps in ms (timestamps since ts_base_ns),
 * densities x100 as the runtime keeps them, TotalLifetimeAccessDensity chosen so that
 * TotalLifetimeAccessDensity / AllocCount / 100 == classify_density(m). A context whose
 * class is unknown (undecided) gets at least CLASSIFY_COLD_DENSITY there, so that LLVM's
 * getAllocType() never calls it cold on too little evidence. */
void memprof_mib_fields(const struct mib *m, bool undecided, uint64_t ts_base_ns,
			uint64_t v[MEMPROF_MIB_NFIELDS]);
/* The 144 bytes of a v4 MemInfoBlock for m, with AccessHistogramSize hist_len and the
 * AccessHistogram pointer 0 (the reader replaces it with its copy of the counts).
 * ts_base_ns is subtracted from the timestamps (ms since then). */
void memprof_raw_mib(uint8_t out[MEMPROF_RAW_MIB_SIZE], const struct mib *m, bool undecided,
		     uint32_t hist_len, uint64_t ts_base_ns);
/* One entry of the MIB section as RawMemProfReader's readMemInfoBlocksV4 reads it: u64
 * stack id, the MemInfoBlock, then the histogram's counts as u64, with no padding (every
 * part is a multiple of 8 bytes, so entries and sections stay 8-aligned). h may be NULL.
 * Writes memprof_raw_mib_record_size(h) bytes to out and returns that size. Counts are
 * memprofd's per-ATTRIB_GRANULE (64-byte) granules; clang's runtime uses 8-byte ones. */
size_t memprof_raw_mib_record_size(const struct mib_hist *h);
size_t memprof_raw_mib_record(uint8_t *out, uint64_t stack_id, const struct mib *m,
			      bool undecided, const struct mib_hist *h, uint64_t ts_base_ns);

/* Checks bin's requirements (one executable PT_LOAD at file offset 0, a build-id of at
 * most 32 bytes equal to want_build_id when given, DWARF .debug_info); on failure writes
 * a one-line reason to err and returns a negative errno. On success gives the mapping. */
struct memprof_raw_seg {
	uint64_t start, end, base;    /* Start/End/Offset of the segment entry */
	uint64_t p_vaddr;
	uint8_t build_id[MEMPROF_RAW_BUILDID_MAX];
	unsigned build_id_size;
};
int memprof_raw_check_binary(const char *bin, const char *want_build_id,
			     struct memprof_raw_seg *seg, char *err, size_t errsz);

int export_memprof_raw(FILE *out, struct store *s, const struct export_opts *o);
