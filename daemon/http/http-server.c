/* SPDX-License-Identifier: GPL-2.0-only */
/* libmicrohttpd runs in external-event mode inside the daemon's sd-event loop, the way systemd's
 * journal-remote does it: MHD_USE_EPOLL gives one epoll fd that becomes readable whenever MHD has
 * work, and MHD_get_timeout() says when it next needs to run for connection timeouts.
 *
 * This file sets MHD up, listens, runs MHD from the loop and takes each request from its request
 * line to the handler of its route. The rest of the server: http-conn.c (connections, limits,
 * request timeout), http-routes.c (endpoints, answers), profile-query.c, profile-request.c and
 * profile-renderers.c (profile requests), http-server-metrics.c (its /metrics families). */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "daemon.h"
#include "http/http-auth.h"
#include "http/http-conn.h"
#include "http/http-probe.h"
#include "http/http-routes.h"
#include "http/http-server-internal.h"
#include "http/http-server.h"
#include "http/http-tls.h"
#include "http/profile-request.h"
#include "util/log.h"

/* Each connection costs a file descriptor and up to 32 KiB (libmicrohttpd's default
 * MHD_OPTION_CONNECTION_MEMORY_LIMIT); scrapers use one or two. Waiting profile requests hold a
 * connection each, so the limit (--http-max-connections) is at least --max-concurrent-profiles +
 * this, leaving room for the 503s, /metrics and /healthz. At the limit libmicrohttpd stops
 * accepting: new clients wait in the listen queue until a connection ends. One client address
 * may hold --http-max-connections-per-client of them, so that it takes a crowd of addresses, not
 * one port scanner or broken scraper, to fill the rest. */
#define HTTP_CONNECTIONS_BESIDES_PROFILES 32

/* libmicrohttpd's own timeout: a connection that makes no progress for this long is closed. It
 * matters while a response is sent (a client that stops reading); it is longer than the request
 * timeout so that a connection awaiting a request always ends by the request timeout. Waiting
 * profile requests are exempt from both: libmicrohttpd takes a suspended connection off its
 * timeout lists and restarts its clock on resume, and the request timeout stops once the request
 * is in, so a window of any length is safe. */
#define HTTP_SEND_TIMEOUT_S 15
/* Request targets longer than this, or with more query parameters, are answered 414 and 400
 * (see on_uri()). Far above what the endpoints take: 16 values each of pid=, comm= and unit=. */
#define HTTP_MAX_TARGET_BYTES 8192
#define HTTP_MAX_QUERY_PARAMS 64

/* ---- the MHD event sources ------------------------------------------------------------------- */

/* Always 0: an sd-event callback returning an error gets its source disabled, which here would
 * silently stop serving HTTP.
 *
 * At its connection limit libmicrohttpd takes the listening socket out of its epoll set, and puts
 * it back only at the start of a run (MHD_epoll()), while the connections a run closes are freed
 * at its very end (MHD_cleanup_connections()). When a run closes the last connections (they time
 * out together, or their clients all leave), nothing is left in the epoll set to wake it and no
 * timeout left for MHD_get_timeout(): without another run the listener would never be watched
 * again. So whenever a run closed connections, run again at once. */
#define HTTP_RUNS_MAX 8
/* MHD's timer: its timeouts (and "run again soon") are kept to the millisecond. */
#define HTTP_TIMER_ACCURACY_USEC 1000
static int http_dispatch(HttpServer *s)
{
        for (unsigned i = 0; i < HTTP_RUNS_MAX; i++) {
                uint64_t closed = s->conns_closed_total;
                if (MHD_run(s->mhd) == MHD_NO)
                        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST,
                                                   LOG_WARNING, 0, "libmicrohttpd: MHD_run failed");
                if (s->conns_closed_total == closed)
                        break;
        }

        /* Re-armed after every run. 0 means work is pending already (data read but not processed):
         * run again almost at once, but not in a tight loop should MHD keep saying 0. */
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        int r;
        if (MHD_get_timeout(s->mhd, &timeout_ms) == MHD_NO)
                r = sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
        else {
                uint64_t usec = (uint64_t)timeout_ms * 1000;
                r = sd_event_source_set_time_relative(
                        s->timer, usec > HTTP_TIMER_ACCURACY_USEC ? usec : HTTP_TIMER_ACCURACY_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
        }
        if (r < 0)
                log_warning_errno_ratelimited(r, "Cannot arm the HTTP timeout timer: %m");
        return 0;
}

static int on_mhd_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        return http_dispatch(userdata);
}

static int on_mhd_timer(sd_event_source *es, uint64_t usec, void *userdata)
{
        return http_dispatch(userdata);
}

static int on_mhd_kick(sd_event_source *es, void *userdata)
{
        return http_dispatch(userdata);
}

/* ---- MHD callbacks ------------------------------------------------------------------------------- */

/* MHD_OPTION_URI_LOG_CALLBACK: the request line is in, its parameters not yet parsed. Every
 * request starts here.
 *
 * libmicrohttpd 0.9.75 never answers a request whose query parameters do not fit in the
 * connection's memory pool (MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 KiB: about 450 short
 * parameters): it queues a 431, then overwrites its own state and waits for headers the client
 * has already sent, until the connection times out. This callback runs before the parameters are
 * parsed, on MHD's own writable copy of the request target, and its result is what the access
 * handler gets as *con_cls. A target that is too long or has too many parameters is cut right
 * after its '?' there, so MHD parses no parameter, and the access handler answers 414 or 400. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
        HttpServer *s = cls;
        Request *req = calloc(1, sizeof(Request));
        if (!req)
                return NULL; /* the access handler closes the connection */
        req->server = s;
        req->connection = connection;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        req->conn = ci ? ci->socket_context : NULL;

        char *q = strchr(uri, '?');
        req->target_bytes = strlen(uri);
        if (q && q[1]) {
                req->n_params = 1;
                for (const char *p = q + 1; *p; p++)
                        req->n_params += *p == '&';
        }
        if (req->target_bytes > HTTP_MAX_TARGET_BYTES) {
                req->too_large = MHD_HTTP_URI_TOO_LONG;
                s->too_large_total[TOO_LARGE_TARGET]++;
        } else if (req->n_params > HTTP_MAX_QUERY_PARAMS) {
                req->too_large = MHD_HTTP_BAD_REQUEST;
                s->too_large_total[TOO_LARGE_PARAMETERS]++;
        }
        if (req->too_large && q)
                q[1] = 0;
        return req;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
        HttpServer *s = cls;
        Request *req = *con_cls;

        if (!req)
                return MHD_NO; /* out of memory in on_uri() */
        if (!req->started) {
                req->started = true;
                req->route = route_find(url);
                return MHD_YES; /* called again once the headers (and any body) are in */
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0; /* bodies are ignored: every endpoint is GET */
                return MHD_YES;
        }

        switch (req->state) {
        case REQUEST_NEW:
                break;
        case REQUEST_CANCELLED:
                return MHD_NO; /* the client is gone: close */
        case REQUEST_RESPOND:
                if (!req->body && req->status == 0)
                        http_request_set_error(req, 500, "internal error\n");
                return http_queue(req, req->status ?: 500, TAKE_PTR(req->body), req->body_size,
                                  req->content_type ?: "text/plain; charset=utf-8", req->content_disposition,
                                  req->error);
        default:
                return MHD_YES; /* spurious call while suspended work is in progress */
        }

        if (req->too_large == MHD_HTTP_URI_TOO_LONG)
                return queue_error(req, MHD_HTTP_URI_TOO_LONG,
                                   "request target of %zu bytes is too long: at most %u\n",
                                   req->target_bytes, HTTP_MAX_TARGET_BYTES);
        if (req->too_large)
                return queue_error(req, MHD_HTTP_BAD_REQUEST,
                                   "too many query parameters (%zu): at most %u\n", req->n_params,
                                   HTTP_MAX_QUERY_PARAMS);
        /* Before anything else looks at the request. /healthz stays open for liveness checks
         * (it tells nothing but whether sampling runs). */
        if (!req->route || req->route->handler != route_healthz) {
                const char *why;
                unsigned status = http_auth_check_request(s->daemon->auth, s->daemon->tls, connection, &why,
                                                          &req->www_authenticate);
                if (status != 0)
                        return queue_error(req, status, "%s\n", why);
        }
        /* A profile profd does not have (heap, goroutine, mutex, ...: collectors ask for them by
         * default) is answered as net/http/pprof answers one the Go runtime lacks, whatever the
         * method, so collectors see a plain 404 they know. */
        if (!req->route && strncmp(url, "/debug/pprof/", strlen("/debug/pprof/")) == 0)
                return queue_error(req, 404, "Unknown profile\n");
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0 &&
            !(strcmp(method, MHD_HTTP_METHOD_POST) == 0 && req->route &&
              req->route->handler == route_symbol))
                return queue_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "method %.16s not allowed: use GET\n",
                                   method);
        if (!req->route)
                return queue_error(req, 404, "unknown path '%.128s' (see /debug/pprof/)\n", url);
        return req->route->handler(s, req);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        HttpServer *s = cls;
        Request *req = *con_cls;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        Conn *conn = ci ? ci->socket_context : NULL;

        if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
                s->send_timeouts_total++;
        else if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && conn)
                /* Kept alive (or about to close, which ends this anyway): the next request has the
                 * request timeout again. */
                conn_await_request(conn);
        if (!req)
                return;
        if (req->conn && req->conn->parked == req)
                conn_unpark(req->conn);
        if (req->state != REQUEST_DONE && req->route)
                /* The client went away or the server is stopping before an answer was queued. */
                log_debug("request for %s ended before it was answered (%d)", req->route->path, (int)toe);
        profile_stop_work(req);
        profile_release_slot(req);
        free(req->body);
        free(req);
        *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        static LogRateLimit rl = LOG_RATELIMIT_INIT(10 * NSEC_PER_SEC, 10);
        unsigned suppressed = 0;
        if (!log_ratelimit_test(&rl, &suppressed))
                return;
        char buf[512];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        buf[strcspn(buf, "\n")] = 0;
        if (suppressed > 0)
                log_warning("libmicrohttpd: %s (%u similar messages suppressed)", buf, suppressed);
        else
                log_warning("libmicrohttpd: %s", buf);
}

/* ---- listening ------------------------------------------------------------------------------------- */

/* "[HOST]:PORT": empty HOST listens on every address (IPv6 socket accepting IPv4 too when the host
 * has IPv6, plain IPv4 otherwise); "[::1]:PORT" for IPv6 literals. */
static int listen_address(const char *address, int *ret_fd, char *desc, size_t desc_len)
{
        const char *colon = strrchr(address, ':');
        if (!colon || !colon[1])
                return -EINVAL;
        char host[256];
        size_t hl = (size_t)(colon - address);
        if (hl >= sizeof(host))
                return -EINVAL;
        memcpy(host, address, hl);
        host[hl] = 0;
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
                memmove(host, host + 1, hl - 2);
                host[hl - 2] = 0;
        }
        const char *port = colon + 1;

        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(*host ? host : NULL, port, &hints, &res);
        if (g != 0) {
                log_error("Cannot resolve --http-address %s: %s", address, gai_strerror(g));
                return -EINVAL;
        }

        int r = -EADDRNOTAVAIL;
        /* For the wildcard address try IPv6 first: with V6ONLY off one socket serves both. */
        for (int pass = 0; pass < 2; pass++)
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                        if (!*host && (pass == 0) != (ai->ai_family == AF_INET6))
                                continue;
                        if (*host && pass == 1)
                                continue;
                        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                        if (fd < 0) {
                                r = -errno;
                                continue;
                        }
                        int one = 1, zero = 0;
                        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                        if (ai->ai_family == AF_INET6 && !*host)
                                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
                        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                                r = -errno;
                                close(fd);
                                continue;
                        }
                        snprintf(desc, desc_len, "%s", address);
                        freeaddrinfo(res);
                        *ret_fd = fd;
                        return 0;
                }
        freeaddrinfo(res);
        return r;
}

int http_server_new(Daemon *d, http_metrics_render_t render_metrics, HttpServer **ret)
{
        _cleanup_(http_server_freep) HttpServer *s = calloc(1, sizeof(HttpServer));
        _cleanup_close_ int fd = -1;
        int r;

        if (!s)
                return -ENOMEM;
        s->daemon = d;
        s->render_metrics = render_metrics;
        s->requests_total = calloc((N_ROUTES + 1) * N_STATUSES, sizeof(uint64_t));
        if (!s->requests_total)
                return -ENOMEM;

        int n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Cannot read the sockets passed by systemd: %m");
        if (n > 1)
                return log_error_errno(-EINVAL, "Expected one listening socket from systemd, got %d", n);
        if (n == 1) {
                fd = SD_LISTEN_FDS_START;
                r = sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1);
                if (r < 0)
                        return log_error_errno(r, "Cannot check the socket passed by systemd: %m");
                if (r == 0)
                        return log_error_errno(
                                -EINVAL, "The socket passed by systemd is not a listening stream socket");
                int flags = fcntl(fd, F_GETFL);
                if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                        return log_error_errno(errno, "Cannot make the systemd socket non-blocking: %m");
                s->socket_activated = true;
                snprintf(s->address, sizeof(s->address), "socket activation");
        } else {
                r = listen_address(d->options.http_address, &fd, s->address, sizeof(s->address));
                if (r < 0)
                        return log_error_errno(r, "Cannot listen on %s: %m", d->options.http_address);
        }

        s->connection_limit = d->options.http_max_connections;
        if (s->connection_limit < d->options.max_concurrent_profiles + HTTP_CONNECTIONS_BESIDES_PROFILES)
                s->connection_limit = d->options.max_concurrent_profiles + HTTP_CONNECTIONS_BESIDES_PROFILES;
        s->per_client_limit = d->options.http_max_connections_per_client;
        s->listen_fd = fd;
        s->mhd = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | http_tls_mhd_flags(d->tls), 0,
                http_conn_on_accept, s, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
                s, /* first, or MHD says so on stderr */
                /* TLS (http-tls.c): its options; each new connection's credentials come from
                 * http_conn_on_connection. */
                MHD_OPTION_ARRAY, http_tls_mhd_options(d->tls), MHD_OPTION_LISTEN_SOCKET, fd,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                http_conn_on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                MHD_OPTION_CONNECTION_LIMIT, s->connection_limit, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned)HTTP_SEND_TIMEOUT_S, MHD_OPTION_END);
        if (!s->mhd)
                return log_error_errno(-EIO, "Cannot start the HTTP server (libmicrohttpd) on %s",
                                       s->address);
        TAKE_FD(fd); /* MHD owns it now */

        const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return log_error_errno(-EIO, "libmicrohttpd has no epoll fd (built without epoll?)");

        r = sd_event_add_io(d->event, &s->io, info->epoll_fd, EPOLLIN, on_mhd_io, s);
        if (r < 0)
                return log_error_errno(r, "Cannot watch the HTTP server's epoll fd: %m");
        r = sd_event_add_time(d->event, &s->timer, CLOCK_MONOTONIC, UINT64_MAX, HTTP_TIMER_ACCURACY_USEC,
                              on_mhd_timer, s);
        if (r < 0)
                return log_error_errno(r, "Cannot add the HTTP timer: %m");
        r = sd_event_add_time(d->event, &s->request_timer, CLOCK_MONOTONIC, UINT64_MAX,
                              HTTP_REQUEST_TIMER_ACCURACY_USEC, http_conn_on_request_timeout, s);
        if (r < 0)
                return log_error_errno(r, "Cannot add the HTTP request timeout timer: %m");
        (void)sd_event_source_set_enabled(s->request_timer, SD_EVENT_OFF);
        (void)sd_event_source_set_description(s->request_timer, "http-request-timeout");
        /* The probe speaks plain HTTP: under TLS its handshakes would only fail (and be logged
         * every 5 s), so the watchdog then rests on the loop alone. */
        if (http_tls_mhd_flags(d->tls))
                log_notice("HTTPS on %s: the HTTP liveness probe is off; the watchdog checks the event "
                           "loop only",
                           s->address);
        else {
                r = http_probe_new(d->event, s->listen_fd, &s->probe);
                if (r < 0)
                        log_warning_errno(
                                r, "Cannot probe the HTTP listener on %s, its liveness is not checked: %m",
                                s->address);
        }
        r = sd_event_add_defer(d->event, &s->kick, on_mhd_kick, s);
        if (r < 0)
                return log_error_errno(r, "Cannot add the HTTP dispatch source: %m");
        (void)sd_event_source_set_enabled(s->kick, SD_EVENT_OFF);
        (void)sd_event_source_set_description(s->io, "http-epoll");
        (void)sd_event_source_set_description(s->timer, "http-timeout");

        log_debug("Serving HTTP on %s", s->address);
        *ret = TAKE_PTR(s);
        return 0;
}

HttpServer *http_server_free(HttpServer *s)
{
        if (!s)
                return NULL;
        if (s->mhd) {
                /* Answer waiting profile requests (MHD refuses to stop with suspended connections,
                 * and a client is better told why than cut off). */
                for (Request *req = s->profiles; req; req = req->next)
                        if (req->state != REQUEST_RESPOND && req->state != REQUEST_DONE) {
                                http_request_set_error(req, 503, "profd is shutting down\n");
                                profile_finish(req);
                        }
                /* A few non-blocking rounds so the resumed handlers queue their 503 and it is sent. */
                for (int i = 0; i < 4; i++)
                        (void)MHD_run(s->mhd);
                MHD_stop_daemon(s->mhd); /* frees every Conn (MHD_CONNECTION_NOTIFY_CLOSED) */
        }
        http_probe_free(s->probe);
        sd_event_source_disable_unref(s->request_timer);
        sd_event_source_disable_unref(s->io);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->kick);
        free(s->requests_total);
        free(s);
        return NULL;
}

bool http_server_socket_activated(const HttpServer *s)
{
        return s->socket_activated;
}

const char *http_server_address(const HttpServer *s)
{
        return s->address;
}

unsigned http_server_profiles_in_flight(const HttpServer *s)
{
        return s->n_profiles;
}

bool http_server_responsive(const HttpServer *s, char *why, size_t size)
{
        return !s || http_probe_responsive(s->probe, why, size);
}
