/* uprobe_cost: the baseline of the exact-mode handler benchmark (bench/overhead.py
 * --uprobe-cost). Runs CMD with bare uprobes where `memprofd record --alloc exact` puts
 * its own on malloc and free: the same sites (symbolizer/probesite.c's rule), entry +
 * return on malloc, entry on free, every process (as exact mode), and either
 *   --probes empty    a BPF program that returns at once (multi-uprobe links, as exact
 *                     mode): what the uprobe itself costs, so the difference to exact mode
 *                     is exactly its handlers' work;
 *   --probes tracefs  tracefs uprobe events recording into a private trace instance
 *                     (no program; the figure the README first quoted);
 *   --probes none     nothing (the same wrapper, for symmetry).
 * usage: uprobe_cost --probes empty|tracefs|none [--lib LIBC] -- CMD [ARGS...]
 * Exits with CMD's status; the probes are gone when it returns (also on SIGINT/SIGTERM). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "daemon/alloc/uprobe_multi.h"
#include "symbolizer/elfsym.h"
#include "symbolizer/probesite.h"

#define TRACEFS "/sys/kernel/tracing"
#define GROUP "memprofd_uprobe_cost"
#define INSTANCE TRACEFS "/instances/" GROUP

static const char *const funcs[] = { "malloc", "free" };
enum { F_MALLOC, F_FREE, NFUNCS };

static bool tracefs_armed;

static int write_file(const char *path, const char *text, bool append)
{
	int fd = open(path, O_WRONLY | (append ? O_APPEND : O_TRUNC));
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	int err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

static void tracefs_disarm(void)
{
	if (!tracefs_armed)
		return;
	write_file(INSTANCE "/events/" GROUP "/enable", "0", false);
	rmdir(INSTANCE);
	write_file(TRACEFS "/uprobe_events", "-:" GROUP "/malloc_entry", true);
	write_file(TRACEFS "/uprobe_events", "-:" GROUP "/malloc_return", true);
	write_file(TRACEFS "/uprobe_events", "-:" GROUP "/free_entry", true);
	tracefs_armed = false;
}

static void on_signal(int sig)
{
	tracefs_disarm();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int tracefs_arm(const char *lib, const uint64_t site[NFUNCS])
{
	char def[3][4200];
	int err = 0;

	snprintf(def[0], sizeof(def[0]), "p:" GROUP "/malloc_entry %s:0x%llx\n", lib,
		 (unsigned long long)site[F_MALLOC]);
	snprintf(def[1], sizeof(def[1]), "r:" GROUP "/malloc_return %s:0x%llx\n", lib,
		 (unsigned long long)site[F_MALLOC]);
	snprintf(def[2], sizeof(def[2]), "p:" GROUP "/free_entry %s:0x%llx\n", lib,
		 (unsigned long long)site[F_FREE]);
	tracefs_armed = true;
	for (int i = 0; i < 3 && !err; i++)
		err = write_file(TRACEFS "/uprobe_events", def[i], true);
	if (!err && mkdir(INSTANCE, 0700) && errno != EEXIST)
		err = -errno;
	if (!err)
		err = write_file(INSTANCE "/events/" GROUP "/enable", "1", false);
	if (err) {
		fprintf(stderr, "memprofd: uprobe_cost: tracefs uprobes on %s: %s%s\n", lib, strerror(-err),
			access(TRACEFS "/uprobe_events", F_OK) ? " (tracefs is not mounted: "
			"mount -t tracefs nodev " TRACEFS ")" : "");
		tracefs_disarm();
	}
	return err;
}

/* An empty program on the three sites; the link fds are returned in fds[3]. */
static int bpf_arm(const char *lib, const uint64_t site[NFUNCS], int fds[3])
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = UPROBE_MULTI_ATTACH_TYPE);
	uint64_t cookie = 0;
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "empty", "GPL", insns, 2, &o);

	if (prog < 0) {
		fprintf(stderr, "memprofd: uprobe_cost: loading the empty program: %s\n", strerror(errno));
		return -errno;
	}
	fds[0] = uprobe_multi_link(prog, lib, &site[F_MALLOC], &cookie, 1, false);
	fds[1] = uprobe_multi_link(prog, lib, &site[F_MALLOC], &cookie, 1, true);
	fds[2] = uprobe_multi_link(prog, lib, &site[F_FREE], &cookie, 1, false);
	close(prog);
	for (int i = 0; i < 3; i++) {
		if (fds[i] < 0) {
			fprintf(stderr, "memprofd: uprobe_cost: multi-uprobe link on %s: %s\n", lib,
				strerror(-fds[i]));
			return fds[i];
		}
	}
	return 0;
}

/* File offsets of malloc's and free's probe sites in lib, as exact mode picks them. */
static int find_sites(const char *lib, uint64_t site[NFUNCS])
{
	struct elfsym *e;
	uint64_t off[NFUNCS];
	int err = elfsym_open(&e, lib);

	if (err)
		return err;
	err = elfsym_find_funcs(e, (const char *const *)funcs, NFUNCS, off);
	elfsym_close(e);
	if (err < 0)
		return err;
	if (off[F_MALLOC] == UINT64_MAX || off[F_FREE] == UINT64_MAX)
		return -ENOENT;
	probesite_find(lib, off[F_MALLOC], PROBESITE_ARG1 | PROBESITE_ARG2 | PROBESITE_ARG3,
		       &site[F_MALLOC]);
	probesite_find(lib, off[F_FREE], PROBESITE_ARG1, &site[F_FREE]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *probes = NULL, *lib = NULL;
	int i, fds[3] = { -1, -1, -1 }, status = 0, err = 0;
	uint64_t site[NFUNCS];
	Dl_info info;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--probes") && i + 1 < argc)
			probes = argv[++i];
		else if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else
			break;
	}
	if (i >= argc - 1 || strcmp(argv[i], "--") || !probes ||
	    (strcmp(probes, "empty") && strcmp(probes, "tracefs") && strcmp(probes, "none"))) {
		fprintf(stderr, "usage: uprobe_cost --probes empty|tracefs|none [--lib LIBC] -- CMD [ARGS...]\n");
		return 2;
	}
	if (!lib) {   /* the libc this program runs on (the target's, on the same system), even
		       * where a sanitizer's malloc comes first */
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		void *m = libc ? dlsym(libc, "malloc") : NULL;
		if (!m || !dladdr(m, &info) || !info.dli_fname) {
			fprintf(stderr, "memprofd: uprobe_cost: cannot tell which libc defines malloc\n");
			return 1;
		}
		lib = info.dli_fname;
	}
	if (strcmp(probes, "none")) {
		err = find_sites(lib, site);
		if (err) {
			fprintf(stderr, "memprofd: uprobe_cost: malloc/free in %s: %s\n", lib, strerror(-err));
			return 1;
		}
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		err = !strcmp(probes, "empty") ? bpf_arm(lib, site, fds) : tracefs_arm(lib, site);
	}
	if (!err) {
		pid_t pid = fork();
		if (pid == 0) {
			execvp(argv[i + 1], argv + i + 1);
			fprintf(stderr, "memprofd: uprobe_cost: %s: %s\n", argv[i + 1], strerror(errno));
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			err = -errno;
	}
	for (int k = 0; k < 3; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	tracefs_disarm();
	if (err)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
