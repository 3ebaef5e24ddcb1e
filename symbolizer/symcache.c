/* Build-id -> opened dwsym/datasym, LRU by bytes. Invariants: total bytes is the sum of
 * the entries' estimates (dwsym_bytes + datasym_bytes + the entry); after any call the
 * total is <= max_bytes unless the single most recently used entry alone exceeds it; an
 * entry's objects were opened from a file whose build-id equals the entry's key. */
#include "symbolizer/symcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolizer/elfsym.h"

struct entry {
	char *build_id;
	char *path;               /* the path a failed open used (failed entries only) */
	char *debug_path;         /* NULL if the DWARF is the binary's own */
	struct dwsym *dw;         /* NULL until code is asked for */
	struct datasym *ds;       /* NULL until data is asked for */
	int err;                  /* < 0: opening path failed with this */
	size_t bytes;
	struct entry *hnext;      /* hash chain */
	struct entry *prev, *next; /* LRU list, most recent at head */
};

struct symcache {
	struct symcache_opts o;
	struct entry *buckets[SYMCACHE_BUCKETS];
	struct entry *head, *tail;
	struct symcache_stats st;
};

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

int symcache_new(struct symcache **out, const struct symcache_opts *o)
{
	struct symcache *c;

	if (!out)
		return -EINVAL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	if (o)
		c->o = *o;
	if (!c->o.max_bytes)
		c->o.max_bytes = SYMCACHE_DEFAULT_BYTES;
	*out = c;
	return 0;
}

static void lru_unlink(struct symcache *c, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct symcache *c, struct entry *e)
{
	e->next = c->head;
	e->prev = NULL;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void entry_free(struct entry *e)
{
	dwsym_close(e->dw);
	datasym_close(e->ds);
	free(e->build_id);
	free(e->path);
	free(e->debug_path);
	free(e);
}

static void entry_remove(struct symcache *c, struct entry *e)
{
	struct entry **pp = &c->buckets[hash_str(e->build_id) % SYMCACHE_BUCKETS];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	c->st.bytes -= e->bytes;
	c->st.entries--;
	entry_free(e);
}

void symcache_free(struct symcache *c)
{
	if (!c)
		return;
	while (c->head)
		entry_remove(c, c->head);
	free(c);
}

static void account(struct symcache *c, struct entry *e)
{
	size_t b = sizeof(*e) + strlen(e->build_id) + dwsym_bytes(e->dw) + datasym_bytes(e->ds);

	c->st.bytes = c->st.bytes - e->bytes + b;
	e->bytes = b;
	/* Evict least recently used, never the entry in hand. */
	while (c->st.bytes > c->o.max_bytes && c->tail && c->tail != e) {
		c->st.evictions++;
		entry_remove(c, c->tail);
	}
}

static struct entry *find(struct symcache *c, const char *build_id)
{
	struct entry *e = c->buckets[hash_str(build_id) % SYMCACHE_BUCKETS];

	while (e && strcmp(e->build_id, build_id))
		e = e->hnext;
	return e;
}

static struct entry *get_entry(struct symcache *c, const char *build_id)
{
	struct entry *e = find(c, build_id);
	uint32_t h;

	if (e) {
		lru_unlink(c, e);
		lru_push(c, e);
		return e;
	}
	if (!(e = calloc(1, sizeof(*e))) || !(e->build_id = strdup(build_id))) {
		free(e);
		return NULL;
	}
	h = hash_str(build_id) % SYMCACHE_BUCKETS;
	e->hnext = c->buckets[h];
	c->buckets[h] = e;
	lru_push(c, e);
	c->st.entries++;
	account(c, e);
	return e;
}

/* Checks that path is the binary with build_id before anything is opened from it. The
 * objects opened afterwards re-check on their own descriptor (dwsym: its ELF symbols). */
static int check_build_id(const char *path, const char *build_id)
{
	char hex[2 * ELFSYM_BUILD_ID_MAX + 1];
	int r = elf_build_id_of(path, hex, sizeof(hex));

	if (r < 0)
		return r;
	return strcmp(hex, build_id) ? -ESTALE : 0;
}

/* Opens path once; self names that very inode for the readers that take a path. */
static int open_self(const char *path, int *fd, char *self, size_t selfsz)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	snprintf(self, selfsz, "/proc/self/fd/%d", *fd);
	return 0;
}

static int remember_failure(struct symcache *c, struct entry *e, const char *path, int err)
{
	free(e->path);
	e->path = strdup(path);
	e->err = err;
	c->st.failures++;
	return err;
}

static int open_code(struct symcache *c, struct entry *e, const char *path, const char *logical)
{
	char dbg[4096], hex[2 * ELFSYM_BUILD_ID_MAX + 1];
	int r;

	if ((r = check_build_id(path, e->build_id)) < 0)
		return r;
	if ((r = dwsym_open(&e->dw, path, NULL)) < 0)
		return r;
	/* The open file must still be that build (path may have been replaced meanwhile). */
	if (dwsym_build_id(e->dw, hex, sizeof(hex)) < 0 || strcmp(hex, e->build_id)) {
		dwsym_close(e->dw);
		e->dw = NULL;
		return -ESTALE;
	}
	if (dwsym_has_dwarf(e->dw))
		return 0;
	if (debuginfo_find(&c->o.debug, path, logical, e->build_id, dbg, sizeof(dbg)) == 0) {
		struct dwsym *d2;

		if (dwsym_open(&d2, path, dbg) == 0 && dwsym_build_id(d2, hex, sizeof(hex)) == 0 &&
		    !strcmp(hex, e->build_id)) {
			dwsym_close(e->dw);
			e->dw = d2;
			e->debug_path = strdup(dbg);
		} else if (d2) {
			dwsym_close(d2);
		}
	}
	return 0;
}

static int prepare(struct symcache *c, const char *build_id, const char *path,
		   const char *logical, bool code, struct entry **out)
{
	char self[64];
	struct entry *e;
	int r, fd = -1;

	if (!c || !build_id || !*build_id || !path)
		return -EINVAL;
	if (!(e = get_entry(c, build_id)))
		return -ENOMEM;
	if ((code ? e->dw != NULL : e->ds != NULL)) {
		c->st.hits++;
		*out = e;
		return 0;
	}
	if (e->err && e->path && !strcmp(e->path, path))
		return e->err;   /* this path already failed for this build-id */
	c->st.misses++;
	if (code) {
		r = open_code(c, e, path, logical);
	} else if ((r = open_self(path, &fd, self, sizeof(self))) == 0 &&
		   (r = check_build_id(self, build_id)) == 0) {
		/* Data symbols: the binary's own table, else the debug file's full .symtab.
		 * Read through the descriptor whose build-id was just checked. */
		r = datasym_open(&e->ds, self);
		if (r == 0 && datasym_count(e->ds) == 0) {
			char dbg[4096];
			struct datasym *d2;

			if (debuginfo_find(&c->o.debug, path, logical, build_id, dbg, sizeof(dbg)) == 0 &&
			    datasym_open(&d2, dbg) == 0) {
				datasym_close(e->ds);
				e->ds = d2;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return remember_failure(c, e, path, r);
	e->err = 0;
	account(c, e);
	*out = e;
	return 0;
}

int symcache_code(struct symcache *c, const char *build_id, const char *path,
		  const char *logical_path, uint64_t off, struct dwsym_frames *out)
{
	struct entry *e;
	int r;

	if (!out)
		return -EINVAL;
	*out = (struct dwsym_frames){ 0 };
	if ((r = prepare(c, build_id, path, logical_path, true, &e)) < 0)
		return r;
	return dwsym_lookup_offset(e->dw, off, out);
}

bool symcache_code_dwarf(struct symcache *c, const char *build_id)
{
	struct entry *e = c && build_id ? find(c, build_id) : NULL;

	return e && e->dw && dwsym_has_dwarf(e->dw) == 1;
}

int symcache_data(struct symcache *c, const char *build_id, const char *path,
		  const char *logical_path, uint64_t vaddr, bool tls, struct datasym_hit *out)
{
	struct entry *e;
	int r;

	if (!out)
		return -EINVAL;
	if ((r = prepare(c, build_id, path, logical_path, false, &e)) < 0)
		return r;
	return tls ? datasym_lookup_tls(e->ds, vaddr, out) : datasym_lookup(e->ds, vaddr, out);
}

void symcache_get_stats(const struct symcache *c, struct symcache_stats *st)
{
	if (c && st)
		*st = c->st;
}
