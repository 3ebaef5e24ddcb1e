/* Record's probes released after record itself has exited (release_later.c). Detaching a
 * uprobe waits for an RCU grace period (~0.1-0.2 s each on a loaded VM, and the kernel
 * serializes classic uprobes' under event_mutex), and a process's exit waits for its last
 * references to be dropped. A forked helper keeps a reference to every BPF and perf
 * object (links, programs, maps, perf events) and nothing else, so record's own closes
 * and exit are quick and the helper's exit pays for the detach; stdin/stdout/stderr and
 * every other file are closed in the helper first, so whoever waits for record's output
 * or exit waits for neither. Until the helper is done the probes stay attached, reading
 * into a ring nobody reads: each trap costs the probed processes as before for that time. */
#pragma once

#define RELEASE_LATER_FDS_MAX 4096     /* fds examined; past this the helper keeps them */

/* Forks the helper. 0, or -errno (then nothing happened: closes take their usual time). */
int release_later(void);
