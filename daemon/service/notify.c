/* SPDX-License-Identifier: GPL-2.0-only */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "service/notify.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* systemctl status shows the latest STATUS=; a few seconds stale is fine, and each refresh is one
 * datagram. */
#define STATUS_REFRESH_USEC (5 * USEC_PER_SEC)

/* The watchdog is pinged from a timer of the event loop rather than by sd-event itself
 * (sd_event_set_watchdog()), so that a ping can be withheld: a loop that runs is not enough, the
 * health check must pass too (HTTP answering, see http-probe.h). A loop that stops still stops the
 * pings. Pings every quarter of WATCHDOG_USEC, as sd-event does. */
#define WATCHDOG_PINGS_PER_INTERVAL 4

struct Notifier {
        sd_event *event;
        sd_event_source *status_timer;
        notify_stats_cb_t stats_cb;
        void *userdata;
        bool enabled; /* NOTIFY_SOCKET set */
        bool ready, stopping;

        sd_event_source *watchdog_timer;
        uint64_t watchdog_usec; /* 0: no watchdog */
        notify_health_cb_t health_cb;
        void *health_userdata;
        bool withholding;
        uint64_t pings_total, pings_withheld_total;
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

static int on_watchdog_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
        Notifier *n = userdata;
        char why[256] = "";
        uint64_t now = usec;
        int r;

        if (n->health_cb && !n->health_cb(n->health_userdata, why, sizeof(why))) {
                n->pings_withheld_total++;
                if (!n->withholding)
                        log_error("Withholding the watchdog ping: %s; the service manager restarts profd "
                                  "unless that changes within %.0f s",
                                  why, (double)n->watchdog_usec / USEC_PER_SEC);
                n->withholding = true;
        } else {
                if (n->withholding)
                        log_notice("Watchdog pings resumed");
                n->withholding = false;
                r = sd_notify(false, "WATCHDOG=1");
                if (r < 0)
                        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_DEBUG,
                                                   r, "Failed to send WATCHDOG=1: %m");
                else
                        n->pings_total++;
        }

        (void)sd_event_now(n->event, CLOCK_MONOTONIC, &now);
        r = sd_event_source_set_time(source, now + n->watchdog_usec / WATCHDOG_PINGS_PER_INTERVAL);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        if (r < 0)
                log_error_errno(
                        r, "Cannot re-arm the watchdog timer, the service manager will restart profd: %m");
        return 0;
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

        /* WATCHDOG_USEC, for this process (WATCHDOG_PID); nothing to do when it is not set. */
        r = sd_watchdog_enabled(false, &n->watchdog_usec);
        if (r < 0)
                log_warning_errno(r, "Ignoring invalid WATCHDOG_USEC/WATCHDOG_PID: %m");
        if (r <= 0)
                n->watchdog_usec = 0;
        if (n->watchdog_usec > 0) {
                uint64_t period = n->watchdog_usec / WATCHDOG_PINGS_PER_INTERVAL;
                r = sd_event_add_time_relative(e, &n->watchdog_timer, CLOCK_MONOTONIC, period, period / 4,
                                               on_watchdog_timer, n);
                if (r < 0) {
                        notifier_free(n);
                        return r;
                }
                /* Before everything else that is ready: a busy loop is not a dead one. */
                (void)sd_event_source_set_priority(n->watchdog_timer, SD_EVENT_PRIORITY_IMPORTANT);
                (void)sd_event_source_set_description(n->watchdog_timer, "watchdog");
                log_debug("Service watchdog enabled, every %.3f s", (double)period / USEC_PER_SEC);
        }

        *ret = n;
        return 0;
}

Notifier *notifier_free(Notifier *n)
{
        if (!n)
                return NULL;
        sd_event_source_disable_unref(n->status_timer);
        sd_event_source_disable_unref(n->watchdog_timer);
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

void notifier_set_health_check(Notifier *n, notify_health_cb_t cb, void *userdata)
{
        n->health_cb = cb;
        n->health_userdata = userdata;
}

void notifier_write_metrics(const Notifier *n, FILE *f)
{
        metric_counter(f, "profd_watchdog_pings_total", "WATCHDOG=1 pings sent to the service manager.",
                       n->pings_total);
        metric_counter(f, "profd_watchdog_pings_withheld_total",
                       "Watchdog pings not sent because a health check failed (HTTP not answering).",
                       n->pings_withheld_total);
}
