/* Multi-uprobe links through the raw bpf(2) syscall (see uprobe_multi.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include "daemon/alloc/uprobe_multi.h"

#define UPROBE_MULTI_RETURN 1u

/* bpf_attr's link_create for uprobe_multi. */
struct uprobe_multi_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, um_flags, pid, pad;
};

/* A program loaded for multi-uprobe links, linked at "/": a kernel with them refuses
 * the directory (-EBADF), one without refuses the attach type (-EINVAL) or the load.
 * libbpf's own probe does the same; parsing vmlinux BTF instead cost ~20 ms a start. */
static bool probe_kernel(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	union bpf_attr attr;
	uint64_t off = 0;
	int prog, fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_KPROBE;
	attr.expected_attach_type = UPROBE_MULTI_ATTACH_TYPE;
	attr.insns = (uintptr_t)insns;
	attr.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	attr.license = (uintptr_t)"GPL";
	prog = syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	if (prog < 0)
		return false;
	fd = uprobe_multi_link_pid(prog, "/", &off, NULL, NULL, 1, false, 0);
	if (fd >= 0)
		close(fd);
	close(prog);
	return fd == -EBADF;
}

bool uprobe_multi_supported(void)
{
	static int known = -1;   /* the kernel does not change under us */

	if (getenv("MEMPROFD_NO_UPROBE_MULTI"))
		return false;
	if (known < 0)
		known = probe_kernel();
	return known;
}

int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *offs,
		      const uint64_t *cookies, size_t n, bool ret)
{
	return uprobe_multi_link_pid(prog_fd, path, offs, NULL, cookies, n, ret, 0);
}

int uprobe_multi_link_pid(int prog_fd, const char *path, const uint64_t *offs,
			  const uint64_t *ref_ctr_offs, const uint64_t *cookies, size_t n,
			  bool ret, int pid)
{
	union { struct uprobe_multi_attr a; char pad[128]; } attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.a.prog_fd = prog_fd;
	attr.a.attach_type = UPROBE_MULTI_ATTACH_TYPE;
	attr.a.path = (uintptr_t)path;
	attr.a.offsets = (uintptr_t)offs;
	attr.a.ref_ctr_offsets = (uintptr_t)ref_ctr_offs;
	attr.a.cookies = (uintptr_t)cookies;
	attr.a.cnt = n;
	attr.a.um_flags = ret ? UPROBE_MULTI_RETURN : 0;
	attr.a.pid = pid > 0 ? (uint32_t)pid : 0;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(struct uprobe_multi_attr));
	return fd < 0 ? -errno : fd;
}
