/* SPDX-License-Identifier: GPL-2.0-only */
/* The HTTP server's endpoints: the route table, their handlers, and how an answer is queued and
 * counted. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/profile-renderers.h"
#include "util/macro.h"

typedef struct HttpServer HttpServer;
typedef struct Request Request;
typedef struct Route Route;

typedef int (*route_handler_t)(HttpServer *s, Request *req);

struct Route {
        const char *path;
        const char *description; /* for the index page; NULL: not listed */
        const char *example;     /* link on the index page; NULL: path */
        route_handler_t handler;
        const ProfileRenderer *renderer; /* profile routes: default format */
        bool off_cpu;                    /* profile routes: the off-CPU profile (--off-cpu) */
};

extern const Route http_routes[];
extern const size_t http_n_routes;
#define N_ROUTES http_n_routes
#define ROUTE_UNKNOWN N_ROUTES /* counter row for paths no route matches */

const Route *route_find(const char *url);
/* Handlers the access handler treats apart: /healthz needs no credentials, /debug/pprof/symbol
 * takes POST. */
int route_healthz(HttpServer *s, Request *req);
int route_symbol(HttpServer *s, Request *req);

/* Queues the response (body is malloc()ed, freed here) and counts it. */
enum MHD_Result http_queue(Request *req, unsigned status, void *body, size_t size, const char *content_type,
                           const char *disposition, bool error);
enum MHD_Result http_queue_text(Request *req, unsigned status, const char *content_type, bool error,
                                const char *fmt, ...) _printf_(5, 6);
/* One line, text/plain, X-Go-Pprof: 1. */
#define queue_error(req, status, ...)                                                                       \
        http_queue_text(req, status, "text/plain; charset=utf-8", true, __VA_ARGS__)
