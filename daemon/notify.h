/* SPDX-License-Identifier: GPL-2.0-only */
/* systemd service notifications: READY=1 once sampling and HTTP are live, a periodic STATUS= line,
 * WATCHDOG=1 from the event loop itself (sd-event's watchdog support, so a stuck loop misses its
 * pings and gets restarted), STOPPING=1 on shutdown. Without NOTIFY_SOCKET all of it is a no-op. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "macro.h"

typedef struct Notifier Notifier;

/* What the STATUS= line summarises; filled by the daemon on each refresh. */
typedef struct NotifyStats {
        uint64_t processes;     /* processes with known mappings */
        uint64_t tables;        /* unwind tables in the pool */
        double samples_per_sec; /* over the last interval */
} NotifyStats;
typedef void (*notify_stats_cb_t)(void *userdata, NotifyStats *ret);

/* Enables the watchdog on e when the service manager asked for one (WATCHDOG_USEC). */
int notifier_new(sd_event *e, notify_stats_cb_t cb, void *userdata, Notifier **ret);
Notifier *notifier_free(Notifier *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(Notifier *, notifier_free);

/* READY=1 plus the first STATUS=; starts the periodic STATUS= refresh. */
int notifier_ready(Notifier *n);
/* STOPPING=1; call as soon as shutdown begins. */
int notifier_stopping(Notifier *n);
/* STATUS=<one line> at any time, e.g. why startup failed (also sent with ERRNO= when error > 0). */
int notifier_status(Notifier *n, int error, const char *fmt, ...) _printf_(3, 4);
/* Formats the summary line STATUS= carries (exposed for tests). */
void notify_format_status(const NotifyStats *s, char *buf, size_t size);
