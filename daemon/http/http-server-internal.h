/* SPDX-License-Identifier: GPL-2.0-only */
/* What the files of the HTTP server share: the server itself, a request in flight, and the
 * counters they fill. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "http/http-probe.h"
#include "http/http-server.h"
#include "http/profile-query.h"
#include "util/macro.h"

typedef struct Conn Conn;
typedef struct Route Route;

typedef enum RequestState {
        REQUEST_NEW,
        REQUEST_START,   /* waiting for a fresh cut to start the window */
        REQUEST_WINDOW,  /* between the cuts */
        REQUEST_END,     /* waiting for a fresh cut to end the window */
        REQUEST_DRAIN,   /* waiting for the interval ending at t1 */
        REQUEST_RENDER,  /* building the body */
        REQUEST_RESPOND, /* result ready, connection resumed */
        REQUEST_DONE,    /* response queued */
        /* The client went away while waiting; the connection is being closed. */
        REQUEST_CANCELLED,
} RequestState;

typedef struct Request {
        HttpServer *server;
        struct MHD_Connection *connection;
        Conn *conn;
        const Route *route;
        RequestState state;
        bool started; /* the access handler has seen it */
        bool suspended;
        bool counted_in_flight;
        bool warming;                /* holds the symbol warmer while its window is open */
        struct Request *prev, *next; /* server->profiles */
        unsigned too_large;          /* 414 or 400, decided by on_uri() */
        size_t target_bytes, n_params;

        ProfileQuery query;
        uint64_t t0, t1;
        unsigned cut_retries;
        sd_event_source *timer;
        void *wait;
        void *job;
        sd_event_source *step;
        uint64_t render_start_ns; /* CLOCK_MONOTONIC */

        /* The response, once known. */
        unsigned status;
        void *body;
        size_t body_size;
        const char *content_type;
        const char *content_disposition;
        bool error; /* text/plain reason with X-Go-Pprof */
        /* 401: the WWW-Authenticate challenge (a static string). */
        const char *www_authenticate;
} Request;

/* Request counters by endpoint and status, bounded: unknown paths share one endpoint. */
static const unsigned counted_statuses[] = {200, 400, 401, 403, 404, 405, 414, 500, 503};
#define N_STATUSES (ELEMENTSOF(counted_statuses) + 1) /* + "other" */

enum { TOO_LARGE_TARGET, TOO_LARGE_PARAMETERS, _TOO_LARGE_MAX };
static const char *const too_large_reasons[_TOO_LARGE_MAX] = {"target_bytes", "parameters"};

struct HttpServer {
        Daemon *daemon;
        http_metrics_render_t render_metrics;
        struct MHD_Daemon *mhd;
        sd_event_source *io, *timer, *kick;
        bool socket_activated;
        char address[128];
        int listen_fd; /* MHD's */

        Conn *conns; /* every accepted connection */
        unsigned n_conns, connection_limit, per_client_limit;
        uint64_t conns_closed_total;
        Conn *awaiting_head, *awaiting_tail; /* connections awaiting a request, by deadline */
        sd_event_source *request_timer;
        HttpProbe *probe;
        uint64_t refused_per_client_total;
        uint64_t request_timeouts_total, send_timeouts_total;
        uint64_t too_large_total[_TOO_LARGE_MAX];
        uint64_t profiles_cancelled_total;

        Request *profiles; /* every request holding a profile slot */
        unsigned n_profiles;

        uint64_t *requests_total; /* [route][status] */
        uint64_t profiles_rejected_busy_total;
        uint64_t profiles_failed_total;
        uint64_t profiles_served_total;
        uint64_t profile_samples_total;
        double render_seconds_sum, render_seconds_max;
        uint64_t render_steps_total;
        uint64_t cuts_retried_total;
        double render_step_seconds_max; /* one step holds the event loop this long */
};
