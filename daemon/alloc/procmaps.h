/* A process's mappings as the recorder knows them: read from /proc/PID/maps while the
 * process lives, else from the last snapshot kept of its image (taken at exec, at each
 * successful read, or inherited from the parent at fork, since fork copies the address
 * space). A process that exits before its records are read keeps named frames. A
 * failed re-read keeps the maps read before. */
#pragma once
#include "daemon/alloc/procs.h"

/* Loads p->maps once (no-op when loaded): from /proc, or the kept snapshot. */
void procmaps_load(struct proc *p);
/* Reads p->maps again (an address fell outside them); the old ones stay if it fails. */
void procmaps_reload(struct proc *p);
/* Keeps the file mappings of m as p's snapshot (m itself is left alone). */
void procmaps_keep(struct proc *p, const struct maps *m);
/* A forked child's snapshot: its parent's mappings (read now if not yet). */
void procmaps_inherit(struct proc *child, struct proc *parent);
/* p exited: every record it sent was read before this one (ring order); its snapshot
 * is no longer needed. */
void procmaps_exited(struct proc *p);
/* Frees p's maps and snapshot. */
void procmaps_free(struct proc *p);
/* p (address space mm) mapped e executable, as BPF told (EV_MMAP): kept apart from the
 * snapshot, and joined to it when /proc cannot be read (the process is gone), newer
 * mappings over older ones. Ring order puts it before any stack that runs its code. */
int procmaps_mapped(struct proc *p, uint64_t mm, const struct map_entry *e);
struct ev_mmap;
/* An EV_MMAP record of p: its file, once its path is found to name the very file mapped
 * (device and inode), joins what procmaps_mapped keeps (with the file's first bytes
 * below its text, from which libdwfl takes the module's bias); the executable's text,
 * sent at exec, also names the image p's records come from (same_image). */
void procmaps_on_mmap(struct proc *p, const struct ev_mmap *e);
/* p exec'd into address space mm: its maps and snapshot are dropped, and the mappings
 * BPF told of other address spaces (the old image's). */
void procmaps_exec(struct proc *p, uint64_t mm);
