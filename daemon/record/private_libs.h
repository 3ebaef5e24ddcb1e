/* Exact mode's probes trap only the recorded command (private_libs.c): the command runs
 * with private copies of the allocator libraries (same bytes and build-id, another inode,
 * found first through LD_LIBRARY_PATH), and the uprobes go on the copies, so no other
 * process on the host maps a probed file. Forks and execs of the command inherit the
 * environment and so the copies. A setuid command ignores LD_LIBRARY_PATH (then it runs
 * the system's libraries untraced); `--pid` cannot change a running process's libraries
 * and probes the system's files. */
#pragma once
#include <limits.h>
#include <stddef.h>

#define PRIVATE_LIBS_MAX 2             /* libc.so.6, libstdc++.so.6 */

struct private_libs {
	char dir[PATH_MAX];                /* "" until made */
	size_t n;
	char orig[PRIVATE_LIBS_MAX][PATH_MAX];   /* the system's file, for symbols */
	char copy[PRIVATE_LIBS_MAX][PATH_MAX];   /* the private copy, to probe */
	char *env_value;                   /* LD_LIBRARY_PATH=DIR[:old] */
};

/* Copies each library found (path by find(name)) into a new private directory. 0 or
 * -errno (then nothing is left behind). */
int private_libs_make(struct private_libs *pl, int (*find)(const char *name, char *out, size_t n));
/* environ with LD_LIBRARY_PATH led by the private directory (free with
 * private_libs_free_env). 0 or -ENOMEM. */
int private_libs_env(struct private_libs *pl, char ***envp);
void private_libs_free_env(char **envp);
/* Removes the copies and the directory (processes that still map them keep them). */
void private_libs_remove(struct private_libs *pl);
