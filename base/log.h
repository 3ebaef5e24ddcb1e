/* One error convention: functions return 0 or -errno; these helpers print the one-line
 * `memprofd: <what>: <why>` message and return the error so a failure is one statement. */
#pragma once
#include <stdarg.h>
#include <stdio.h>

#define log_error(fmt, ...) fprintf(stderr, "memprofd: " fmt "\n", ##__VA_ARGS__)
/* r is evaluated before printing, so log_error_errno(-errno, ...) returns the caller's errno. */
#define log_error_errno(r, fmt, ...) \
	({ __typeof__(r) _r = (r); fprintf(stderr, "memprofd: " fmt "\n", ##__VA_ARGS__); _r; })
#define log_warn(fmt, ...) fprintf(stderr, "memprofd: warning: " fmt "\n", ##__VA_ARGS__)

/* Exit status of a command-line mistake (unknown option, bad value). */
#define EXIT_USAGE 2

/* A command-line mistake: `memprofd: <what>: <fmt...>`; returns EXIT_USAGE, the status
 * the subcommand exits with. */
__attribute__((format(printf, 2, 3)))
static inline int usage_error(const char *what, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "memprofd: %s: ", what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_USAGE;
}
