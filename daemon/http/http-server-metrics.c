/* SPDX-License-Identifier: GPL-2.0-only */
/* The HTTP server's families on /metrics: requests by endpoint and status, profile requests and
 * their builds, connections and their limits, the listen queue, the liveness probe. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>

#include "http/http-probe.h"
#include "http/http-routes.h"
#include "http/http-server-internal.h"

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
        fputs("# HELP profd_http_requests_total HTTP requests answered, by endpoint and status code.\n"
              "# TYPE profd_http_requests_total counter\n",
              f);
        for (size_t r = 0; r <= N_ROUTES; r++)
                for (size_t i = 0; i < N_STATUSES; i++) {
                        uint64_t v = s->requests_total[r * N_STATUSES + i];
                        /* Rows of a second spelling stay 0 (route_counter_row()). */
                        if (v == 0)
                                continue;
                        char code[16];
                        if (i < ELEMENTSOF(counted_statuses))
                                snprintf(code, sizeof(code), "%u", counted_statuses[i]);
                        else
                                snprintf(code, sizeof(code), "other");
                        fprintf(f, "profd_http_requests_total{endpoint=\"%s\",code=\"%s\"} %" PRIu64 "\n",
                                r < N_ROUTES ? routes[r].path : "unknown", code, v);
                }
        fprintf(f,
                "# HELP profd_http_profiles_in_flight Profile requests being waited for or built.\n"
                "# TYPE profd_http_profiles_in_flight gauge\n"
                "profd_http_profiles_in_flight %u\n"
                "# HELP profd_http_profiles_rejected_total Profile requests refused with 503 because too "
                "many were running.\n"
                "# TYPE profd_http_profiles_rejected_total counter\n"
                "profd_http_profiles_rejected_total %" PRIu64 "\n"
                "# HELP profd_http_profiles_served_total Profiles built and sent.\n"
                "# TYPE profd_http_profiles_served_total counter\n"
                "profd_http_profiles_served_total %" PRIu64 "\n"
                "# HELP profd_http_profiles_failed_total Profile requests that failed after their window "
                "started.\n"
                "# TYPE profd_http_profiles_failed_total counter\n"
                "profd_http_profiles_failed_total %" PRIu64 "\n"
                "# HELP profd_http_profile_samples_total Samples contained in served profile windows.\n"
                "# TYPE profd_http_profile_samples_total counter\n"
                "profd_http_profile_samples_total %" PRIu64 "\n"
                "# HELP profd_http_profile_build_seconds Time from a window's end (drained) to its body "
                "being ready.\n"
                "# TYPE profd_http_profile_build_seconds summary\n"
                "profd_http_profile_build_seconds_sum %.6f\n"
                "profd_http_profile_build_seconds_count %" PRIu64 "\n"
                "# HELP profd_http_profile_build_max_seconds Longest profile build so far.\n"
                "# TYPE profd_http_profile_build_max_seconds gauge\n"
                "profd_http_profile_build_max_seconds %.6f\n"
                "# HELP profd_http_profile_build_steps_total Incremental build steps run from the event "
                "loop.\n"
                "# TYPE profd_http_profile_build_steps_total counter\n"
                "profd_http_profile_build_steps_total %" PRIu64 "\n"
                "# HELP profd_http_profile_build_step_max_seconds Longest single build step (the loop is "
                "held meanwhile).\n"
                "# TYPE profd_http_profile_build_step_max_seconds gauge\n"
                "profd_http_profile_build_step_max_seconds %.6f\n"
                "# HELP profd_http_profile_cuts_retried_total Window starts or ends re-cut because the cut "
                "coalesced with an older one still draining.\n"
                "# TYPE profd_http_profile_cuts_retried_total counter\n"
                "profd_http_profile_cuts_retried_total %" PRIu64 "\n",
                s->n_profiles, s->profiles_rejected_busy_total, s->profiles_served_total,
                s->profiles_failed_total, s->profile_samples_total, s->render_seconds_sum,
                s->profiles_served_total, s->render_seconds_max, s->render_steps_total,
                s->render_step_seconds_max, s->cuts_retried_total);
        fprintf(f,
                "# HELP profd_http_profiles_cancelled_total Profile requests whose client went away before "
                "the answer; their slot was freed and their work stopped at once.\n"
                "# TYPE profd_http_profiles_cancelled_total counter\n"
                "profd_http_profiles_cancelled_total %" PRIu64 "\n"
                "# HELP profd_http_connections Open HTTP connections.\n"
                "# TYPE profd_http_connections gauge\n"
                "profd_http_connections %u\n"
                "# HELP profd_http_connections_max Connections served at once (--http-max-connections); "
                "more wait in the listen queue.\n"
                "# TYPE profd_http_connections_max gauge\n"
                "profd_http_connections_max %u\n"
                "# HELP profd_http_connections_per_client_max Connections one client address may hold "
                "(--http-max-connections-per-client; 0: no limit).\n"
                "# TYPE profd_http_connections_per_client_max gauge\n"
                "profd_http_connections_per_client_max %u\n"
                "# HELP profd_http_connections_refused_total Connections closed as soon as accepted, by "
                "reason.\n"
                "# TYPE profd_http_connections_refused_total counter\n"
                "profd_http_connections_refused_total{reason=\"per_client_limit\"} %" PRIu64 "\n"
                "# HELP profd_http_connections_timed_out_total Connections closed for a timeout: no "
                "complete "
                "request within 10 s (request), or no progress sending a response for 15 s (response).\n"
                "# TYPE profd_http_connections_timed_out_total counter\n"
                "profd_http_connections_timed_out_total{phase=\"request\"} %" PRIu64 "\n"
                "profd_http_connections_timed_out_total{phase=\"response\"} %" PRIu64 "\n"
                "# HELP profd_http_requests_too_large_total Requests answered 414 (target over 8192 bytes) "
                "or "
                "400 (over 64 query parameters) before their parameters were parsed.\n"
                "# TYPE profd_http_requests_too_large_total counter\n",
                s->profiles_cancelled_total, s->n_conns, s->connection_limit, s->per_client_limit,
                s->refused_per_client_total, s->request_timeouts_total, s->send_timeouts_total);
        for (size_t i = 0; i < _TOO_LARGE_MAX; i++)
                fprintf(f, "profd_http_requests_too_large_total{reason=\"%s\"} %" PRIu64 "\n",
                        too_large_reasons[i], s->too_large_total[i]);
        unsigned queued = 0;
        if (listen_queue_length(s->listen_fd, &queued) >= 0)
                fprintf(f,
                        "# HELP profd_http_listen_queue_connections Connections waiting in the listen queue "
                        "to be "
                        "accepted.\n"
                        "# TYPE profd_http_listen_queue_connections gauge\n"
                        "profd_http_listen_queue_connections %u\n",
                        queued);
        if (s->probe)
                http_probe_write_metrics(s->probe, f);
}
