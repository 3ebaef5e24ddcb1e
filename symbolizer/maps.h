/* /proc/PID/maps: parsing into a sorted, bounded array of mappings. The parser treats
 * its input as hostile: malformed lines are an error (-EINVAL) with the line number,
 * never a crash or a silently truncated result. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAPS_MAX_ENTRIES 65536   /* more mappings than this is an error (-E2BIG) */
#define MAPS_PATH_MAX 4096

struct map_entry {
	uint64_t start, end, offset;
	unsigned prot;           /* PROT_READ|PROT_WRITE|PROT_EXEC */
	unsigned dev_major, dev_minor;
	uint64_t inode;
	char *path;              /* "" for anonymous; "[heap]", "[stack]"; " (deleted)" stripped */
	int deleted;             /* path had the " (deleted)" suffix */
};

struct maps {
	struct map_entry *v;     /* sorted by start */
	size_t n;
};

/* Parses a maps text buffer (need not be NUL-terminated). On -EINVAL, *bad_line (if
 * non-NULL) is the 1-based line that failed. */
int maps_parse(struct maps *out, const char *buf, size_t len, unsigned *bad_line);
/* Reads and parses /proc/PID/maps; -ESRCH if the process is gone. */
int maps_read_pid(struct maps *out, pid_t pid);
void maps_free(struct maps *m);
/* Mapping containing addr, or NULL. Binary search. */
const struct map_entry *maps_find(const struct maps *m, uint64_t addr);
/* File offset that addr (inside e) maps from: what elfsym_lookup_offset takes. */
static inline uint64_t map_entry_file_offset(const struct map_entry *e, uint64_t addr)
{
	return addr - e->start + e->offset;
}
