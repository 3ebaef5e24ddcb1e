/* Starting the command to profile so that no allocation is missed: the child is forked
 * and waits on a pipe until the recorder has attached and marked it as a target, then
 * execs. An exec failure comes back through a close-on-exec pipe as its errno. */
#pragma once
#include <signal.h>
#include <sys/types.h>

struct child {
	pid_t pid;
	int go_fd;      /* parent writes one byte to release the child */
	int err_fd;     /* child writes errno if exec fails; EOF means exec succeeded */
};

/* Resolves name through PATH like execvp (a name with a slash is taken as a path and
 * made absolute); 0 and the path in out, or -ENOENT/-EACCES. */
int child_find_command(const char *name, char *out, size_t outsz);
int child_spawn(struct child *c, const char *path, char *const argv[], const sigset_t *child_mask);
/* Releases the child; returns 0 once it has exec'd, or -errno of the failed exec. */
int child_release(struct child *c);
