/* EV_MMAP (alloc.h): every file a target maps executable, with its path rebuilt from its
 * dentries and mounts, so that a copied stack of a process gone before the reader read
 * /proc still unwinds (daemon/alloc/procmaps.c). Cost: one record of ~1.1 KiB per
 * executable mapping (a dozen per process, at exec and dlopen). Included by
 * alloc_common.bpf.h after the maps, count() and is_target(). */
#pragma once

#define VM_EXEC_FLAG 0x4   /* include/linux/mm.h VM_EXEC */

struct path_walk {
	struct dentry *d;
	struct mount *mnt;
	struct ev_mmap *e;
	u32 n;
	bool done;
};

static long path_step(u64 i, void *ctx)
{
	struct path_walk *w = ctx;
	struct dentry *d = w->d, *parent;
	struct mount *mnt = w->mnt, *mp;

	if (d == BPF_CORE_READ(mnt, mnt.mnt_root)) {
		mp = BPF_CORE_READ(mnt, mnt_parent);
		if (mp == mnt) {   /* the global root */
			w->done = true;
			return 1;
		}
		w->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = mp;
		return 0;
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (parent == d) {   /* a root that is no mount's: outside our view */
		return 1;
	}
	if (w->n >= ALLOC_MMAP_DEPTH)
		return 1;
	u32 k = w->n;
	asm volatile("" : "+r"(k));
	if (k >= ALLOC_MMAP_DEPTH)
		return 1;
	bpf_probe_read_kernel_str(w->e->names[k], ALLOC_MMAP_NAME, BPF_CORE_READ(d, d_name.name));
	w->n = k + 1;
	w->d = parent;
	return 0;
}

struct vma_file {
	u64 file, start, end, pgoff, flags;
};

static long vma_file(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_file *v = data;

	v->file = (u64)vma->vm_file;
	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->pgoff = vma->vm_pgoff;
	v->flags = vma->vm_flags;
	return 0;
}

/* The file mapping of task that holds addr, if executable, as an EV_MMAP record. */
static __always_inline void send_mapping(struct task_struct *task, u32 tgid, u64 start_ns,
					 u64 addr, u32 exe)
{
	struct vma_file v = {};
	struct ev_mmap *e;

	if (bpf_find_vma(task, addr, vma_file, &v, 0) || !v.file || !(v.flags & VM_EXEC_FLAG))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROP_RINGBUF);
		return;
	}
	struct file *file = (struct file *)v.file;
	e->h.type = EV_MMAP;
	e->h.tgid = tgid;
	e->h.start_ns = start_ns;
	e->mm = (u64)BPF_CORE_READ(task, mm);
	e->start = v.start;
	e->end = v.end;
	e->pgoff = v.pgoff << 12;
	e->ino = BPF_CORE_READ(file, f_inode, i_ino);
	e->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	struct vfsmount *vm = BPF_CORE_READ(file, f_path.mnt);
	struct path_walk w = { .d = BPF_CORE_READ(file, f_path.dentry),
			       .mnt = (struct mount *)((void *)vm - bpf_core_field_offset(struct mount, mnt)),
			       .e = e };
	bpf_loop(2 * ALLOC_MMAP_DEPTH, path_step, &w, 0);
	e->nnames = w.done ? w.n : 0;
	e->exe = exe;
	e->pad = 0;
	bpf_ringbuf_submit(e, rb_flags());
}

#define NR_MMAP 9   /* x86-64 */

/* An mmap(2) of a target returned: the loader maps each library's text with its own
 * call. Attached by `memprofd record` only: a program on every syscall's exit puts all
 * of the host's syscalls on their slow path while attached. */
SEC("raw_tp/sys_exit")
int BPF_PROG(on_mmap, struct pt_regs *regs, long ret)
{
	u32 tgid;

	if (BPF_CORE_READ(regs, orig_ax) != NR_MMAP || (ret < 0 && ret > -4096))
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!is_target(tgid))
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	send_mapping(task, tgid, BPF_CORE_READ(task, group_leader, start_time), ret, 0);
	return 0;
}

/* At exec (after its EV_EXEC): the executable's text and the loader's (the new image's
 * entry point, where it starts), mapped by the kernel itself. The exec runs in the
 * exec'ing task, so current is it, as the trusted pointer bpf_find_vma and
 * bpf_task_pt_regs need (a raw_tp's arguments are plain values). */
static __always_inline void exec_mappings(u32 tgid, u64 start_ns)
{
	struct task_struct *p = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);

	send_mapping(p, tgid, start_ns, BPF_CORE_READ(p, mm, start_code), 1);
	if (regs)
		send_mapping(p, tgid, start_ns, BPF_CORE_READ(regs, ip), 0);
}
