/* Unit tests for daemon/alloc/stash.c on a real BPF ring buffer: a socket-filter program run
 * with BPF_PROG_TEST_RUN's repeat writes records (each carrying its sequence number, taken
 * from an array map the program increments) until the ring holds several ticks' worth.
 * One tick copies at most STASH_TICK_BYTES and one record more, the ring keeps the rest,
 * and every record comes out once, in order, across ticks, the replay and the reads after
 * it. Skips (77) where BPF maps cannot be created (not root, no BPF). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "tests/unit/mpd_cmocka.h"

#define UNUSED __attribute__((unused))

#include "daemon/alloc/stash.h"

#define REC_BYTES 256                     /* one record's payload */
#define RING_BYTES (32u << 20)
#define FILL_BYTES (3 * STASH_TICK_BYTES)  /* what the test writes: three ticks' worth */
#define NRECS (FILL_BYTES / (REC_BYTES + 8))   /* + the ring's 8-byte header */

struct fixture {
	int ring_fd, seq_fd, prog_fd;
	struct ring_buffer *rb;
	struct stash st;
	uint64_t next;        /* the sequence number the next handled record must carry */
	uint64_t handled;
	int bad;              /* records out of order or of the wrong size */
};

/* The ring's callback: stashed while the stash is on (as alloc_exact.c's on_event), else
 * handled: checked against the expected sequence. */
static int on_record(void *ctx, void *data, size_t len)
{
	struct fixture *f = ctx;
	uint64_t seq;

	if (f->st.on)
		return stash_take(&f->st, data, len);
	memcpy(&seq, data, sizeof(seq));
	if (len != REC_BYTES || seq != f->next)
		f->bad++;
	f->next = seq + 1;
	f->handled++;
	return 0;
}

#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), \
						.off = (o), .imm = (i) })

/* seq = ++*array[0]; a REC_BYTES stack buffer, zeroed, seq in its first word;
 * bpf_ringbuf_output(ring, buf, REC_BYTES, 0); return 0. */
static int load_writer(int ring_fd, int seq_fd)
{
	struct bpf_insn p[REC_BYTES / 8 + 32];
	unsigned n = 0;

	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
	for (int off = -REC_BYTES; off < 0; off += 8)   /* the verifier reads only set bytes */
		p[n++] = INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_0, (short)off, 0);
	p[n++] = INSN(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_0, -REC_BYTES - 8, 0);
	p[n++] = INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, seq_fd);
	p[n++] = INSN(0, 0, 0, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -REC_BYTES - 8);
	p[n++] = INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
	p[n++] = INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 11, 0);   /* to return 0 */
	p[n++] = INSN(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, 1);
	p[n++] = INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_0, BPF_REG_1, 0, 0);
	p[n++] = INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, -REC_BYTES, 0);
	p[n++] = INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, ring_fd);
	p[n++] = INSN(0, 0, 0, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0);
	p[n++] = INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -REC_BYTES);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, REC_BYTES);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_4, 0, 0, 0);
	p[n++] = INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_output);
	p[n++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
	p[n++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	char log[4096] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log), .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "stash_writer", "GPL", p, n, &o);

	if (fd < 0)
		fprintf(stderr, "load: %s\n%s\n", strerror(errno), log);
	return fd;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->ring_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "stash_ring", 0, 0, RING_BYTES, NULL);
	if (f->ring_fd < 0) {
		fprintf(stderr, "no BPF ring buffer (%s): skipped\n", strerror(errno));
		*state = f;
		return 0;
	}
	f->seq_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "stash_seq", 4, 8, 1, NULL);
	assert_true(f->seq_fd >= 0);
	f->prog_fd = load_writer(f->ring_fd, f->seq_fd);
	assert_true(f->prog_fd >= 0);
	f->rb = ring_buffer__new(f->ring_fd, on_record, f, NULL);
	assert_non_null(f->rb);
	f->st = (struct stash){ .rb = f->rb, .handle = on_record, .ctx = f };
	f->next = 1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->rb)
		ring_buffer__free(f->rb);
	stash_free(&f->st);
	if (f->ring_fd >= 0) {
		close(f->prog_fd);
		close(f->seq_fd);
		close(f->ring_fd);
	}
	free(f);
	return 0;
}

/* n records into the ring (the program run n times). */
static void write_records(struct fixture *f, unsigned n)
{
	unsigned char pkt[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt), .repeat = n);

	assert_int_equal(bpf_prog_test_run_opts(f->prog_fd, &o), 0);
}

/* A tick over a ring that holds three ticks' worth copies one tick's share, no more: the
 * flush it runs in goes on; the next tick takes the next share, the replay hands the
 * records over in order, and the ring's rest follows them. Without the per-tick bound
 * the first tick takes everything (its flush waited on it). */
static void test_tick_bounded(void **state)
{
	struct fixture *f = *state;

	if (f->ring_fd < 0) {
		skip();
		return;
	}
	write_records(f, NRECS);
	size_t rec = sizeof(size_t) + REC_BYTES;   /* a stashed record's room (8-aligned) */

	f->st.armed = true;
	stash_tick(&f->st);
	assert_true(f->st.len >= STASH_TICK_BYTES);
	assert_true(f->st.len <= STASH_TICK_BYTES + rec);
	uint64_t first = f->st.records;

	assert_true(first < NRECS);
	assert_true(f->st.next_ns > 0);   /* the next tick waits STASH_TICK_NS */
	f->st.next_ns = 0;                /* its time has come */
	stash_tick(&f->st);
	assert_true(f->st.records > first);
	assert_true(f->st.len <= 2 * (STASH_TICK_BYTES + rec));
	assert_true(f->st.records < NRECS);
	uint64_t stashed = f->st.records;

	stash_replay(&f->st);
	assert_false(f->st.armed);
	assert_int_equal(f->st.len, 0);
	assert_int_equal(f->handled, stashed);
	assert_true(ring_buffer__consume(f->rb) > 0);   /* what the ticks left */
	assert_int_equal(f->handled, NRECS);
	assert_int_equal(f->next, NRECS + 1);
	assert_int_equal(f->bad, 0);
}

/* A ring holding less than a tick's share is taken whole by one tick. */
static void test_tick_takes_small_ring(void **state)
{
	struct fixture *f = *state;

	if (f->ring_fd < 0) {
		skip();
		return;
	}
	write_records(f, 1000);
	f->st.armed = true;
	stash_tick(&f->st);
	assert_int_equal(f->st.records, 1000);
	assert_int_equal(ring_buffer__consume(f->rb), 0);
	stash_replay(&f->st);
	assert_int_equal(f->handled, 1000);
	assert_int_equal(f->bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tick_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tick_takes_small_ring, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
