/* Interval tree (itree.h): AVL with subtree max-end augmentation. Every structural change
 * goes through fix() bottom-up, so max_end and height are right on every path that
 * changed. Recursion depth is the tree's height, at most ~1.44 log2(n) + 2. */
#include <errno.h>
#include "daemon/attrib/itree.h"

static int ht(const struct itree_node *n)
{
	return n ? n->height : 0;
}

static void fix(struct itree_node *n)
{
	int hl = ht(n->l), hr = ht(n->r);
	uint64_t m = n->end;

	n->height = 1 + (hl > hr ? hl : hr);
	if (n->l && n->l->max_end > m)
		m = n->l->max_end;
	if (n->r && n->r->max_end > m)
		m = n->r->max_end;
	n->max_end = m;
}

static struct itree_node *rot_right(struct itree_node *y)
{
	struct itree_node *x = y->l;

	y->l = x->r;
	x->r = y;
	fix(y);
	fix(x);
	return x;
}

static struct itree_node *rot_left(struct itree_node *x)
{
	struct itree_node *y = x->r;

	x->r = y->l;
	y->l = x;
	fix(x);
	fix(y);
	return y;
}

static struct itree_node *balance(struct itree_node *n)
{
	int bf;

	fix(n);
	bf = ht(n->l) - ht(n->r);
	if (bf > 1) {
		if (ht(n->l->l) < ht(n->l->r))
			n->l = rot_left(n->l);
		return rot_right(n);
	}
	if (bf < -1) {
		if (ht(n->r->r) < ht(n->r->l))
			n->r = rot_right(n->r);
		return rot_left(n);
	}
	return n;
}

static bool before(const struct itree_node *a, const struct itree_node *b)
{
	return a->start < b->start || (a->start == b->start && a->seq < b->seq);
}

static struct itree_node *ins(struct itree_node *root, struct itree_node *n)
{
	if (!root) {
		n->l = n->r = NULL;
		fix(n);
		return n;
	}
	if (before(n, root))
		root->l = ins(root->l, n);
	else
		root->r = ins(root->r, n);
	return balance(root);
}

void itree_insert(struct itree *t, struct itree_node *n)
{
	t->root = ins(t->root, n);
	t->n++;
}

static struct itree_node *take_min(struct itree_node *n, struct itree_node **min)
{
	if (!n->l) {
		*min = n;
		return n->r;
	}
	n->l = take_min(n->l, min);
	return balance(n);
}

static struct itree_node *del(struct itree_node *root, struct itree_node *n, bool *found)
{
	if (!root)
		return NULL;
	if (root == n) {
		struct itree_node *l = n->l, *r = n->r, *m;
		*found = true;
		if (!r)
			return l;
		r = take_min(r, &m);
		m->l = l;
		m->r = r;
		return balance(m);
	}
	if (before(n, root))
		root->l = del(root->l, n, found);
	else
		root->r = del(root->r, n, found);
	return balance(root);
}

void itree_erase(struct itree *t, struct itree_node *n)
{
	bool found = false;

	t->root = del(t->root, n, &found);
	if (found)
		t->n--;
	n->l = n->r = NULL;
}

static struct itree_node *stab(struct itree_node *n, uint64_t p, itree_fn fn, void *arg)
{
	struct itree_node *got;

	/* Nothing below ends after p: no interval here holds it. */
	if (!n || n->max_end <= p)
		return NULL;
	if ((got = stab(n->l, p, fn, arg)))
		return got;
	if (n->start > p)
		return NULL;          /* n and its right subtree start after p */
	if (p < n->end && fn(n, arg))
		return n;
	return stab(n->r, p, fn, arg);
}

struct itree_node *itree_stab(const struct itree *t, uint64_t point, itree_fn fn, void *arg)
{
	return stab(t->root, point, fn, arg);
}

static struct itree_node *walk(struct itree_node *n, itree_fn fn, void *arg)
{
	struct itree_node *got;

	if (!n)
		return NULL;
	if ((got = walk(n->l, fn, arg)))
		return got;
	if (fn(n, arg))
		return n;
	return walk(n->r, fn, arg);
}

struct itree_node *itree_walk(const struct itree *t, itree_fn fn, void *arg)
{
	return walk(t->root, fn, arg);
}

/* Height of a valid subtree, or -1; counts nodes and checks order against prev. */
static int check(const struct itree_node *n, const struct itree_node **prev, size_t *count)
{
	int hl, hr;
	uint64_t m;

	if (!n)
		return 0;
	if ((hl = check(n->l, prev, count)) < 0)
		return -1;
	if (n->end <= n->start || (*prev && !before(*prev, n)))
		return -1;
	*prev = n;
	(*count)++;
	if ((hr = check(n->r, prev, count)) < 0)
		return -1;
	m = n->end;
	if (n->l && n->l->max_end > m)
		m = n->l->max_end;
	if (n->r && n->r->max_end > m)
		m = n->r->max_end;
	if (hl - hr > 1 || hr - hl > 1 || n->height != 1 + (hl > hr ? hl : hr) || n->max_end != m)
		return -1;
	return n->height;
}

int itree_check(const struct itree *t)
{
	const struct itree_node *prev = NULL;
	size_t count = 0;

	return check(t->root, &prev, &count) < 0 || count != t->n ? -EINVAL : 0;
}
