/* Multi-uprobe links through the raw bpf(2) syscall (see uprobe_multi.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <bpf/btf.h>
#include "daemon/alloc/uprobe_multi.h"

#define UPROBE_MULTI_RETURN 1u

/* bpf_attr's link_create for uprobe_multi. */
struct uprobe_multi_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, um_flags, pid, pad;
};

bool uprobe_multi_supported(void)
{
	struct btf *btf;
	bool ok;

	if (getenv("MEMPROFD_NO_UPROBE_MULTI"))
		return false;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return false;
	ok = btf__find_by_name_kind(btf, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) > 0;
	btf__free(btf);
	return ok;
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
