/* daemon/service/notify.c: binds an AF_UNIX datagram socket, points NOTIFY_SOCKET at it and
 * reads back exactly what each wrapper sent; without NOTIFY_SOCKET nothing is sent. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "tests/unit/mpd_cmocka.h"

#include "daemon/service/notify.h"

static int sock = -1;
static char sock_path[108];

static int setup(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	snprintf(sock_path, sizeof(sock_path), "/tmp/test_notify.%d.sock", (int)getpid());
	unlink(sock_path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	setenv("NOTIFY_SOCKET", sock_path, 1);
	return 0;
}

static int teardown(void **state)
{
	close(sock);
	unlink(sock_path);
	return 0;
}

static const char *recv_msg(void)
{
	static char buf[1024];
	ssize_t n = recv(sock, buf, sizeof(buf) - 1, 0);

	assert_true(n > 0);
	buf[n] = '\0';
	return buf;
}

static void test_messages(void **state)
{
	assert_int_equal(notify_ready("recording 3 processes"), 1);
	assert_string_equal(recv_msg(), "READY=1\nSTATUS=recording 3 processes");
	assert_int_equal(notify_ready(NULL), 1);
	assert_string_equal(recv_msg(), "READY=1");
	assert_int_equal(notify_status("%d targets, governor scale %.2f", 7, 0.5), 1);
	assert_string_equal(recv_msg(), "STATUS=7 targets, governor scale 0.50");
	assert_int_equal(notify_watchdog(), 1);
	assert_string_equal(recv_msg(), "WATCHDOG=1");
	assert_int_equal(notify_stopping(), 1);
	assert_string_equal(recv_msg(), "STOPPING=1");
	assert_int_equal(notify_reloading(), 1);
	const char *m = recv_msg();
	assert_true(!strncmp(m, "RELOADING=1\nMONOTONIC_USEC=", 27));
	assert_true(strtoull(m + 27, NULL, 10) > 0);
	/* The environment is kept: later notifications still arrive. */
	assert_int_equal(notify_watchdog(), 1);
	assert_string_equal(recv_msg(), "WATCHDOG=1");
}

static void test_watchdog_usec(void **state)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	setenv("WATCHDOG_USEC", "30000000", 1);
	assert_int_equal(notify_watchdog_usec(), 30000000);
	setenv("WATCHDOG_PID", "1", 1);     /* meant for another process */
	assert_int_equal(notify_watchdog_usec(), 0);
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	assert_int_equal(notify_watchdog_usec(), 0);
}

static void test_no_socket(void **state)
{
	char buf[16];

	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(notify_ready("x"), 0);
	assert_int_equal(notify_watchdog(), 0);
	assert_true(recv(sock, buf, sizeof(buf), 0) < 0);   /* nothing arrived */
	setenv("NOTIFY_SOCKET", sock_path, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages), cmocka_unit_test(test_watchdog_usec),
		cmocka_unit_test(test_no_socket),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
