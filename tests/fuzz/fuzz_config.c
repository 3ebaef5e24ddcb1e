/* libFuzzer target: the daemon's INI config parser (libinih + the key table and the
 * [target NAME] / [deny] rule sections) over arbitrary bytes, read from a memfd as the
 * daemon reads its file. Every input must either load or give error lines, never crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "daemon/service/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], *errors = NULL;
	struct config c;
	int fd = memfd_create("fuzz_config", 0);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	config_load(&c, path, &errors);
	config_free(&c);   /* safe after a failed load too (config.h) */
	free(errors);
	close(fd);
	return 0;
}
