/* SPDX-License-Identifier: GPL-2.0-only */
/* The HTTP server's connections: every accepted one, the per-client limit, the deadline by which a
 * request must be in, and the parking of a connection whose profile request waits suspended. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct HttpServer HttpServer;
typedef struct Request Request;
typedef struct Conn Conn;

/* A client must deliver a whole request within this, counted from connecting or from the end of
 * its previous response on a kept-alive connection: idle connections, half-sent requests and
 * requests trickled a byte at a time all end here (closed without an answer, counted). It keeps
 * a crowd of such clients from holding the connection limit for long. */
#define HTTP_REQUEST_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define HTTP_REQUEST_TIMER_ACCURACY_USEC (100 * 1000)

/* One accepted connection (MHD's socket context), from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED. */
struct Conn {
        /* First: http-tls.c reaches it through MHD's socket context (see http-tls.h). */
        void *tls; /* TLS: the credentials this connection was given */
        HttpServer *server;
        struct MHD_Connection *connection;
        int fd;                       /* MHD's: never closed here */
        uint8_t client[16];           /* sockaddr_ip_key() */
        bool has_client;              /* false for AF_UNIX clients, which have no address */
        bool probe;                   /* the liveness probe's connection */
        uint64_t request_deadline;    /* CLOCK_MONOTONIC usec; 0 while no request is awaited */
        Request *parked;              /* its suspended profile request */
        void (*cancel)(Request *req); /* of parked, when its client leaves */
        sd_event_source *watch;       /* the client's end, while awaiting a request or parked */
        Conn *prev, *next;            /* server->conns */
        Conn *await_prev, *await_next;
};
_Static_assert(offsetof(Conn, tls) == 0, "http-tls.c finds a connection's credentials first in Conn");

/* The request is in (answered or parked): the request timeout no longer applies. */
void conn_stop_awaiting(Conn *c);
/* A new connection, or one kept alive after a response: the next request must be complete within
 * HTTP_REQUEST_TIMEOUT_USEC. */
void conn_await_request(Conn *c);
/* A profile request waits with its connection suspended (parked), out of MHD's sight; should its
 * client leave meanwhile, cancel(req) is called. NULL-safe. */
void conn_park(Conn *c, Request *req, void (*cancel)(Request *req));
void conn_unpark(Conn *c);

/* The request timeout timer's callback (s->request_timer). */
int http_conn_on_request_timeout(sd_event_source *es, uint64_t usec, void *userdata);
/* MHD_OPTION_ACCEPT_POLICY_CALLBACK and MHD_OPTION_NOTIFY_CONNECTION; cls is the HttpServer. */
enum MHD_Result http_conn_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void http_conn_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                             enum MHD_ConnectionNotificationCode code);
