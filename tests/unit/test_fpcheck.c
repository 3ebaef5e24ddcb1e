/* fpcheck: objects built with frame pointers are told from Debian's, built without. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"
#include "symbolizer/fpcheck.h"

#define FP_FIXTURE "fixtures/elfsym_fixture_nopie"   /* -O1 -fno-omit-frame-pointer */
#define NO_FP_BINARY "/usr/bin/python3.11"            /* Debian's: no frame pointers */

static void test_fp_build(void **state)
{
	(void)state;
	assert_int_equal(fpcheck_path(FP_FIXTURE), 1);
}

static void test_debian_python(void **state)
{
	(void)state;
	if (access(NO_FP_BINARY, R_OK)) {
		skip();   /* deploy/bootstrap.sh installs python3 */
		return;
	}
	assert_int_equal(fpcheck_path(NO_FP_BINARY), 0);
}

static void test_not_elf(void **state)
{
	char path[] = "/tmp/fpcheck-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "#!/bin/sh\nexit 0\n", 17), 17);
	close(fd);
	assert_int_equal(fpcheck_path(path), -ENOEXEC);
	unlink(path);
	assert_int_equal(fpcheck_path(path), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fp_build),
		cmocka_unit_test(test_debian_python),
		cmocka_unit_test(test_not_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
