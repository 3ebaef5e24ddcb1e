/* sd_notify wrappers. The environment is left in place (unset_environment = 0) so that
 * the daemon's later notifications, after a reload, still reach systemd. libsystemd is
 * opened at the first notification (base/dynlib.h): only the daemon command needs it. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include "daemon/service/notify.h"
#include "base/dynlib.h"

#define NOTIFY_LIBSYSTEMD "libsystemd.so.0"

static struct {
	int (*notify)(int, const char *);
	int (*notifyf)(int, const char *, ...);
	int (*watchdog_enabled)(int, uint64_t *);
} sd;
static const char *const sd_names[] = { "sd_notify", "sd_notifyf", "sd_watchdog_enabled" };
static struct dynlib sd_lib = DYNLIB_INIT(NOTIFY_LIBSYSTEMD, sd_names, sd, 1);

/* Whether libsystemd is there to talk to: without NOTIFY_SOCKET or WATCHDOG_USEC (not
 * started by systemd) every call below would do nothing, so nothing is loaded. */
static bool sd_ready(void)
{
	if (!getenv("NOTIFY_SOCKET") && !getenv("WATCHDOG_USEC"))
		return false;
	return dynlib_load(&sd_lib) == 0;
}

int notify_ready(const char *status)
{
	if (!sd_ready())
		return 0;
	if (status)
		return sd.notifyf(0, "READY=1\nSTATUS=%s", status);
	return sd.notify(0, "READY=1");
}

int notify_status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!sd_ready())
		return 0;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sd.notifyf(0, "STATUS=%s", buf);
}

int notify_watchdog(void)
{
	return sd_ready() ? sd.notify(0, "WATCHDOG=1") : 0;
}

int notify_reloading(void)
{
	struct timespec t;

	if (!sd_ready())
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return sd.notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
			  (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000);
}

int notify_stopping(void)
{
	return sd_ready() ? sd.notify(0, "STOPPING=1") : 0;
}

uint64_t notify_watchdog_usec(void)
{
	uint64_t usec = 0;

	return sd_ready() && sd.watchdog_enabled(0, &usec) > 0 ? usec : 0;
}
