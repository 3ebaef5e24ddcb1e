/* `memprofd merge -o OUT.db IN.db...`: several hosts' databases into one. Contexts,
 * stacks, frames and binaries are deduplicated by their natural keys (build-id or path,
 * (binary, offset), stack hash, (stack, binary)); processes and runs stay distinct per
 * input, so per-context counts add and min/max combine when the result is queried.
 * The output is written under a temporary name, checked, fsynced and renamed. */
#pragma once
#include <stddef.h>

int cmd_merge(int argc, char **argv);

/* Merges inputs[0..n) into out (replaced atomically if it exists; it may also be one of
 * the inputs). 0, or -errno with a one-line reason in err. Every input is validated
 * (readable, a memprofd database of this schema version or an older one) before
 * anything is written; a newer schema is refused. Inputs are only read (attached
 * read-only, never migrated), so they may be read-only files. */
int merge_dbs(const char *out, const char *const *inputs, size_t n, char *err, size_t errsz);
