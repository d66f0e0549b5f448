/* SPDX-License-Identifier: GPL-2.0-only */
/* The endpoints: the route table (also the index page), the profile route that takes a slot and
 * starts a request's window, /healthz, /metrics, /debug/profd/process, pprof's symbol lookup, and
 * the queueing of answers with the headers every answer carries. */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "http/http-conn.h"
#include "http/http-routes.h"
#include "http/http-server-internal.h"
#include "http/http-tls.h"
#include "http/profile-query.h"
#include "http/profile-request.h"
#include "tracker/proc-tracker.h"
#include "util/log.h"
#include "util/timestamp.h"

static int route_index(HttpServer *s, Request *req);
static int route_profile(HttpServer *s, Request *req);
static int route_metrics(HttpServer *s, Request *req);
static int route_process(HttpServer *s, Request *req);

const Route http_routes[] = {
        {"/debug/pprof/profile",
         "CPU profile of the next N seconds, gzipped pprof (seconds=N, default 30; labels=LIST; "
         "filters pid=, comm=, unit=; format=folded for folded stacks; start=, end= for a past "
         "window from the history)",
         "/debug/pprof/profile?seconds=30", route_profile, &profile_renderer_pprof},
        {"/debug/pprof/flamegraph",
         "Interactive flame graph page of the next N seconds (same parameters as profile)",
         "/debug/pprof/flamegraph?seconds=30", route_profile, &profile_renderer_flamegraph},
        {"/debug/pprof/offcpu",
         "Off-CPU profile of the next N seconds with --off-cpu: where threads waited (state=blocked) "
         "or were preempted (state=preempted) and for how long, gzipped pprof with samples/count and "
         "off_cpu/nanoseconds (same parameters as profile; format=flamegraph for the page)",
         "/debug/pprof/offcpu?seconds=30", route_profile, &profile_renderer_pprof, true},
        {"/debug/pprof/", NULL, NULL, route_index, NULL},
        {"/debug/pprof", NULL, NULL, route_index, NULL},
        {"/metrics", "Prometheus metrics of the daemon (samples, drops by reason, maps, requests)", NULL,
         route_metrics, NULL},
        {"/healthz", "200 once sampling is live, 503 before", NULL, route_healthz, NULL},
        {"/debug/profd/process",
         "DWARF unwinding state of one process (pid=N): whether its unwind tables are in place, "
         "per executable mapping",
         "/debug/profd/process?pid=1", route_process, NULL},
        /* pprof's remote symbolization (POST, "symbolz"), not listed: see route_symbol(). */
        {"/debug/pprof/symbol", NULL, NULL, route_symbol, NULL},
};
const size_t http_n_routes = ELEMENTSOF(http_routes);

/* The counter row of a route: routes that are one endpoint under two spellings (/debug/pprof and
 * /debug/pprof/) share the row of the first, so each endpoint is one series. */
static size_t route_counter_row(const Route *route)
{
        if (!route)
                return ROUTE_UNKNOWN;
        for (size_t i = 0; i < N_ROUTES; i++)
                if (http_routes[i].handler == route->handler && http_routes[i].renderer == route->renderer &&
                    http_routes[i].off_cpu == route->off_cpu)
                        return i;
        return (size_t)(route - http_routes);
}

const Route *route_find(const char *url)
{
        for (size_t i = 0; i < N_ROUTES; i++)
                if (strcmp(url, http_routes[i].path) == 0)
                        return &http_routes[i];
        return NULL;
}

/* ---- responses --------------------------------------------------------------------------------- */

static void count_request(HttpServer *s, const Route *route, unsigned status, const Conn *conn)
{
        if (conn && conn->probe)
                return; /* the liveness probe's /healthz is counted on its own */
        size_t r = route_counter_row(route);
        size_t i = 0;
        while (i < ELEMENTSOF(counted_statuses) && counted_statuses[i] != status)
                i++;
        s->requests_total[r * N_STATUSES + i]++;
}

enum MHD_Result http_queue(Request *req, unsigned status, void *body, size_t size, const char *content_type,
                           const char *disposition, bool error)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(size, body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        if (disposition)
                MHD_add_response_header(resp, "Content-Disposition", disposition);
        if (error)
                /* go tool pprof prints the body of an error response that carries this header. */
                MHD_add_response_header(resp, "X-Go-Pprof", "1");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, "Allow", "GET, HEAD");
        if (req->www_authenticate)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, req->www_authenticate);
        MHD_add_response_header(resp, "Cache-Control", "no-store");
        /* As net/http/pprof: a text/plain reason is never sniffed into something else. */
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        if (status == 200 && req->t1 > req->t0) {
                /* The window served, which for a past window is the one asked moved to interval
                 * boundaries. */
                char t[TIMESTAMP_MAX];
                timestamp_format(req->t0, t, sizeof(t));
                MHD_add_response_header(resp, "X-Profd-Window-Start", t);
                timestamp_format(req->t1, t, sizeof(t));
                MHD_add_response_header(resp, "X-Profd-Window-End", t);
        }
        enum MHD_Result r = MHD_queue_response(req->connection, status, resp);
        MHD_destroy_response(resp);
        count_request(req->server, req->route, status, req->conn);
        conn_stop_awaiting(req->conn); /* the rest is sending, under MHD's own timeout */
        req->state = REQUEST_DONE;
        return r;
}

enum MHD_Result http_queue_text(Request *req, unsigned status, const char *content_type, bool error,
                                const char *fmt, ...) _printf_(5, 6);
enum MHD_Result http_queue_text(Request *req, unsigned status, const char *content_type, bool error,
                                const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0)
                return MHD_NO;
        return http_queue(req, status, text, (size_t)n, content_type, NULL, error);
}

static int route_profile(HttpServer *s, Request *req)
{
        Daemon *d = s->daemon;
        char err[300];
        bool past;

        if (profile_query_parse(s, req, err, sizeof(err)) < 0)
                return queue_error(req, 400, "%s\n", err);
        if (!d->sampler || !sampler_is_live(d->sampler))
                return queue_error(req, 503, "sampling is not live yet\n");
        if (req->query.off_cpu && !d->options.off_cpu)
                return queue_error(req, 503, "off-CPU recording is off: start profd with --off-cpu\n");
        past = req->query.has_start || req->query.has_end;
        if (past && profile_past_window(s, &req->query, err, sizeof(err)) < 0)
                return queue_error(req, 400, "%s\n", err);
        if (s->n_profiles >= d->options.max_concurrent_profiles)
                profile_reap_gone(s);
        if (s->n_profiles >= d->options.max_concurrent_profiles) {
                s->profiles_rejected_busy_total++;
                return queue_error(
                        req, 503,
                        "too many concurrent profile requests (at most %u, --max-concurrent-profiles)\n",
                        d->options.max_concurrent_profiles);
        }

        req->counted_in_flight = true;
        req->next = s->profiles;
        if (s->profiles)
                s->profiles->prev = req;
        s->profiles = req;
        s->n_profiles++;

        /* Suspend first: the cut may have to wait for a drain, and errors from here on are
         * answered through profile_finish(), which resumes. */
        req->suspended = true;
        MHD_suspend_connection(req->connection);
        conn_park(req->conn, req, profile_request_cancel); /* watches for the client leaving meanwhile */
        if (past) {
                /* Ending within the interval being collected: built after its drain (< 1 s). */
                req->state = REQUEST_DRAIN;
                if (aggregator_wait_for(d->aggregator, req->query.end_ns, profile_on_past_drained, req,
                                        &req->wait) < 0) {
                        http_request_set_error(req, 500, "out of memory\n");
                        profile_finish(req);
                }
                return MHD_YES;
        }
        req->state = REQUEST_START;
        profile_cut(req);
        return MHD_YES;
}

/* ---- other endpoints ----------------------------------------------------------------------------- */

int route_healthz(HttpServer *s, Request *req)
{
        if (s->daemon->sampler && sampler_is_live(s->daemon->sampler))
                return http_queue_text(req, 200, "text/plain; charset=utf-8", false, "ok\n");
        return queue_error(req, 503, "sampling is not live yet\n");
}

static int route_process(HttpServer *s, Request *req)
{
        const char *v = MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, "pid");
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        unsigned long pid;
        char *end;
        FILE *f;
        int r;

        if (!v || *v < '1' || *v > '9' || (errno = 0, pid = strtoul(v, &end, 10), errno) || *end ||
            pid > INT32_MAX)
                return queue_error(req, 400, "pid: expected a process id (pid=N)\n");
        if (!s->daemon->tracker)
                return queue_error(req, 404, "DWARF unwinding is off: no process is tracked\n");
        f = open_memstream(&buf, &size);
        if (!f)
                return queue_error(req, 500, "out of memory\n");
        r = proc_tracker_write_process(s->daemon->tracker, (pid_t)pid, f);
        if (fclose(f) != 0 || r == -ENOMEM)
                return queue_error(req, 500, "out of memory\n");
        if (r < 0)
                return queue_error(req, 404, "pid %lu is not tracked\n", pid);
        return http_queue(req, 200, TAKE_PTR(buf), size, "text/plain; charset=utf-8", NULL, false);
}

/* go tool pprof, given a profile URL, POSTs the addresses of frames without a function to
 * .../symbol before it shows anything, and gives up if that fails. profd named in the profile every
 * frame it could; the rest is for the reader's debug files (docs/symbolization.md). So the answer
 * is net/http/pprof's "no symbols here"; the addresses posted are not looked at. */
int route_symbol(HttpServer *s, Request *req)
{
        (void)s;
        return http_queue_text(req, 200, "text/plain; charset=utf-8", false, "num_symbols: 0\n");
}

static int route_metrics(HttpServer *s, Request *req)
{
        char *text = NULL;
        size_t size = 0;
        int r = s->render_metrics(s->daemon, &text, &size);
        if (r < 0)
                return queue_error(req, 500, "rendering metrics failed: %s\n", strerror(-r));
        return http_queue(req, 200, text, size, "text/plain; version=0.0.4; charset=utf-8", NULL, false);
}

static int route_index(HttpServer *s, Request *req)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return queue_error(req, 500, "out of memory\n");
        fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>profd</title></head>\n"
              "<body><h1>profd " PROFD_VERSION "</h1>\n<p>Continuous CPU profiler. Endpoints:</p>\n<ul>\n",
              f);
        for (size_t i = 0; i < N_ROUTES; i++) {
                if (!http_routes[i].description)
                        continue;
                const char *href = http_routes[i].example ?: http_routes[i].path;
                fprintf(f, "<li><a href=\"%s\">%s</a> &mdash; %s</li>\n", href, http_routes[i].path,
                        http_routes[i].description);
        }
        fprintf(f,
                "</ul>\n<p>Example: <code>go tool pprof "
                "%s://HOST:PORT/debug/pprof/profile?seconds=30</code></p>\n"
                "<p>Labels: comm, pid, tid, thread_name, unit, container_id; default <code>%s</code>. "
                "Longest window: %u s.</p>\n</body></html>\n",
                http_tls_scheme(s->daemon->tls), s->daemon->options.labels_string ?: "",
                s->daemon->options.max_seconds);
        if (fclose(f) != 0) {
                free(buf);
                return queue_error(req, 500, "out of memory\n");
        }
        return http_queue(req, 200, buf, size, "text/html; charset=utf-8", NULL, false);
}
