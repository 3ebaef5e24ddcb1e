/* One error convention: functions return 0 or -errno; these helpers print the one-line
 * `memprofd: <what>: <why>` message and return the error so a failure is one statement. */
#pragma once
#include <stdio.h>

#define log_error(fmt, ...) fprintf(stderr, "memprofd: " fmt "\n", ##__VA_ARGS__)
#define log_error_errno(r, fmt, ...) \
	({ fprintf(stderr, "memprofd: " fmt "\n", ##__VA_ARGS__); (r); })
#define log_warn(fmt, ...) fprintf(stderr, "memprofd: warning: " fmt "\n", ##__VA_ARGS__)
