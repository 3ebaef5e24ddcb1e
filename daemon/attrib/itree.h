/* Interval tree: an AVL tree of [start, end) intervals ordered by (start, seq), each node
 * carrying the largest end in its subtree, so that insert and erase cost O(log n) and a
 * stabbing query (every interval holding a point) O(log n + k), k the intervals reported.
 * Nodes are intrusive (embedded in the caller's objects): the tree allocates nothing.
 * Invariants: heights of siblings differ by at most 1; max_end = max(end, children's
 * max_end); (start, seq) is unique within a tree. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct itree_node {
	struct itree_node *l, *r;
	uint64_t start, end;     /* [start, end), end > start; fixed while the node is held */
	uint64_t seq;            /* tie-break among equal starts, unique per tree */
	uint64_t max_end;        /* largest end in this subtree */
	int height;
};

struct itree {
	struct itree_node *root;
	size_t n;
};

/* n->start, n->end and n->seq must be set. */
void itree_insert(struct itree *t, struct itree_node *n);
/* n must be held by t. */
void itree_erase(struct itree *t, struct itree_node *n);

/* Return non-zero to stop a visit. */
typedef int (*itree_fn)(struct itree_node *n, void *arg);
/* Visits the intervals holding point in (start, seq) order until fn returns non-zero;
 * returns the node it stopped at, or NULL. */
struct itree_node *itree_stab(const struct itree *t, uint64_t point, itree_fn fn, void *arg);
/* Visits every node in (start, seq) order, same stop rule; fn must not change the tree. */
struct itree_node *itree_walk(const struct itree *t, itree_fn fn, void *arg);
/* Checks every invariant (for tests): 0, or -EINVAL. */
int itree_check(const struct itree *t);
