/* sd_notify wrappers. The environment is left in place (unset_environment = 0) so that
 * the daemon's later notifications, after a reload, still reach systemd. */
#include <stdarg.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include "daemon/service/notify.h"

int notify_ready(const char *status)
{
	if (status)
		return sd_notifyf(0, "READY=1\nSTATUS=%s", status);
	return sd_notify(0, "READY=1");
}

int notify_status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sd_notifyf(0, "STATUS=%s", buf);
}

int notify_watchdog(void)
{
	return sd_notify(0, "WATCHDOG=1");
}

int notify_reloading(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
			  (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000);
}

int notify_stopping(void)
{
	return sd_notify(0, "STOPPING=1");
}

uint64_t notify_watchdog_usec(void)
{
	uint64_t usec = 0;

	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}
