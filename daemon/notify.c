/* SPDX-License-Identifier: GPL-2.0-only */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "notify.h"

/* systemctl status shows the latest STATUS=; a few seconds stale is fine, and each refresh is one
 * datagram. */
#define STATUS_REFRESH_USEC (5 * USEC_PER_SEC)

struct Notifier {
        sd_event *event;
        sd_event_source *status_timer;
        notify_stats_cb_t stats_cb;
        void *userdata;
        bool enabled; /* NOTIFY_SOCKET set */
        bool ready, stopping;
};

void notify_format_status(const NotifyStats *s, char *buf, size_t size)
{
        snprintf(buf, size, "Sampling: %" PRIu64 " processes, %" PRIu64 " unwind tables, %.1f samples/s",
                 s->processes, s->tables, s->samples_per_sec);
}

static int send_status(Notifier *n)
{
        NotifyStats s = {};
        char line[256];

        if (n->stats_cb)
                n->stats_cb(n->userdata, &s);
        notify_format_status(&s, line, sizeof(line));
        return sd_notifyf(false, "STATUS=%s", line);
}

static int on_status_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
        Notifier *n = userdata;
        int r;

        if (n->stopping)
                return 0;
        r = send_status(n);
        if (r < 0)
                log_debug_errno(r, "Failed to send STATUS= to the service manager: %m");
        r = sd_event_source_set_time(source, usec + STATUS_REFRESH_USEC);
        if (r < 0)
                return log_warning_errno(r, "Failed to re-arm the STATUS= timer: %m");
        return sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
}

int notifier_new(sd_event *e, notify_stats_cb_t cb, void *userdata, Notifier **ret)
{
        const char *sock = getenv("NOTIFY_SOCKET");
        Notifier *n;
        int r;

        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->event = sd_event_ref(e);
        n->stats_cb = cb;
        n->userdata = userdata;
        n->enabled = sock && *sock;

        /* sd-event reads WATCHDOG_USEC/WATCHDOG_PID and pings at a quarter to half the interval from
         * inside the loop; a no-op when no watchdog was requested. */
        r = sd_event_set_watchdog(e, true);
        if (r < 0) {
                notifier_free(n);
                return r;
        }
        if (r > 0)
                log_debug("Service watchdog enabled");

        *ret = n;
        return 0;
}

Notifier *notifier_free(Notifier *n)
{
        if (!n)
                return NULL;
        sd_event_source_disable_unref(n->status_timer);
        sd_event_unref(n->event);
        free(n);
        return NULL;
}

int notifier_ready(Notifier *n)
{
        NotifyStats s = {};
        char line[256];
        int r;

        if (!n || n->ready)
                return 0;
        n->ready = true;
        if (!n->enabled)
                return 0;

        if (n->stats_cb)
                n->stats_cb(n->userdata, &s);
        notify_format_status(&s, line, sizeof(line));
        r = sd_notifyf(false, "READY=1\nSTATUS=%s", line);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(n->event, &n->status_timer, CLOCK_MONOTONIC, STATUS_REFRESH_USEC, 0,
                                       on_status_timer, n);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(n->status_timer, "notify-status");
        return 0;
}

int notifier_stopping(Notifier *n)
{
        if (!n || n->stopping)
                return 0;
        n->stopping = true;
        if (n->status_timer)
                (void)sd_event_source_set_enabled(n->status_timer, SD_EVENT_OFF);
        if (!n->enabled)
                return 0;
        return sd_notify(false, "STOPPING=1\nSTATUS=Detaching from the kernel and exiting");
}

int notifier_status(Notifier *n, int error, const char *fmt, ...)
{
        char line[512];
        va_list ap;

        if (n && !n->enabled)
                return 0;
        if (!n && !getenv("NOTIFY_SOCKET"))
                return 0;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (error < 0)
                error = -error;
        if (error > 0)
                return sd_notifyf(false, "STATUS=%s\nERRNO=%d", line, error);
        return sd_notifyf(false, "STATUS=%s", line);
}
