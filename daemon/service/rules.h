/* Target matching: which processes the daemon profiles. Pure functions over a process's
 * identity (exe path, comm, cgroup path, build-id) and the config's [target NAME] and
 * [deny] rules; the deny list always wins. rules_read_identity() is the one function
 * here that reads /proc. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "daemon/service/config.h"

#define RULES_PATH_MAX 4096
#define RULES_COMM_MAX 16        /* TASK_COMM_LEN */

/* What a rule can look at. Any field may be "" when unknown: an unknown field never
 * matches a pattern (a target that needs it does not match; a deny on it does not fire). */
struct proc_identity {
	char exe[RULES_PATH_MAX];       /* as the process sees it (inside its mount namespace) */
	char comm[RULES_COMM_MAX];
	char cgroup[RULES_PATH_MAX];    /* cgroup v2 path ("0::" line), else the systemd v1 one */
	char build_id[129];             /* lowercase hex of exe, filled by the caller */
};

enum rule_verdict {
	RULE_NONE = 0,      /* no target rule matches */
	RULE_TARGET,        /* a target rule matches and nothing denies */
	RULE_DENIED,        /* a deny rule matches (whatever the targets say) */
};

struct rule_match {
	enum rule_verdict verdict;
	const char *rule;    /* target rule name, or "deny"; NULL for RULE_NONE */
	const char *key;     /* for RULE_DENIED: which key matched (exe, comm, cgroup, build_id) */
};

/* Decides for one process. */
struct rule_match rules_match(const struct config *c, const struct proc_identity *id);

/* The cgroup path of a /proc/PID/cgroup text: the v2 "0::PATH" line, else the v1
 * "N:name=systemd:PATH" line, else the first line's path. 0, or -ENOENT if none. */
int rules_parse_cgroup(const char *text, char *out, size_t outsz);

/* Fills exe (readlink /proc/PID/exe), comm and cgroup of a live process. build_id is
 * left for the caller (it has the ELF reader). 0 or -errno (-ESRCH once it is gone). */
int rules_read_identity(pid_t pid, struct proc_identity *id);
