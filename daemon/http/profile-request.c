/* SPDX-License-Identifier: GPL-2.0-only */
/* A profile request: the access handler cuts the sampler (t0) and suspends the connection; a
 * timer N s later cuts again (t1); once the interval ending at t1 has been drained the window
 * [t0, t1) is merged, and the renderer builds the body one bounded step per loop iteration from an
 * idle-priority source, so drains, other requests and /metrics keep flowing; then the connection is
 * resumed and the handler queues the response.
 *
 * A past window (?start=, ?end=) skips the cuts: it is moved to the nearest interval boundaries
 * the history holds and built at once (after the next drain if it ends within the last one). */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregator/window-filter.h"
#include "aggregator/window-filter.h"
#include "daemon.h"
#include "http/http-conn.h"
#include "http/http-server-internal.h"
#include "http/profile-request.h"
#include "output/symbol-warmer.h"
#include "util/log.h"
#include "util/time-util.h"
#include "util/timestamp.h"

/* How precisely the end of a window is timed. The window itself is exact either way: it is the
 * span between two cuts whatever the timer's slack. */
#define WINDOW_TIMER_ACCURACY_USEC 1000
/* A cut made while the previous one is still being drained returns that previous boundary: exact,
 * but if the loop was held meanwhile it can be far from "now", and a window would start or end
 * early by as much. Older than this, wait for that drain and cut again. (The sampler drains a cut
 * about 10 ms after it.) */
#define CUT_MAX_AGE_NS (50 * 1000 * 1000ULL)
#define CUT_MAX_RETRIES 3

/* For the asynchronous path: remember the answer, then resume so the handler queues it. */
void http_request_set_error(Request *req, unsigned status, const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        free(req->body);
        req->body = n >= 0 ? text : NULL;
        req->body_size = n >= 0 ? (size_t)n : 0;
        req->status = status;
        req->content_type = "text/plain; charset=utf-8";
        req->content_disposition = NULL;
        req->error = true;
}

/* Let MHD run on the next loop iteration (after a resume: the handler must be called again). */
static void http_kick(HttpServer *s)
{
        if (s->kick)
                (void)sd_event_source_set_enabled(s->kick, SD_EVENT_ONESHOT);
}

/* ---- profile requests -------------------------------------------------------------------------- */

void profile_release_slot(Request *req)
{
        HttpServer *s = req->server;
        if (!req->counted_in_flight)
                return;
        if (req->prev)
                req->prev->next = req->next;
        else
                s->profiles = req->next;
        if (req->next)
                req->next->prev = req->prev;
        req->prev = req->next = NULL;
        s->n_profiles--;
        req->counted_in_flight = false;
}

static void profile_stop_warming(Request *req)
{
        if (!req->warming)
                return;
        symbol_warmer_release(req->server->daemon->warmer);
        req->warming = false;
}

void profile_stop_work(Request *req)
{
        HttpServer *s = req->server;
        profile_stop_warming(req);
        req->timer = sd_event_source_disable_unref(req->timer);
        req->step = sd_event_source_disable_unref(req->step);
        if (req->wait) {
                aggregator_cancel_wait(s->daemon->aggregator, req->wait);
                req->wait = NULL;
        }
        if (req->job) {
                req->query.renderer->free(req->job);
                req->job = NULL;
        }
}

void profile_finish(Request *req)
{
        profile_stop_work(req);
        if (req->status != 200)
                req->server->profiles_failed_total++;
        req->state = REQUEST_RESPOND;
        conn_unpark(req->conn);
        if (req->suspended) {
                MHD_resume_connection(req->connection);
                req->suspended = false;
        }
        http_kick(req->server);
}

/* The client of a parked profile request went away (on_conn_hangup()): free its slot and stop its
 * work now, not when its window ends. */
void profile_request_cancel(Request *req)
{
        HttpServer *s = req->server;

        s->profiles_cancelled_total++;
        log_debug("Profile request cancelled while %s: the client went away",
                  req->state == REQUEST_RENDER ? "building" : "waiting");
        profile_stop_work(req);
        profile_release_slot(req);
        req->state = REQUEST_CANCELLED;
        conn_unpark(req->conn);
        /* MHD reads the end of the stream, closes the connection and frees req (on_completed). */
        if (req->suspended) {
                MHD_resume_connection(req->connection);
                req->suspended = false;
        }
        http_kick(s);
}

/* Before refusing a profile request for want of a slot: a parked request whose client has left
 * but whose hangup has not been dispatched yet (it came in the same loop iteration as this
 * request) is no longer busy. */
void profile_reap_gone(HttpServer *s)
{
        Request *next;
        for (Request *req = s->profiles; req; req = next) {
                next = req->next;
                if (!req->conn || req->conn->parked != req)
                        continue;
                struct pollfd pfd = {.fd = req->conn->fd, .events = POLLRDHUP};
                if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        profile_request_cancel(req);
        }
}

static int on_profile_step(sd_event_source *es, void *userdata)
{
        Request *req = userdata;
        HttpServer *s = req->server;
        const ProfileRenderer *rd = req->query.renderer;

        uint64_t a = now_ns(CLOCK_MONOTONIC);
        s->render_steps_total++;
        int r = rd->step(req->job);
        double step = (double)(now_ns(CLOCK_MONOTONIC) - a) / 1e9;
        if (step > s->render_step_seconds_max)
                s->render_step_seconds_max = step;
        if (step >= 0.1)
                log_debug("A %s build step held the event loop for %.3f s", rd->format, step);
        if (r == 0)
                return 0;
        if (r > 0) {
                void *data = NULL;
                size_t size = 0;
                r = rd->take_result(req->job, &data, &size);
                if (r >= 0) {
                        double secs = (double)(now_ns(CLOCK_MONOTONIC) - req->render_start_ns) / 1e9;
                        s->render_seconds_sum += secs;
                        if (secs > s->render_seconds_max)
                                s->render_seconds_max = secs;
                        s->profiles_served_total++;
                        log_debug("profile [%.3f, %.3f) rendered in %.3f s, %zu bytes", req->t0 / 1e9,
                                  req->t1 / 1e9, secs, size);
                        req->status = 200;
                        req->body = data;
                        req->body_size = size;
                        req->content_type = rd->content_type;
                        req->content_disposition = rd->content_disposition;
                        req->error = false;
                }
        }
        if (r < 0) {
                log_warning_errno_ratelimited(r, "Building a %s profile failed: %m", rd->format);
                http_request_set_error(req, 500, "building the profile failed: %s\n", strerror(-r));
        }
        profile_finish(req);
        return 0;
}

static void on_window_drained(void *userdata)
{
        Request *req = userdata;
        HttpServer *s = req->server;
        Daemon *d = s->daemon;
        ProfileWindow *w = NULL;

        req->wait = NULL;
        int r = aggregator_window_kind(d->aggregator, req->t0, req->t1, req->query.off_cpu, &w);
        if (r < 0) {
                log_warning_errno_ratelimited(r, "Profile window [%.3f, %.3f) is not available: %m",
                                              req->t0 / 1e9, req->t1 / 1e9);
                http_request_set_error(req, r == -ENODATA ? 503 : 500,
                                       "the samples of this window are not available (%s)\n", strerror(-r));
                profile_finish(req);
                return;
        }
        s->profile_samples_total += w->total;
        /* Per-request filters (?pid=, ?comm=, ?unit=), before rendering. */
        r = profile_window_filter(w, &req->query.filter, d->cgroups, req->t1);
        if (r < 0) {
                profile_window_free(w);
                http_request_set_error(req, 500, "filtering the profile failed: %s\n", strerror(-r));
                profile_finish(req);
                return;
        }

        req->state = REQUEST_RENDER;
        req->render_start_ns = now_ns(CLOCK_MONOTONIC);
        r = req->query.renderer->start(d, w, &req->query, &req->job);
        if (r < 0) {
                req->job = NULL;
                log_warning_errno_ratelimited(r, "Starting a %s profile failed: %m",
                                              req->query.renderer->format);
                http_request_set_error(req, 500, "building the profile failed: %s\n", strerror(-r));
                profile_finish(req);
                return;
        }
        /* Idle priority: a step runs only when no drain, timer or connection is pending. Just above
         * the other idle work (unwind table builds, symbol warming): a collector is waiting for
         * this answer with a timeout, they can wait. */
        r = sd_event_add_defer(d->event, &req->step, on_profile_step, req);
        if (r >= 0)
                r = sd_event_source_set_priority(req->step, SD_EVENT_PRIORITY_IDLE - 1);
        if (r >= 0)
                r = sd_event_source_set_enabled(req->step, SD_EVENT_ON);
        if (r < 0) {
                log_warning_errno_ratelimited(r, "Cannot schedule profile build: %m");
                http_request_set_error(req, 500, "cannot schedule the profile build\n");
                profile_finish(req);
        }
}

/* A past window's end is drained: move it to interval boundaries and build it. */
void profile_on_past_drained(void *userdata)
{
        Request *req = userdata;
        Daemon *d = req->server->daemon;
        uint64_t oldest, latest;

        req->wait = NULL;
        int r = aggregator_snap_window(d->aggregator, req->query.start_ns, req->query.end_ns, &req->t0,
                                       &req->t1);
        if (r < 0) {
                char a[TIMESTAMP_MAX], b[TIMESTAMP_MAX];
                aggregator_span(d->aggregator, &oldest, &latest);
                timestamp_format(oldest, a, sizeof(a));
                timestamp_format(latest, b, sizeof(b));
                http_request_set_error(
                        req, 400, "start: the window is older than the history kept (available: %s to %s)\n",
                        a, b);
                profile_finish(req);
                return;
        }
        /* The flame graph's subtitle names the length served. */
        uint64_t len = req->t1 - req->t0;
        req->query.seconds = (unsigned)((len + NSEC_PER_SEC / 2) / NSEC_PER_SEC) ?: 1;
        log_debug("past profile window asked [%.3f, %.3f), served [%.3f, %.3f)", req->query.start_ns / 1e9,
                  req->query.end_ns / 1e9, req->t0 / 1e9, req->t1 / 1e9);
        on_window_drained(req);
}

static int on_window_end(sd_event_source *es, uint64_t usec, void *userdata);
void profile_cut(Request *req);

static void on_cut_drained(void *userdata)
{
        Request *req = userdata;
        req->wait = NULL;
        profile_cut(req);
}

/* Starts the window (REQUEST_START) or ends it (REQUEST_END) at a fresh cut. */
void profile_cut(Request *req)
{
        HttpServer *s = req->server;
        Daemon *d = s->daemon;
        bool start = req->state == REQUEST_START;
        uint64_t t;

        int r = sampler_cut(d->sampler, &t);
        if (r < 0) {
                log_warning_errno_ratelimited(r,
                                              "Cutting the sampler at the %s of a profile window failed: %m",
                                              start ? "start" : "end");
                http_request_set_error(req, 500, "cutting the sample stream failed: %s\n", strerror(-r));
                profile_finish(req);
                return;
        }
        uint64_t now = now_ns(CLOCK_REALTIME);
        if (now > t + CUT_MAX_AGE_NS && req->cut_retries < CUT_MAX_RETRIES) {
                req->cut_retries++;
                s->cuts_retried_total++;
                r = aggregator_wait_for(d->aggregator, t, on_cut_drained, req, &req->wait);
                if (r < 0) {
                        http_request_set_error(req, 500, "out of memory\n");
                        profile_finish(req);
                }
                return;
        }
        req->cut_retries = 0;

        if (start) {
                req->t0 = t;
                /* N seconds from the cut itself, not from now. */
                uint64_t len = (uint64_t)req->query.seconds * NSEC_PER_SEC, age = now > t ? now - t : 0;
                r = sd_event_add_time_relative(d->event, &req->timer, CLOCK_MONOTONIC,
                                               (len > age ? len - age : 0) / NSEC_PER_USEC,
                                               WINDOW_TIMER_ACCURACY_USEC, on_window_end, req);
                if (r < 0) {
                        http_request_set_error(req, 500, "cannot arm the window timer: %s\n", strerror(-r));
                        profile_finish(req);
                        return;
                }
                req->state = REQUEST_WINDOW;
                /* While the window is collected, symbolize what it already holds, so that little
                 * is left to do between its end and the answer. */
                symbol_warmer_hold(d->warmer);
                req->warming = true;
                log_debug("profile request: %u s from %.3f", req->query.seconds, req->t0 / 1e9);
                return;
        }

        req->t1 = t;
        req->state = REQUEST_DRAIN;
        r = aggregator_wait_for(d->aggregator, req->t1, on_window_drained, req, &req->wait);
        if (r < 0) {
                http_request_set_error(req, 500, "out of memory\n");
                profile_finish(req);
        }
}

static int on_window_end(sd_event_source *es, uint64_t usec, void *userdata)
{
        Request *req = userdata;

        req->timer = sd_event_source_disable_unref(req->timer);
        /* The build takes over from here (and would only compete with the warmer). */
        profile_stop_warming(req);
        req->state = REQUEST_END;
        profile_cut(req);
        return 0;
}
