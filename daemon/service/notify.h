/* systemd service notifications through libsystemd's sd_notify(3): READY, STATUS,
 * WATCHDOG, STOPPING, RELOADING. Every call is a no-op returning 0 when NOTIFY_SOCKET
 * is unset (run by hand), so callers never need to know whether systemd is there. */
#pragma once
#include <stdint.h>

/* Each returns 1 if a message was sent, 0 if there is no NOTIFY_SOCKET, or -errno. */
int notify_ready(const char *status);
int notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int notify_watchdog(void);
/* RELOADING=1 with MONOTONIC_USEC (what Type=notify-reload wants); the daemon sends
 * notify_ready() again once the new config is in force. */
int notify_reloading(void);
int notify_stopping(void);
/* The watchdog period systemd asked for (WATCHDOG_USEC for this pid), 0 if none; the
 * daemon pings at half of it. */
uint64_t notify_watchdog_usec(void);
