/* soft_stall: where a timer sample's time went inside its straight-line block. The soft
 * source weights a sample by period x clock x SOFT_EST_IPC, as if every instruction of
 * its window took one cycle; a block whose samples pile up on one instruction (a load
 * that misses, a pointer chase) retired far fewer. Measured from the run itself: the
 * samples each instruction of a block got so far. The median instruction's share stands
 * for one cycle, so the block takes 1 / share cycles per pass, not ninsns; the weight
 * factor is ninsns x share, in [SOFT_STALL_MIN_FACTOR, 1] (uniform samples: 1). Cost:
 * one direct-mapped slot per block, a 48-entry median per sample. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define SOFT_STALL_BLOCKS 2048        /* blocks tracked (direct-mapped, power of two) */
#define SOFT_STALL_INSNS 48           /* instructions per block tracked (insn_window's max) */
#define SOFT_STALL_MIN_PER_INSN 4     /* samples per instruction before a block's shares count */
#define SOFT_STALL_MIN_SAMPLES 32     /* and at least these */
#define SOFT_STALL_MIN_FACTOR (1.0 / 64)
#define SOFT_STALL_MIN_REF 1          /* instructions outside after_read for them to be the
                                       * one-cycle reference */
#define SOFT_STALL_PRIOR 1.0           /* pseudo-samples per instruction of the excess
                                       * rule: a block seen a few times keeps ~its weight */
#define SOFT_STALL_AGE_AT 30000       /* a block's counts are halved at this many samples */

struct soft_stall;

int soft_stall_open(struct soft_stall **out);
void soft_stall_close(struct soft_stall *st);
/* Notes a sample at index pos of block (ninsns instructions long) and returns the factor
 * for its weight; 1 until the block has enough samples, or when ninsns is out of range.
 * after_read (bit i: instruction i follows a heap-like read) marks where a read's misses
 * land: those are left out of the one-cycle reference, so a run of two dependent misses
 * (node, then the key it points to) reads as stalled, not as half its instructions. */
double soft_stall_note(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns,
		       uint64_t after_read);
/* The excess rule, for any block with reads: samples on instructions after a heap-like
 * read beyond their share of the block are time spent waiting on that read, so the block's
 * passes are what the other instructions' mean count says: the factor is ninsns / (ninsns -
 * k) x (their samples + prior) / (all samples + prior), k the instructions after reads (1
 * when there is none, or no other). Unlike the median it does not need many samples per
 * instruction, and it is blind to piles on group heads that follow no read. */
double soft_stall_excess(const uint16_t *cnt, unsigned ninsns, uint64_t after_read,
			 double *rel_err);
/* The soft source's factor: the median rule in a block with a dependent load once it has
 * the samples for it, the excess rule otherwise where a read of the block is no array
 * walked in order (after_unstrided, insn_window.h: an L1-resident loop's samples pile up
 * after its load from retirement skew alone; short_copies' read loop fell to 0.15x of
 * its exact count), and 1 out of range or without such a read. rel_err (may be
 * NULL): the factor's relative standard error from the samples its reference rests on
 * (1 / sqrt(the reference instructions' samples), the excess rule's prior included; 0
 * where no rule applies: a block seen 4 times is a guess, one seen 400 times is not),
 * times sqrt(the block's samples so far): the block's samples share one factor, so the
 * squares of weight x rel_err summed over them give the square of the block's error. */
double soft_stall_factor(struct soft_stall *st, uint64_t block, unsigned pos, unsigned ninsns,
			 uint64_t after_read, uint64_t after_unstrided, bool dep_load,
			 double *rel_err);
