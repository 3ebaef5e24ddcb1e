/* The name cache (namecache.h). A file: a 32-byte header (magic, version, counts, payload
 * length, CRC-32 of the payload), then the payload: the build-id, then the entries in
 * strictly increasing offset order, each `u64 offset`, the ELF function and mangled
 * names (strings), `u32 n` and n lines of `u32 line,
 * column, decl_line, inlined` and three strings (`u32 len` or NC_NULL, bytes, NUL).
 * Read whole into one buffer whose strings the entries point into; any check that fails
 * drops the file (counted in files_bad) and the run looks its frames up as without one. */
#include "daemon/record/namecache.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/array.h"
#include "base/cleanup.h"
#include "store/store.h"

#define NC_MAGIC "MPDNAME\1"
#define NC_VERSION 2u          /* bump when the symbolizer's chains change for a build-id */
#define NC_HEAD 32u
#define NC_NULL 0xffffffffu    /* a string length: no string */
#define NC_ID_MAX 128          /* hex digits of a build-id */

struct nc_entry {
	uint64_t off;
	struct nc_names nm;        /* nm.n == 0: DWARF has nothing at off */
};

struct nc_file {
	char id[NC_ID_MAX + 1];
	struct nc_entry *e;        /* sorted by off */
	size_t n, cap;
	char *buf;                 /* the file read, which loaded entries point into */
	struct store_line *lines;  /* the loaded entries' lines */
	bool dirty;                /* gained entries since it was read */
};

struct namecache {
	char dir[PATH_MAX];
	struct nc_file *f;
	size_t n, cap;
	struct namecache_stats st;
};

int namecache_new(struct namecache **out, const char *dir)
{
	const char *x = getenv(NC_DIR_ENV), *home = getenv("HOME");
	struct namecache *c;
	int n;

	*out = NULL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	if (dir)
		n = snprintf(c->dir, sizeof(c->dir), "%s", dir);
	else if (x && *x == '/')
		n = snprintf(c->dir, sizeof(c->dir), "%s/" NC_SUBDIR, x);
	else if (home && *home == '/')
		n = snprintf(c->dir, sizeof(c->dir), "%s/.cache/" NC_SUBDIR, home);
	else
		n = -1;
	if (n < 0 || (size_t)n >= sizeof(c->dir)) {
		free(c);
		return -ENOENT;
	}
	*out = c;
	return 0;
}

void namecache_free(struct namecache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->f[i].e);
		free(c->f[i].buf);
		free(c->f[i].lines);
	}
	free(c->f);
	free(c);
}

void namecache_get_stats(const struct namecache *c, struct namecache_stats *st)
{
	*st = c ? c->st : (struct namecache_stats){ 0 };
}

static bool id_ok(const char *id)
{
	size_t n = strspn(id, "0123456789abcdef");

	return n && n <= NC_ID_MAX && !id[n];
}

/* A bounds-checked reader over the payload. */
struct cur {
	const char *p, *end;
};

static const void *take(struct cur *c, size_t n)
{
	const char *p = c->p;

	if ((size_t)(c->end - p) < n)
		return NULL;
	c->p += n;
	return p;
}

static bool take_u32(struct cur *c, uint32_t *v)
{
	const void *p = take(c, 4);

	if (p)
		memcpy(v, p, 4);
	return p != NULL;
}

/* A string: NULL (NC_NULL) or a NUL-terminated one of at most NC_STR_MAX bytes. */
static bool take_str(struct cur *c, const char **s)
{
	uint32_t n;
	const char *p;

	if (!take_u32(c, &n))
		return false;
	if (n == NC_NULL) {
		*s = NULL;
		return true;
	}
	if (n > NC_STR_MAX || !(p = take(c, (size_t)n + 1)) || p[n] || memchr(p, 0, n))
		return false;
	*s = p;
	return true;
}

static bool take_line(struct cur *c, struct store_line *l)
{
	uint32_t v[4];

	for (int i = 0; i < 4; i++)
		if (!take_u32(c, &v[i]))
			return false;
	if (v[3] > 1)
		return false;
	*l = (struct store_line){ .line = v[0], .column = v[1], .decl_line = v[2], .inlined = v[3] };
	return take_str(c, &l->function) && take_str(c, &l->mangled) && take_str(c, &l->file);
}

/* The payload's entries into f (which is empty): 0, or -EBADMSG. */
static int parse(struct nc_file *f, struct cur *c, uint32_t nent, uint32_t nlines)
{
	const char *id;
	size_t used = 0;

	if (!take_str(c, &id) || !id || strcmp(id, f->id) || nent > NC_ENTRIES_MAX ||
	    nlines > (uint64_t)nent * STORE_MAX_LINES)
		return -EBADMSG;
	if (nent && (!(f->e = calloc(nent, sizeof(*f->e))) ||
		     !(f->lines = calloc(nlines ? nlines : 1, sizeof(*f->lines)))))
		return -ENOMEM;
	f->cap = nent;
	for (uint32_t i = 0; i < nent; i++) {
		const void *p = take(c, 8);
		const char *fn, *mg;
		uint32_t n;
		uint64_t off;

		if (!p || !take_str(c, &fn) || !take_str(c, &mg) || !take_u32(c, &n) ||
		    n > STORE_MAX_LINES || n > nlines - used)
			return -EBADMSG;
		memcpy(&off, p, 8);
		if (i && off <= f->e[i - 1].off)
			return -EBADMSG;   /* not sorted, or twice */
		for (uint32_t j = 0; j < n; j++)
			if (!take_line(c, &f->lines[used + j]))
				return -EBADMSG;
		f->e[i] = (struct nc_entry){ .off = off, .nm = { .function = fn, .mangled = mg,
							.v = n ? &f->lines[used] : NULL, .n = n } };
		used += n;
		f->n = i + 1;
	}
	return c->p == c->end && used == nlines ? 0 : -EBADMSG;
}

/* Reads f's file, if there is a valid one: 0 (read or none), -errno on damage. */
static int load(struct namecache *c, struct nc_file *f)
{
	char path[PATH_MAX + NC_ID_MAX + 2];
	_cleanup_close_ int fd = -1;
	struct stat st;
	uint32_t h[6];
	ssize_t got;

	snprintf(path, sizeof(path), "%s/%s", c->dir, f->id);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size < NC_HEAD ||
	    st.st_size > NC_FILE_MAX)
		return -EBADMSG;
	if (!(f->buf = malloc((size_t)st.st_size)))
		return -ENOMEM;
	got = pread(fd, f->buf, (size_t)st.st_size, 0);
	if (got != st.st_size)
		return got < 0 ? -errno : -EBADMSG;
	memcpy(h, f->buf + 8, sizeof(h));   /* version, entries, lines, payload, crc, 0 */
	struct cur cu = { f->buf + NC_HEAD, f->buf + st.st_size };
	if (memcmp(f->buf, NC_MAGIC, 8) || h[0] != NC_VERSION || h[5] ||
	    h[3] != (uint64_t)st.st_size - NC_HEAD ||
	    h[4] != (uint32_t)crc32(0, (const Bytef *)cu.p, (uInt)h[3]))
		return -EBADMSG;
	c->st.files_read++;
	return parse(f, &cu, h[1], h[2]);
}

/* build_id's file state, read on first use; NULL if the id is not hex or too many. */
static struct nc_file *file_of(struct namecache *c, const char *build_id)
{
	struct nc_file *f;

	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->f[i].id, build_id))
			return &c->f[i];
	if (!id_ok(build_id) || c->n >= NC_FILES_MAX ||
	    ARRAY_GROW(c->f, c->cap, c->n, 8) < 0)
		return NULL;
	f = &c->f[c->n++];
	*f = (struct nc_file){ 0 };
	snprintf(f->id, sizeof(f->id), "%s", build_id);
	if (load(c, f) < 0) {   /* damaged: start empty, rewritten at the next save */
		c->st.files_bad++;
		free(f->e);
		free(f->buf);
		free(f->lines);
		*f = (struct nc_file){ .dirty = true };
		snprintf(f->id, sizeof(f->id), "%s", build_id);
	}
	return f;
}

/* The index of the first entry at or past off. */
static size_t lower(const struct nc_file *f, uint64_t off)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->e[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int namecache_get(struct namecache *c, const char *build_id, uint64_t off,
		  struct nc_names *out)
{
	struct nc_file *f = c ? file_of(c, build_id) : NULL;
	size_t i;

	if (!f)
		return 0;
	i = lower(f, off);
	if (i == f->n || f->e[i].off != off) {
		c->st.misses++;
		return 0;
	}
	c->st.hits++;
	*out = f->e[i].nm;
	return 1;
}

bool namecache_has(struct namecache *c, const char *build_id)
{
	struct nc_file *f = c ? file_of(c, build_id) : NULL;

	return f && f->n;
}

int namecache_put(struct namecache *c, const char *build_id, uint64_t off,
		  const struct nc_names *nm)
{
	struct nc_file *f = c ? file_of(c, build_id) : NULL;
	size_t i;

	if (!f || nm->n > STORE_MAX_LINES || (nm->n && !nm->v))
		return -EINVAL;
	i = lower(f, off);
	if (i < f->n && f->e[i].off == off)
		return 0;
	if (f->n >= NC_ENTRIES_MAX)
		return -ENOSPC;
	if (ARRAY_GROW(f->e, f->cap, f->n, 64) < 0)
		return -ENOMEM;
	memmove(&f->e[i + 1], &f->e[i], (f->n - i) * sizeof(*f->e));
	f->e[i] = (struct nc_entry){ .off = off, .nm = *nm };
	f->n++;
	f->dirty = true;
	return 0;
}

/* A growing output buffer; oom set on the first failed growth. */
struct out {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n > o->cap) {
		size_t nc = o->cap ? o->cap : 4096;
		char *q;

		while (nc < o->len + n)
			nc *= 2;
		if (nc > 2 * (size_t)NC_FILE_MAX || !(q = realloc(o->p, nc))) {
			o->oom = true;
			return;
		}
		o->p = q;
		o->cap = nc;
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void put_u32(struct out *o, uint32_t v) { put(o, &v, 4); }

/* A string as take_str reads it; one longer than NC_STR_MAX is cut (never read back
 * longer than that). */
static void put_str(struct out *o, const char *s)
{
	size_t n = s ? strnlen(s, NC_STR_MAX) : 0;

	put_u32(o, s ? (uint32_t)n : NC_NULL);
	if (s) {
		put(o, s, n);
		put(o, "", 1);
	}
}

static int write_file(struct namecache *c, const struct nc_file *f)
{
	struct out o = { 0 };
	uint32_t nlines = 0;
	char path[PATH_MAX + NC_ID_MAX + 2], tmp[sizeof(path) + 16];
	int fd, err = 0;

	put(&o, NC_MAGIC, 8);
	for (int i = 0; i < 6; i++)
		put_u32(&o, 0);
	put_str(&o, f->id);
	for (size_t i = 0; i < f->n; i++) {
		const struct nc_names *nm = &f->e[i].nm;

		put(&o, &f->e[i].off, 8);
		put_str(&o, nm->function);
		put_str(&o, nm->mangled);
		put_u32(&o, nm->n);
		for (unsigned j = 0; j < nm->n; j++) {
			const struct store_line *l = &nm->v[j];

			put_u32(&o, l->line);
			put_u32(&o, l->column);
			put_u32(&o, l->decl_line);
			put_u32(&o, l->inlined);
			put_str(&o, l->function);
			put_str(&o, l->mangled);
			put_str(&o, l->file);
		}
		nlines += nm->n;
	}
	if (o.oom || o.len > NC_FILE_MAX) {
		free(o.p);
		return o.oom ? -ENOMEM : -EFBIG;
	}
	uint32_t h[6] = { NC_VERSION, (uint32_t)f->n, nlines, (uint32_t)(o.len - NC_HEAD),
			  (uint32_t)crc32(0, (const Bytef *)o.p + NC_HEAD, (uInt)(o.len - NC_HEAD)), 0 };
	memcpy(o.p + 8, h, sizeof(h));
	snprintf(path, sizeof(path), "%s/%s", c->dir, f->id);
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		free(o.p);
		return -errno;
	}
	if (write(fd, o.p, o.len) != (ssize_t)o.len)
		err = -EIO;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	free(o.p);
	return err;
}

/* dir and its parents, each a directory of ours (0700 where made here). */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char was = *s;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = was;
		if (!was)
			break;
	}
	if (lstat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? 0 : -EPERM;
}

/* At most NC_DIR_FILES_MAX files in the directory: the least recently written go (a
 * build-id per rebuilt binary would otherwise pile up). Best effort. */
static void prune(const char *dir)
{
	struct { char name[NC_ID_MAX + 1]; time_t t; } *v = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;

	if (!d)
		return;
	while ((de = readdir(d)) && n < 4 * NC_DIR_FILES_MAX) {
		if (!id_ok(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    ARRAY_GROW(v, cap, n, 64) < 0)
			continue;
		memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1);   /* id_ok: it fits */
		v[n++].t = st.st_mtime;
	}
	while (n > NC_DIR_FILES_MAX) {   /* rare and small: the oldest, one at a time */
		size_t old = 0;

		for (size_t i = 1; i < n; i++)
			if (v[i].t < v[old].t)
				old = i;
		unlinkat(dirfd(d), v[old].name, 0);
		v[old] = v[--n];
	}
	closedir(d);
	free(v);
}

int namecache_save(struct namecache *c)
{
	int err = 0, r;
	bool made = false;

	for (size_t i = 0; c && i < c->n; i++) {
		struct nc_file *f = &c->f[i];

		if (!f->dirty || !f->n)
			continue;
		if (!made && (err = make_dirs(c->dir)) < 0)
			return err;
		made = true;
		if ((r = write_file(c, f)) < 0)
			err = r;
		else
			c->st.files_written++;
		f->dirty = false;
	}
	if (made)
		prune(c->dir);
	return err;
}
