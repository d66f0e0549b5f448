/* SPDX-License-Identifier: GPL-2.0-only */
/* The HTTP server's families on /metrics: requests by endpoint and status, profile requests and
 * their builds, connections and their limits, the listen queue, the liveness probe. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>

#include "http/http-probe.h"
#include "http/http-routes.h"
#include "http/http-server-internal.h"
#include "util/metrics-writer.h"

/* How many connections wait in the listen queue to be accepted (TCP only). */
static int listen_queue_length(int fd, unsigned *ret)
{
        struct tcp_info ti = {};
        socklen_t len = sizeof(ti);
        int type = 0;
        socklen_t tl = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &type, &tl) < 0 || type != IPPROTO_TCP)
                return -EOPNOTSUPP;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
                return -errno;
        *ret = ti.tcpi_unacked; /* for a listening socket: the accept queue's length */
        return 0;
}

void http_server_write_metrics(const HttpServer *s, FILE *f)
{
        metric_family(f, "profd_http_requests_total", "counter",
                      "HTTP requests answered, by endpoint and status code.");
        for (size_t r = 0; r <= N_ROUTES; r++)
                for (size_t i = 0; i < N_STATUSES; i++) {
                        uint64_t v = s->requests_total[r * N_STATUSES + i];
                        /* Rows of a second spelling stay 0 (route_counter_row()). */
                        if (v == 0)
                                continue;
                        char code[16], labels[256];
                        if (i < ELEMENTSOF(counted_statuses))
                                snprintf(code, sizeof(code), "%u", counted_statuses[i]);
                        else
                                snprintf(code, sizeof(code), "other");
                        snprintf(labels, sizeof(labels), "endpoint=\"%s\",code=\"%s\"",
                                 r < N_ROUTES ? http_routes[r].path : "unknown", code);
                        metric_sample(f, "profd_http_requests_total", labels, v);
                }
        metric_gauge(f, "profd_http_profiles_in_flight", "Profile requests being waited for or built.",
                     s->n_profiles);
        metric_counter(f, "profd_http_profiles_rejected_total",
                       "Profile requests refused with 503 because too many were running.",
                       s->profiles_rejected_busy_total);
        metric_counter(f, "profd_http_profiles_served_total", "Profiles built and sent.",
                       s->profiles_served_total);
        metric_counter(f, "profd_http_profiles_failed_total",
                       "Profile requests that failed after their window started.", s->profiles_failed_total);
        metric_counter(f, "profd_http_profile_samples_total", "Samples contained in served profile windows.",
                       s->profile_samples_total);
        metric_family(f, "profd_http_profile_build_seconds", "summary",
                      "Time from a window's end (drained) to its body being ready.");
        metric_sample_double(f, "profd_http_profile_build_seconds_sum", NULL, s->render_seconds_sum);
        metric_sample(f, "profd_http_profile_build_seconds_count", NULL, s->profiles_served_total);
        metric_family(f, "profd_http_profile_build_max_seconds", "gauge", "Longest profile build so far.");
        metric_sample_double(f, "profd_http_profile_build_max_seconds", NULL, s->render_seconds_max);
        metric_counter(f, "profd_http_profile_build_steps_total",
                       "Incremental build steps run from the event loop.", s->render_steps_total);
        metric_family(f, "profd_http_profile_build_step_max_seconds", "gauge",
                      "Longest single build step (the loop is held meanwhile).");
        metric_sample_double(f, "profd_http_profile_build_step_max_seconds", NULL,
                             s->render_step_seconds_max);
        metric_counter(f, "profd_http_profile_cuts_retried_total",
                       "Window starts or ends re-cut because the cut coalesced with an older one still "
                       "draining.",
                       s->cuts_retried_total);
        metric_counter(f, "profd_http_profiles_cancelled_total",
                       "Profile requests whose client went away before the answer; their slot was freed "
                       "and their work stopped at once.",
                       s->profiles_cancelled_total);
        metric_gauge(f, "profd_http_connections", "Open HTTP connections.", s->n_conns);
        metric_gauge(f, "profd_http_connections_max",
                     "Connections served at once (--http-max-connections); more wait in the listen queue.",
                     s->connection_limit);
        metric_gauge(f, "profd_http_connections_per_client_max",
                     "Connections one client address may hold (--http-max-connections-per-client; 0: no "
                     "limit).",
                     s->per_client_limit);
        metric_family(f, "profd_http_connections_refused_total", "counter",
                      "Connections closed as soon as accepted, by reason.");
        metric_sample(f, "profd_http_connections_refused_total", "reason=\"per_client_limit\"",
                      s->refused_per_client_total);
        metric_family(f, "profd_http_connections_timed_out_total", "counter",
                      "Connections closed for a timeout: no complete request within 10 s (request), or no "
                      "progress sending a response for 15 s (response).");
        metric_sample(f, "profd_http_connections_timed_out_total", "phase=\"request\"",
                      s->request_timeouts_total);
        metric_sample(f, "profd_http_connections_timed_out_total", "phase=\"response\"",
                      s->send_timeouts_total);
        metric_labelled(f, "profd_http_requests_too_large_total", "counter",
                        "Requests answered 414 (target over 8192 bytes) or 400 (over 64 query parameters) "
                        "before their parameters were parsed.",
                        "reason", too_large_reasons, s->too_large_total, _TOO_LARGE_MAX);
        unsigned queued = 0;
        if (listen_queue_length(s->listen_fd, &queued) >= 0)
                metric_gauge(f, "profd_http_listen_queue_connections",
                             "Connections waiting in the listen queue to be accepted.", queued);
        if (s->probe)
                http_probe_write_metrics(s->probe, f);
}
