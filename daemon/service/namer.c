/* The daemon's namer: a child forked before the daemon opens its store, with its own
 * store connection, that names bare frames (store_bare_frames) oldest first, after each
 * flush and every NAMER_POLL_MS. The daemon's loop never waits on a lookup. WAL takes one
 * writer at a time: names are found before a transaction opens, NAMER_BATCH go in each,
 * and its commit waits up to NAMER_BUSY_MS for the daemon's flush (which waits 200 ms at
 * most for it: a batch's transaction is short). From the oldest at its start, so frames
 * a killed daemon left bare are named by the next one. A frame with no name to find is
 * passed (not retried until the next daemon). Files opened as root: only a regular ELF
 * whose build-id is the frame's (elfsym/symcache check it), by its stored path. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/log.h"
#include "daemon/service/namer.h"
#include "store/store.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/symcache.h"

#define NAMER_WAIT_STEP_MS 10   /* namer_stop's poll for its exit */
#define BUILD_ID_HEX 129

struct elf_slot {
	char build_id[BUILD_ID_HEX];
	struct elfsym *e;           /* NULL: no usable file (not retried while kept) */
};

struct pending {
	int64_t id;
	char build_id[BUILD_ID_HEX];
	char *path;
	uint64_t off;
	char *mangled, *function;   /* ELF symbol, demangled (malloc'd) */
	struct dwsym_frames df;
	struct store_line lines[STORE_MAX_LINES];
	unsigned nlines;
};

struct namer_ctx {
	struct store *store;
	struct symcache *cache;
	struct elf_slot elf[NAMER_ELF_MAX];
	unsigned elf_next;          /* the slot replaced next */
	struct pending p[NAMER_BATCH];
	unsigned n;
	int64_t after;              /* frames up to this id are done */
	bool failing;               /* a batch's write failed: logged once */
};

static struct elfsym *elf_for(struct namer_ctx *c, const char *build_id, const char *path)
{
	char hex[BUILD_ID_HEX];
	unsigned i;

	for (i = 0; i < NAMER_ELF_MAX; i++)
		if (!strcmp(c->elf[i].build_id, build_id))
			return c->elf[i].e;
	struct elf_slot *s = &c->elf[c->elf_next++ % NAMER_ELF_MAX];

	if (s->e)
		elfsym_close(s->e);
	*s = (struct elf_slot){ 0 };
	snprintf(s->build_id, sizeof(s->build_id), "%s", build_id);
	if (elfsym_open(&s->e, path) < 0 || elfsym_build_id(s->e, hex, sizeof(hex)) < 0 ||
	    strcmp(hex, build_id)) {
		if (s->e)
			elfsym_close(s->e);
		s->e = NULL;
	}
	return s->e;
}

/* Names and lines of one frame, as the recorder's symbolize.c finds them. */
static void name_one(struct namer_ctx *c, struct pending *p)
{
	struct elfsym *e = elf_for(c, p->build_id, p->path);
	uint64_t at = p->off ? p->off - 1 : 0, delta;   /* a return address: the call before */
	const char *name = e ? elfsym_lookup_offset(e, at, &delta) : NULL;

	if (name) {
		p->mangled = strdup(name);
		p->function = sym_demangle(name);
	}
	if (c->cache && symcache_code(c->cache, p->build_id, p->path, NULL, at, &p->df) >= 0) {
		p->nlines = p->df.n < STORE_MAX_LINES ? p->df.n : STORE_MAX_LINES;
		for (unsigned j = 0; j < p->nlines; j++) {
			const struct dwsym_frame *f = &p->df.v[j];

			p->lines[j] = (struct store_line){ .function = f->function,
				.mangled = f->mangled, .file = f->file, .line = f->line,
				.column = f->column, .decl_line = f->decl_line, .inlined = f->inlined };
		}
	}
}

static void pending_free(struct namer_ctx *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		struct pending *p = &c->p[i];

		free(p->path);
		free(p->mangled);
		free(p->function);
		dwsym_frames_free(&p->df);
	}
	memset(c->p, 0, c->n * sizeof(c->p[0]));
	c->n = 0;
}

static int take(void *arg, int64_t id, const char *build_id, const char *path, uint64_t off)
{
	struct namer_ctx *c = arg;
	struct pending *p = &c->p[c->n];

	if (strlen(build_id) >= BUILD_ID_HEX || !(p->path = strdup(path)))
		return 0;   /* not a build-id this store writes; passed */
	p->id = id;
	p->off = off;
	snprintf(p->build_id, sizeof(p->build_id), "%s", build_id);
	c->n++;
	return 0;
}

/* The names of what the batch found, in one transaction. */
static int write_batch(struct namer_ctx *c)
{
	int err = store_begin(c->store);

	for (unsigned i = 0; !err && i < c->n; i++) {
		struct pending *p = &c->p[i];
		const char *fn = p->function ? p->function : p->mangled;

		if (!fn && p->nlines)   /* no ELF symbol (a stripped .symtab): DWARF's */
			fn = p->lines[p->nlines - 1].function;
		if (!fn && !p->nlines)
			continue;
		struct store_frame f = { .build_id = p->build_id, .path = p->path, .offset = p->off,
					 .function = fn, .lines = p->nlines ? p->lines : NULL,
					 .nlines = p->nlines,
					 .mangled = p->mangled ? p->mangled :
						    p->nlines ? p->lines[p->nlines - 1].mangled : NULL };
		err = store_put_frame_symbols(c->store, &f);
	}
	if (!err)
		err = store_commit(c->store);
	if (err)
		store_rollback(c->store);
	return err;
}

/* One batch: > 0 named (more may follow), 0 none left, < 0 its write failed (retried). */
static int batch(struct namer_ctx *c)
{
	int64_t last;
	int r = store_bare_frames(c->store, c->after, NAMER_BATCH, take, c);

	if (r <= 0 || !c->n) {
		pending_free(c);
		return r < 0 ? r : 0;
	}
	last = c->p[c->n - 1].id;
	for (unsigned i = 0; i < c->n; i++)
		name_one(c, &c->p[i]);
	r = write_batch(c);
	pending_free(c);
	if (r) {
		if (!c->failing)
			log_warn("namer: %s (frames stay bare until a later round)",
				 store_errmsg(c->store));
		c->failing = true;
		return r;
	}
	if (c->failing)
		log_warn("namer: names written again");
	c->failing = false;
	c->after = last;
	return 1;
}

/* 1 when the pipe says finish (EOF), 0 when woken or timed out. */
static int wait_wake(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[64];

	if (poll(&pfd, 1, NAMER_POLL_MS) <= 0)
		return 0;
	ssize_t got = read(fd, buf, sizeof(buf));
	return got == 0;
}

static int child_main(const char *db, int rfd)
{
	struct symcache_opts so = { .max_bytes = NAMER_CACHE_BYTES, .debug = { .debuginfod = true } };
	struct namer_ctx *c = calloc(1, sizeof(*c));
	char err[512];
	int finish = 0;

	if (!c)
		return 1;
	prctl(PR_SET_NAME, "memprofd-namer");
	/* The daemon wakes it once its store is open and migrated; EOF first: it failed. */
	if (read(rfd, err, 1) != 1)
		return 0;
	if (store_open(&c->store, db, STORE_RDWR, err, sizeof(err))) {
		log_error("namer: %s", err);
		return 1;
	}
	store_set_busy_timeout(c->store, NAMER_BUSY_MS);
	if (symcache_new(&c->cache, &so) < 0)
		c->cache = NULL;
	for (unsigned round = 1;; round++) {
		while (batch(c) > 0)
			;
		if (finish)
			break;
		finish = wait_wake(rfd);
		if (round % NAMER_RESCAN_ROUNDS == 0)
			c->after = 0;
	}
	store_close(c->store);
	return 0;
}

int namer_start(struct namer *n, const char *db, const int *close_fds, int nclose)
{
	int pfd[2];
	pid_t parent = getpid();

	*n = (struct namer){ .wake_fd = -1 };
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		return -e;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		close(pfd[1]);
		for (int i = 0; i < nclose; i++)
			if (close_fds[i] >= 0)
				close(close_fds[i]);
		_exit(child_main(db, pfd[0]));
	}
	close(pfd[0]);
	fcntl(pfd[1], F_SETFL, O_NONBLOCK);
	n->pid = pid;
	n->wake_fd = pfd[1];
	return 0;
}

void namer_wake(struct namer *n)
{
	if (n->wake_fd >= 0 && write(n->wake_fd, "w", 1) < 0 && errno != EAGAIN)
		log_warn("namer: waking it: %s", strerror(errno));
}

uint64_t namer_cpu_ns(const struct namer *n)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	FILE *f;

	if (!n->pid)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)n->pid);
	if (!(f = fopen(path, "re")))
		return 0;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = 0;
	const char *p = strrchr(buf, ')');   /* comm may hold spaces; fields 14, 15 follow */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return 0;
	return (ut + st) * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK));
}

int namer_stop(struct namer *n, int64_t deadline_ms)
{
	int status, done = 0;

	if (!n->pid)
		return 0;
	if (n->wake_fd >= 0)
		close(n->wake_fd);
	n->wake_fd = -1;
	while (!(done = waitpid(n->pid, &status, WNOHANG) == n->pid) && mono_ms() < deadline_ms)
		usleep(NAMER_WAIT_STEP_MS * 1000);
	if (!done) {
		kill(n->pid, SIGKILL);
		waitpid(n->pid, &status, 0);
	}
	n->pid = 0;
	return done;
}
