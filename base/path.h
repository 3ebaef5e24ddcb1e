/* Path helpers that allocate nothing. */
#pragma once
#include <string.h>

/* The last component of path ("/usr/bin/git" -> "git"), path itself when it has no
 * slash, NULL for NULL; a pointer into path. */
static inline const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}
