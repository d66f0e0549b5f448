/* SPDX-License-Identifier: GPL-2.0-only */
/* Connections of the HTTP server, from accept to close: the per-client limit, the request timeout
 * (a sorted list of deadlines and one timer), the watch on the client's end of the socket, and the
 * parking of connections whose profile request waits suspended. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon.h"
#include "http/http-conn.h"
#include "http/http-probe.h"
#include "http/http-server-internal.h"
#include "http/http-tls.h"
#include "util/log.h"
#include "util/sockaddr-util.h"

static uint64_t server_now(const HttpServer *s)
{
        uint64_t now = 0;
        (void)sd_event_now(s->daemon->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void request_timer_arm(HttpServer *s)
{
        int r = 0;
        if (!s->awaiting_head)
                r = sd_event_source_set_enabled(s->request_timer, SD_EVENT_OFF);
        else {
                r = sd_event_source_set_time(s->request_timer, s->awaiting_head->request_deadline);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->request_timer, SD_EVENT_ONESHOT);
        }
        if (r < 0)
                log_warning_errno_ratelimited(r, "Cannot arm the HTTP request timeout timer: %m");
}

static void conn_update_watch(Conn *c)
{
        if (c->watch)
                (void)sd_event_source_set_enabled(c->watch, c->request_deadline || c->parked ? SD_EVENT_ON
                                                                                             : SD_EVENT_OFF);
}

/* The request is in (answered or parked): the request timeout no longer applies. The timer is
 * re-armed lazily, when it fires. */
void conn_stop_awaiting(Conn *c)
{
        HttpServer *s;
        if (!c || c->request_deadline == 0)
                return;
        s = c->server;
        if (c->await_prev)
                c->await_prev->await_next = c->await_next;
        else
                s->awaiting_head = c->await_next;
        if (c->await_next)
                c->await_next->await_prev = c->await_prev;
        else
                s->awaiting_tail = c->await_prev;
        c->await_prev = c->await_next = NULL;
        c->request_deadline = 0;
        conn_update_watch(c);
}

/* A new connection, or one kept alive after a response: the next request must be complete within
 * HTTP_REQUEST_TIMEOUT_USEC. Deadlines are now + a constant, so appending keeps the list sorted. */
void conn_await_request(Conn *c)
{
        HttpServer *s = c->server;
        conn_stop_awaiting(c);
        c->request_deadline = server_now(s) + HTTP_REQUEST_TIMEOUT_USEC;
        c->await_prev = s->awaiting_tail;
        if (s->awaiting_tail)
                s->awaiting_tail->await_next = c;
        else
                s->awaiting_head = c;
        s->awaiting_tail = c;
        if (s->awaiting_head == c)
                request_timer_arm(s);
        conn_update_watch(c);
}

/* A profile request waits with its connection suspended (parked), out of MHD's sight. */
void conn_park(Conn *c, Request *req, void (*cancel)(Request *req))
{
        if (!c)
                return;
        conn_stop_awaiting(c);
        c->parked = req;
        c->cancel = cancel;
        conn_update_watch(c);
}

void conn_unpark(Conn *c)
{
        if (!c)
                return;
        c->parked = NULL;
        conn_update_watch(c);
}

/* EPOLLRDHUP on the client's socket: it closed, or shut down its side (which libmicrohttpd treats
 * the same). Watched by the daemon because libmicrohttpd may not see it:
 * - a parked connection is out of MHD's epoll set, so its client leaving would be noticed only
 *   when the window ends and the profile is built: the slot would stay taken, the work be done for
 *   nobody;
 * - MHD 0.9.75 takes a short read as "drained" and waits for the next edge of its edge-triggered
 *   epoll, but when the end of the stream came in together with a partial request there is no
 *   next edge: the connection would wait for its timeout.
 * Lower priority than MHD's own events, so that MHD reads whatever is complete first. */
static int on_conn_hangup(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        Conn *c = userdata;

        if (c->parked)
                c->cancel(c->parked);
        else if (c->request_deadline) {
                conn_stop_awaiting(c);
                /* As for the request timeout: MHD sees the end on its next run and closes. */
                (void)shutdown(c->fd, SHUT_RDWR);
        }
        conn_update_watch(c);
        return 0;
}

int http_conn_on_request_timeout(sd_event_source *es, uint64_t usec, void *userdata)
{
        HttpServer *s = userdata;
        uint64_t now = server_now(s);

        while (s->awaiting_head && s->awaiting_head->request_deadline <= now) {
                Conn *c = s->awaiting_head;
                conn_stop_awaiting(c);
                s->request_timeouts_total++;
                /* The fd stays MHD's: shutdown() ends the connection without closing it, MHD sees the
                 * hangup on its next run and closes it as if the client had gone. */
                if (shutdown(c->fd, SHUT_RDWR) < 0)
                        log_debug_errno(-errno, "Cannot shut down a timed-out HTTP connection: %m");
        }
        request_timer_arm(s);
        return 0;
}

/* How many connections the client at key holds. A scan: at most --http-max-connections. */
static unsigned conns_of_client(const HttpServer *s, const uint8_t key[16])
{
        unsigned n = 0;
        for (const Conn *c = s->conns; c; c = c->next)
                if (c->has_client && !c->probe && memcmp(c->client, key, 16) == 0)
                        n++;
        return n;
}

/* MHD_OPTION_ACCEPT_POLICY_CALLBACK: the per-client limit. Done here rather than with
 * MHD_OPTION_PER_IP_CONNECTION_LIMIT so that refusals are counted, and so that the liveness probe,
 * which comes from a loopback address any local client can also use, is never refused by it. */
enum MHD_Result http_conn_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        HttpServer *s = cls;
        uint8_t key[16];
        uint16_t port;

        if (s->per_client_limit == 0 || !sockaddr_ip_key(addr, addrlen, key, &port) ||
            http_probe_is_peer(s->probe, addr, addrlen))
                return MHD_YES;
        if (conns_of_client(s, key) < s->per_client_limit)
                return MHD_YES;
        s->refused_per_client_total++;
        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_DEBUG, 0,
                                   "Refusing an HTTP connection: the client holds %u already "
                                   "(--http-max-connections-per-client)",
                                   s->per_client_limit);
        return MHD_NO;
}

/* MHD_OPTION_NOTIFY_CONNECTION. */
void http_conn_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                             enum MHD_ConnectionNotificationCode code)
{
        HttpServer *s = cls;
        Conn *c = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fd_info =
                        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *addr_info =
                        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                uint16_t port;

                c = calloc(1, sizeof(Conn));
                if (!c) {
                        /* Not tracked, so no request timeout: end it now rather than risk a
                         * connection nothing times out. */
                        if (fd_info)
                                (void)shutdown(fd_info->connect_fd, SHUT_RDWR);
                        return;
                }
                c->server = s;
                c->connection = connection;
                c->fd = fd_info ? fd_info->connect_fd : -1;
                if (addr_info && addr_info->client_addr) {
                        socklen_t len = addr_info->client_addr->sa_family == AF_INET6
                                                ? sizeof(struct sockaddr_in6)
                                                : sizeof(struct sockaddr_in);
                        c->has_client = sockaddr_ip_key(addr_info->client_addr, len, c->client, &port);
                        c->probe = http_probe_is_peer(s->probe, addr_info->client_addr, len);
                }
                if (c->fd >= 0) {
                        int r = sd_event_add_io(s->daemon->event, &c->watch, c->fd, EPOLLRDHUP,
                                                on_conn_hangup, c);
                        if (r >= 0)
                                r = sd_event_source_set_priority(c->watch, SD_EVENT_PRIORITY_NORMAL + 1);
                        if (r < 0) {
                                log_warning_errno_ratelimited(
                                        r, "Cannot watch an HTTP client's connection: %m");
                                c->watch = sd_event_source_disable_unref(c->watch);
                        } else
                                (void)sd_event_source_set_description(c->watch, "http-client");
                }
                c->next = s->conns;
                if (s->conns)
                        s->conns->prev = c;
                s->conns = c;
                s->n_conns++;
                *socket_context = c;
                /* TLS: the current credentials, kept until the connection closes. */
                http_tls_connection_notify(s->daemon->tls, connection, &c->tls, code);
                conn_await_request(c);
                return;
        }

        /* MHD_CONNECTION_NOTIFY_CLOSED */
        s->conns_closed_total++;
        if (!c)
                return;
        conn_stop_awaiting(c);
        /* Before MHD closes the fd. */
        c->watch = sd_event_source_disable_unref(c->watch);
        if (c->parked)
                c->parked->conn = NULL;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        http_tls_connection_notify(s->daemon->tls, connection, &c->tls, code);
        free(c);
        *socket_context = NULL;
}
