/* SPDX-License-Identifier: GPL-2.0-only */
/* HTTP on libmicrohttpd in external-event mode: MHD's epoll fd is an sd-event IO source, its
 * timeout an sd-event timer, so requests are served by the daemon's one loop. Profile requests
 * are suspended connections while their window runs and while their result is built step by step
 * from a low-priority source. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "aggregator/aggregator.h"
#include "tracker/labels.h"
#include "util/macro.h"
#include "sampler/sample-filter.h"

typedef struct Daemon Daemon;
typedef struct HttpServer HttpServer;
typedef struct ProfileQuery ProfileQuery;

/* How a finished window becomes a response body. /debug/pprof/profile renders pprof; other
 * formats (?format=, other endpoints) add a renderer to the table in http-server.c. */
typedef struct ProfileRenderer {
        const char *format; /* ?format= value */
        const char *content_type;
        const char *content_disposition; /* NULL: none */
        /* Takes ownership of w (also on failure). */
        int (*start)(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job);
        /* Bounded work; 0 while more remains, 1 when done, <0 on error. */
        int (*step)(void *job);
        /* After step returned 1; ownership of the malloc()ed bytes passes to the caller. */
        int (*take_result)(void *job, void **ret_data, size_t *ret_size);
        void (*free)(void *job);
} ProfileRenderer;

/* A profile request's parameters, parsed and validated before the window starts. Filters and
 * other per-request options are added here and to the parameter table in http-server.c. */
struct ProfileQuery {
        unsigned seconds;
        LabelSet labels;
        const ProfileRenderer *renderer;
        SampleFilter filter; /* ?pid= ?comm= ?unit= */
        /* A past window (?start=, ?end=, CLOCK_REALTIME ns) is served from the history at once;
         * without either the window starts now. */
        uint64_t start_ns, end_ns;
        bool has_start, has_end, has_seconds;
};

/* Listens on the socket passed by systemd (sd_listen_fds) if there is one, else on
 * d->options.http_address, and registers with d->event. */
int http_server_new(Daemon *d, HttpServer **ret);
/* Answers profile requests still in progress with 503 and stops listening. */
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);

bool http_server_socket_activated(const HttpServer *s);
/* "127.0.0.1:7071" or "socket activation", for logs and STATUS=. */
const char *http_server_address(const HttpServer *s);
unsigned http_server_profiles_in_flight(const HttpServer *s);
/* Whether HTTP answers its own liveness probe (http-probe.h); false with a reason line when it has
 * not for too long. */
bool http_server_responsive(const HttpServer *s, char *why, size_t size);
void http_server_write_metrics(const HttpServer *s, FILE *f);
