/* SPDX-License-Identifier: GPL-2.0-only */
/* systemd service notifications: READY=1 once sampling and HTTP are live, a periodic STATUS= line,
 * WATCHDOG=1 from a timer of the event loop (so a stuck loop misses its pings and gets restarted)
 * while the health check passes, STOPPING=1 on shutdown. Without NOTIFY_SOCKET all of it is a
 * no-op. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct Notifier Notifier;

/* What the STATUS= line summarises; filled by the daemon on each refresh. */
typedef struct NotifyStats {
        uint64_t processes;     /* processes with known mappings */
        uint64_t tables;        /* unwind tables in the pool */
        double samples_per_sec; /* over the last interval */
} NotifyStats;
typedef void (*notify_stats_cb_t)(void *userdata, NotifyStats *ret);
/* true when healthy; false with a one-line reason in why. */
typedef bool (*notify_health_cb_t)(void *userdata, char *why, size_t size);

/* Pings the watchdog from e when the service manager asked for one (WATCHDOG_USEC). */
int notifier_new(sd_event *e, notify_stats_cb_t cb, void *userdata, Notifier **ret);
/* Each watchdog ping is sent only if cb says healthy; withheld pings are logged and counted. */
void notifier_set_health_check(Notifier *n, notify_health_cb_t cb, void *userdata);
Notifier *notifier_free(Notifier *n);
DEFINE_TRIVIAL_CLEANUP_FUNC(Notifier *, notifier_free);

/* READY=1 plus the first STATUS=; starts the periodic STATUS= refresh. */
int notifier_ready(Notifier *n);
/* STOPPING=1; call as soon as shutdown begins. */
int notifier_stopping(Notifier *n);
/* STATUS=<one line> at any time, e.g. why startup failed (also sent with ERRNO= when error > 0). */
int notifier_status(Notifier *n, int error, const char *fmt, ...) _printf_(3, 4);
void notifier_write_metrics(const Notifier *n, FILE *f);
/* Formats the summary line STATUS= carries (exposed for tests). */
void notify_format_status(const NotifyStats *s, char *buf, size_t size);
