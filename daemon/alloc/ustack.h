/* EV_USTACK records (bpf/alloc.h): a stack copied by BPF for a process whose objects lack
 * frame pointers, unwound from DWARF CFI into an interned context; and the per-object
 * frame-pointer decision that lets BPF walk a process's stacks itself (unwind_modes). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/record/recorder.h"

/* Unwinds the record, interns its context (truncated when the walk stopped early or met
 * an address outside the process's executable mappings) under the record's key, and
 * decides once per process image whether BPF may walk its frame pointers instead. A
 * copy sent with a frame-pointer stack replaces it, and tells BPF whether the key's walk
 * may stand for its later allocations (sent_stacks). */
void ustack_handle(struct recorder *r, const struct ev_ustack *e, size_t len);
/* Once per process image (its first stack): BPF walks its frame pointers from now on if
 * every object it maps keeps them, else copies its stacks (unwind_modes). */
void ustack_decide(struct recorder *r, struct proc *p);
/* At exec, before the libraries are mapped: an executable without frame pointers is
 * decided at once (copied stacks); one with them is walked by frame pointers until its
 * first stack decides again with every object. */
void ustack_decide_exec(struct recorder *r, struct proc *p);
/* A frame-pointer-walked stack of p named binary b: if b lacks frame pointers (dlopen'd
 * after the decision), the process goes to copied stacks. */
void ustack_check_fp_frame(struct recorder *r, struct proc *p, struct binary *b);
/* Whether b is one of the runtime objects exempt from the frame-pointer check. */
bool ustack_fp_exempt(const struct binary *b);
/* Whether b is the dynamic loader, whose _dl_init runs constructors before main: a stack
 * ending there is whole though all its frames are the runtime's. */
bool ustack_is_loader(const struct binary *b);
/* A frame-pointer-walked stack of p never left the exempt objects (libstdc++'s string
 * code, libc's stdio, both using %rbp as a plain register) and ended in outer: the walk
 * was cut before the program's own frames. Cut in libstdc++ (or libgcc_s, libm), p goes
 * to copied stacks (DWARF) from now on. */
void ustack_fp_cut(struct recorder *r, struct proc *p, const struct binary *outer);
/* The binary mapped at e in process p (cached by device, inode and path), or NULL. */
struct binary *ustack_map_binary(struct recorder *r, struct proc *p, const struct map_entry *e);
/* The context of an allocation's key is no longer needed (the allocation died): a
 * per-allocation key (ALLOC_USTACK_KEY) is forgotten. */
void ustack_key_done(struct proc *p, uint64_t key);
struct bpf_map;
/* Sizes BPF's stack-copy scratch map (one record per possible CPU) before load. */
int ustack_size_scratch(struct bpf_map *scratch);
