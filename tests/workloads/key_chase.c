/* key_chase: db_bench's memtable lookup shape, two dependent loads that miss in one
 * straight-line block of four instructions (there: node->key, then the key's first byte,
 * test, branch). Here a node points to a key record and the key record to the next node
 * (both shuffled over 2 MiB): mov (%rax),%rax twice, dec, jne. Runs for --seconds and
 * prints "nodes N keys K": the exact 8-byte reads of each buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODES (1u << 17)            /* 128 Ki nodes of 16 bytes: 2 MiB, past L2 (db_bench's
                                     * memtable is 4 MiB), within L3 */
#define STEPS_PER_CHECK (1u << 16)  /* steps between clock reads */

struct node {
	struct node *key;           /* a record of the keys buffer, whose first word is the
	                             * next node */
	uint64_t pad;
};

__attribute__((noinline)) static struct node *alloc_nodes(void)
{
	return malloc(NODES * sizeof(struct node));
}

__attribute__((noinline)) static struct node *alloc_keys(void)
{
	return malloc(NODES * sizeof(struct node));
}

/* n steps: node -> its key record -> the next node. Written out so the block is
 * db_bench's shape at any -O: of its 4 instructions, 2 follow a load that misses, so a
 * median over all 4 is a pile-up. */
__attribute__((noinline)) static struct node *walk(struct node *p, unsigned n)
{
	if (!n)
		return p;
	__asm__ volatile(
		"1:\n\t"
		"mov (%[p]),%[p]\n\t"            /* the node's key record: misses */
		"mov (%[p]),%[p]\n\t"            /* the record's next node: misses */
		"dec %[n]\n\t"
		"jne 1b\n\t"
		: [p] "+r"(p), [n] "+r"(n) : : "cc", "memory");
	return p;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 2 && !strcmp(argv[1], "--seconds") ? atof(argv[2]) : 3.0;
	struct node *nodes = alloc_nodes();
	struct node *keys = alloc_keys();
	uint32_t *perm = malloc(NODES * sizeof(*perm));
	uint64_t steps = 0;

	if (!nodes || !keys || !perm)
		return 1;
	srand(17);
	for (uint32_t i = 0; i < NODES; i++)
		perm[i] = i;
	for (uint32_t i = NODES - 1; i > 0; i--) {
		uint32_t j = (uint32_t)rand() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint32_t i = 0; i < NODES; i++) {   /* node perm[i] -> key perm[i+7] -> node perm[i+1] */
		nodes[perm[i]].key = &keys[perm[(i + 7) % NODES]];
		keys[perm[(i + 7) % NODES]].key = &nodes[perm[(i + 1) % NODES]];
	}
	free(perm);
	struct node *p = &nodes[0];
	double end = now() + secs;
	while (now() < end) {
		p = walk(p, STEPS_PER_CHECK);
		steps += STEPS_PER_CHECK;
	}
	printf("nodes %llu keys %llu\n", (unsigned long long)steps,
	       (unsigned long long)steps);
	if (!p)
		return 1;   /* keeps the walk */
	free(keys);
	free(nodes);
	return 0;
}
