/* SPDX-License-Identifier: GPL-2.0-only */
/* libmicrohttpd runs in external-event mode inside the daemon's sd-event loop, the way systemd's
 * journal-remote does it: MHD_USE_EPOLL gives one epoll fd that becomes readable whenever MHD has
 * work, and MHD_get_timeout() says when it next needs to run for connection timeouts.
 *
 * A profile request: the access handler cuts the sampler (t0) and suspends the connection; a
 * timer N s later cuts again (t1); once the interval ending at t1 has been drained the window
 * [t0, t1) is merged, and the renderer builds the body one bounded step per loop iteration from an
 * idle-priority source, so drains, other requests and /metrics keep flowing; then the connection is
 * resumed and the handler queues the response.
 *
 * A past window (?start=, ?end=) skips the cuts: it is moved to the nearest interval boundaries
 * the history holds and built at once (after the next drain if it ends within the last one). */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "daemon.h"
#include "http/http-auth.h"
#include "http/http-probe.h"
#include "http/http-server.h"
#include "http/http-tls.h"
#include "util/log.h"
#include "http/metrics.h"
#include "output/pprof-encode.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "tracker/proc-tracker.h"
#include "util/sockaddr-util.h"
#include "output/symbol-warmer.h"
#include "util/timestamp.h"

/* Each connection costs a file descriptor and up to 32 KiB (libmicrohttpd's default
 * MHD_OPTION_CONNECTION_MEMORY_LIMIT); scrapers use one or two. Waiting profile requests hold a
 * connection each, so the limit (--http-max-connections) is at least --max-concurrent-profiles +
 * this, leaving room for the 503s, /metrics and /healthz. At the limit libmicrohttpd stops
 * accepting: new clients wait in the listen queue until a connection ends. One client address
 * may hold --http-max-connections-per-client of them, so that it takes a crowd of addresses, not
 * one port scanner or broken scraper, to fill the rest. */
#define HTTP_CONNECTIONS_BESIDES_PROFILES 32
/* A client must deliver a whole request within this, counted from connecting or from the end of
 * its previous response on a kept-alive connection: idle connections, half-sent requests and
 * requests trickled a byte at a time all end here (closed without an answer, counted). It keeps
 * a crowd of such clients from holding the connection limit for long. */
#define HTTP_REQUEST_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define HTTP_REQUEST_TIMER_ACCURACY_USEC (100 * 1000)
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
/* How precisely the end of a window is timed. The window itself is exact either way: it is the
 * span between two cuts whatever the timer's slack. */
#define WINDOW_TIMER_ACCURACY_USEC 1000
#define DEFAULT_PROFILE_SECONDS 30
/* A cut made while the previous one is still being drained returns that previous boundary: exact,
 * but if the loop was held meanwhile it can be far from "now", and a window would start or end
 * early by as much. Older than this, wait for that drain and cut again. (The sampler drains a cut
 * about 10 ms after it.) */
#define CUT_MAX_AGE_NS (50 * 1000 * 1000ULL)
#define CUT_MAX_RETRIES 3

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

typedef struct Conn Conn;

typedef struct Route Route;

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
        struct timespec render_start;

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

/* ---- routes ---------------------------------------------------------------------------------- */

typedef int (*route_handler_t)(HttpServer *s, Request *req);

struct Route {
        const char *path;
        const char *description; /* for the index page; NULL: not listed */
        const char *example;     /* link on the index page; NULL: path */
        route_handler_t handler;
        const ProfileRenderer *renderer; /* profile routes: default format */
};

static int route_index(HttpServer *s, Request *req);
static int route_profile(HttpServer *s, Request *req);
static int route_metrics(HttpServer *s, Request *req);
static int route_healthz(HttpServer *s, Request *req);
static int route_process(HttpServer *s, Request *req);
static int route_symbol(HttpServer *s, Request *req);

static int pprof_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        PprofOptions o = {
                .labels = q->labels,
                .cgroup_label = cgroup_resolver_label, /* unit, container_id */
                .cgroup_userdata = d->cgroups,
        };
        return pprof_job_new(w, d->symbolizer, d->processes, &o, (PprofJob **)ret_job);
}
static int pprof_step(void *job)
{
        return pprof_job_step(job);
}
static int pprof_take(void *job, void **ret_data, size_t *ret_size)
{
        return pprof_job_take_result(job, ret_data, ret_size);
}
static void pprof_free(void *job)
{
        pprof_job_free(job);
}

static const ProfileRenderer pprof_renderer = {
        .format = "pprof",
        .content_type = "application/octet-stream",
        .content_disposition = "attachment; filename=\"profile\"",
        .start = pprof_start,
        .step = pprof_step,
        .take_result = pprof_take,
        .free = pprof_free,
};

static int folded_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        return folded_job_new(w, d->symbolizer, d->processes, (FoldedJob **)ret_job);
}
static int folded_step(void *job)
{
        return folded_job_step(job);
}
static int folded_take(void *job, void **ret_data, size_t *ret_size)
{
        return folded_job_take_text(job, ret_data, ret_size);
}
static void folded_free(void *job)
{
        folded_job_free(job);
}

static const ProfileRenderer folded_renderer = {
        .format = "folded",
        .content_type = "text/plain; charset=utf-8",
        .start = folded_start,
        .step = folded_step,
        .take_result = folded_take,
        .free = folded_free,
};

static int flamegraph_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        char host[256] = "", filters[1024], title[400], subtitle[1400], when[64];
        time_t t0 = (time_t)(w->start_ns / NSEC_PER_SEC);
        struct tm tm;

        (void)gethostname(host, sizeof(host) - 1);
        sample_filter_describe(&q->filter, filters, sizeof(filters));
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t0, &tm));
        snprintf(title, sizeof(title), "CPU flame graph of %s", host[0] ? host : "this host");
        snprintf(subtitle, sizeof(subtitle), "%u s from %s at %u Hz per CPU, %" PRIu64 " samples%s%s",
                 q->seconds, when, w->frequency_hz, w->total, filters[0] ? "; filters: " : "", filters);
        FlamegraphInfo info = {.title = title, .subtitle = subtitle};
        return flamegraph_job_new(w, d->symbolizer, d->processes, &info, (FlamegraphJob **)ret_job);
}
static int flamegraph_step(void *job)
{
        return flamegraph_job_step(job);
}
static int flamegraph_take(void *job, void **ret_data, size_t *ret_size)
{
        return flamegraph_job_take_result(job, ret_data, ret_size);
}
static void flamegraph_free(void *job)
{
        flamegraph_job_free(job);
}

static const ProfileRenderer flamegraph_renderer = {
        .format = "flamegraph",
        .content_type = "text/html; charset=utf-8",
        .start = flamegraph_start,
        .step = flamegraph_step,
        .take_result = flamegraph_take,
        .free = flamegraph_free,
};

/* ?format= values. */
static const ProfileRenderer *const renderers[] = {
        &pprof_renderer,
        &folded_renderer,
        &flamegraph_renderer,
};

static const Route routes[] = {
        {"/debug/pprof/profile",
         "CPU profile of the next N seconds, gzipped pprof (seconds=N, default 30; labels=LIST; "
         "filters pid=, comm=, unit=; format=folded for folded stacks; start=, end= for a past "
         "window from the history)",
         "/debug/pprof/profile?seconds=30", route_profile, &pprof_renderer},
        {"/debug/pprof/flamegraph",
         "Interactive flame graph page of the next N seconds (same parameters as profile)",
         "/debug/pprof/flamegraph?seconds=30", route_profile, &flamegraph_renderer},
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
#define N_ROUTES ELEMENTSOF(routes)
#define ROUTE_UNKNOWN N_ROUTES /* counter row for paths no route matches */

/* The counter row of a route: routes that are one endpoint under two spellings (/debug/pprof and
 * /debug/pprof/) share the row of the first, so each endpoint is one series. */
static size_t route_counter_row(const Route *route)
{
        if (!route)
                return ROUTE_UNKNOWN;
        for (size_t i = 0; i < N_ROUTES; i++)
                if (routes[i].handler == route->handler && routes[i].renderer == route->renderer)
                        return i;
        return (size_t)(route - routes);
}

static const Route *route_find(const char *url)
{
        for (size_t i = 0; i < N_ROUTES; i++)
                if (strcmp(url, routes[i].path) == 0)
                        return &routes[i];
        return NULL;
}

/* ---- connections ------------------------------------------------------------------------------- */

/* One accepted connection (MHD's socket context), from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED. */
struct Conn {
        /* First: http-tls.c reaches it through MHD's socket context (see http-tls.h). */
        void *tls;                 /* TLS: the credentials this connection was given */
        HttpServer *server;
        struct MHD_Connection *connection;
        int fd;                    /* MHD's: never closed here */
        uint8_t client[16];        /* sockaddr_ip_key() */
        bool has_client;           /* false for AF_UNIX clients, which have no address */
        bool probe;                /* the liveness probe's connection */
        uint64_t request_deadline; /* CLOCK_MONOTONIC usec; 0 while no request is awaited */
        Request *parked;           /* its suspended profile request */
        sd_event_source *watch;    /* the client's end, while awaiting a request or parked */
        Conn *prev, *next;         /* server->conns */
        Conn *await_prev, *await_next;
};
_Static_assert(offsetof(Conn, tls) == 0, "http-tls.c finds a connection's credentials first in Conn");

static void request_cancel(Request *req);

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
static void conn_stop_awaiting(Conn *c)
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
static void conn_await_request(Conn *c)
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
static void conn_park(Conn *c, Request *req)
{
        if (!c)
                return;
        conn_stop_awaiting(c);
        c->parked = req;
        conn_update_watch(c);
}

static void conn_unpark(Conn *c)
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
                request_cancel(c->parked);
        else if (c->request_deadline) {
                conn_stop_awaiting(c);
                /* As for the request timeout: MHD sees the end on its next run and closes. */
                (void)shutdown(c->fd, SHUT_RDWR);
        }
        conn_update_watch(c);
        return 0;
}

static int on_request_timeout(sd_event_source *es, uint64_t usec, void *userdata)
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
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
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
static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
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

static enum MHD_Result queue(Request *req, unsigned status, void *body, size_t size,
                             const char *content_type, const char *disposition, bool error)
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

static enum MHD_Result queue_text(Request *req, unsigned status, const char *content_type, bool error,
                                  const char *fmt, ...) _printf_(5, 6);
static enum MHD_Result queue_text(Request *req, unsigned status, const char *content_type, bool error,
                                  const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0)
                return MHD_NO;
        return queue(req, status, text, (size_t)n, content_type, NULL, error);
}

/* One line, text/plain, X-Go-Pprof: 1. */
#define queue_error(req, status, ...) queue_text(req, status, "text/plain; charset=utf-8", true, __VA_ARGS__)

/* For the asynchronous path: remember the answer, then resume so the handler queues it. */
static void request_set_error(Request *req, unsigned status, const char *fmt, ...) _printf_(3, 4);
static void request_set_error(Request *req, unsigned status, const char *fmt, ...)
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

/* Let MHD run on the next loop iteration (after a resume: the handler must be called again). */
static void http_kick(HttpServer *s)
{
        if (s->kick)
                (void)sd_event_source_set_enabled(s->kick, SD_EVENT_ONESHOT);
}

/* ---- profile requests -------------------------------------------------------------------------- */

static void profile_release_slot(Request *req)
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

static void profile_stop_work(Request *req)
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

static void profile_finish(Request *req)
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
static void request_cancel(Request *req)
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
static void profiles_reap_gone(HttpServer *s)
{
        Request *next;
        for (Request *req = s->profiles; req; req = next) {
                next = req->next;
                if (!req->conn || req->conn->parked != req)
                        continue;
                struct pollfd pfd = {.fd = req->conn->fd, .events = POLLRDHUP};
                if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        request_cancel(req);
        }
}

static int on_profile_step(sd_event_source *es, void *userdata)
{
        Request *req = userdata;
        HttpServer *s = req->server;
        const ProfileRenderer *rd = req->query.renderer;

        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        s->render_steps_total++;
        int r = rd->step(req->job);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double step = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
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
                        struct timespec now;
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        double secs = (double)(now.tv_sec - req->render_start.tv_sec) +
                                      (double)(now.tv_nsec - req->render_start.tv_nsec) / 1e9;
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
                request_set_error(req, 500, "building the profile failed: %s\n", strerror(-r));
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
        int r = aggregator_window(d->aggregator, req->t0, req->t1, &w);
        if (r < 0) {
                log_warning_errno_ratelimited(r, "Profile window [%.3f, %.3f) is not available: %m",
                                              req->t0 / 1e9, req->t1 / 1e9);
                request_set_error(req, r == -ENODATA ? 503 : 500,
                                  "the samples of this window are not available (%s)\n", strerror(-r));
                profile_finish(req);
                return;
        }
        s->profile_samples_total += w->total;
        /* Per-request filters (?pid=, ?comm=, ?unit=), before rendering. */
        r = profile_window_filter(w, &req->query.filter, d->cgroups, req->t1);
        if (r < 0) {
                profile_window_free(w);
                request_set_error(req, 500, "filtering the profile failed: %s\n", strerror(-r));
                profile_finish(req);
                return;
        }

        req->state = REQUEST_RENDER;
        clock_gettime(CLOCK_MONOTONIC, &req->render_start);
        r = req->query.renderer->start(d, w, &req->query, &req->job);
        if (r < 0) {
                req->job = NULL;
                log_warning_errno_ratelimited(r, "Starting a %s profile failed: %m",
                                              req->query.renderer->format);
                request_set_error(req, 500, "building the profile failed: %s\n", strerror(-r));
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
                request_set_error(req, 500, "cannot schedule the profile build\n");
                profile_finish(req);
        }
}

/* A past window's end is drained: move it to interval boundaries and build it. */
static void on_past_drained(void *userdata)
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
                request_set_error(req, 400,
                                  "start: the window is older than the history kept (available: %s to %s)\n",
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

static uint64_t now_realtime_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static int on_window_end(sd_event_source *es, uint64_t usec, void *userdata);
static void profile_cut(Request *req);

static void on_cut_drained(void *userdata)
{
        Request *req = userdata;
        req->wait = NULL;
        profile_cut(req);
}

/* Starts the window (REQUEST_START) or ends it (REQUEST_END) at a fresh cut. */
static void profile_cut(Request *req)
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
                request_set_error(req, 500, "cutting the sample stream failed: %s\n", strerror(-r));
                profile_finish(req);
                return;
        }
        uint64_t now = now_realtime_ns();
        if (now > t + CUT_MAX_AGE_NS && req->cut_retries < CUT_MAX_RETRIES) {
                req->cut_retries++;
                s->cuts_retried_total++;
                r = aggregator_wait_for(d->aggregator, t, on_cut_drained, req, &req->wait);
                if (r < 0) {
                        request_set_error(req, 500, "out of memory\n");
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
                        request_set_error(req, 500, "cannot arm the window timer: %s\n", strerror(-r));
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
                request_set_error(req, 500, "out of memory\n");
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

/* ---- query parameters ---------------------------------------------------------------------------- */

typedef struct QueryParam {
        const char *name;
        /* On failure, writes a one-line reason into err. */
        int (*parse)(HttpServer *s, const char *value, ProfileQuery *q, char *err, size_t errlen);
} QueryParam;

static int param_seconds(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        unsigned max = s->daemon->options.max_seconds;
        if (!v || !*v) {
                snprintf(err, errlen, "seconds: expected an integer from 1 to %u", max);
                return -EINVAL;
        }
        unsigned long long n = 0;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9') {
                        snprintf(err, errlen, "seconds: '%.32s' is not an integer from 1 to %u", v, max);
                        return -EINVAL;
                }
                n = n * 10 + (unsigned)(*p - '0');
                if (n > max)
                        break;
        }
        if (n == 0) {
                snprintf(err, errlen, "seconds: must be at least 1, got '%.32s'", v);
                return -EINVAL;
        }
        if (n > max) {
                snprintf(err, errlen, "seconds: %.32s exceeds the maximum of %u (--max-seconds)", v, max);
                return -EINVAL;
        }
        q->seconds = (unsigned)n;
        q->has_seconds = true;
        return 0;
}

static int param_time(const char *name, const char *v, uint64_t *ret, char *err, size_t errlen)
{
        if (timestamp_parse(v, ret) < 0) {
                snprintf(err, errlen,
                         "%s: '%.40s' is not a time: expected RFC 3339 (2006-01-02T15:04:05Z, "
                         "2006-01-02T15:04:05.5+01:00) or unix seconds",
                         name, v ?: "");
                return -EINVAL;
        }
        return 0;
}
static int param_start(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        q->has_start = true;
        return param_time("start", v, &q->start_ns, err, errlen);
}
static int param_end(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        q->has_end = true;
        return param_time("end", v, &q->end_ns, err, errlen);
}

static int param_labels(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        const char *bad = NULL;
        if (label_set_parse(v ?: "", &q->labels, &bad) < 0) {
                snprintf(err, errlen,
                         "labels: unknown label '%s' (known: comm, pid, tid, thread_name, unit, "
                         "container_id)",
                         bad ?: "");
                return -EINVAL;
        }
        return 0;
}

static int param_format(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        for (size_t i = 0; i < ELEMENTSOF(renderers); i++)
                if (v && strcmp(v, renderers[i]->format) == 0) {
                        q->renderer = renderers[i];
                        return 0;
                }
        snprintf(err, errlen, "format: unknown format '%.32s'", v ?: "");
        return -EINVAL;
}

static int param_filter(const char *kind, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        return sample_filter_add(&q->filter, kind, v, err, errlen);
}
static int param_pid(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        return param_filter("pid", v, q, err, errlen);
}
static int param_comm(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        return param_filter("comm", v, q, err, errlen);
}
static int param_unit(HttpServer *s, const char *v, ProfileQuery *q, char *err, size_t errlen)
{
        return param_filter("unit", v, q, err, errlen);
}

/* One parameter per line, so adding one is a one-line change. */
/* clang-format off */
static const QueryParam profile_params[] = {
        {"seconds", param_seconds},
        {"start", param_start},
        {"end", param_end},
        {"labels", param_labels},
        {"format", param_format},
        {"pid", param_pid},
        {"comm", param_comm},
        {"unit", param_unit},
};
/* clang-format on */

typedef struct ParseState {
        HttpServer *server;
        ProfileQuery *query;
        char err[256];
        int r;
} ParseState;

static enum MHD_Result parse_one(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        ParseState *st = cls;
        for (size_t i = 0; i < ELEMENTSOF(profile_params); i++)
                if (strcmp(key, profile_params[i].name) == 0) {
                        st->r = profile_params[i].parse(st->server, value, st->query, st->err,
                                                        sizeof(st->err));
                        return st->r < 0 ? MHD_NO : MHD_YES;
                }
        /* Rejected rather than ignored: a misspelt filter would otherwise silently profile everything. */
        snprintf(st->err, sizeof(st->err),
                 "unknown parameter '%.64s' (known: seconds, start, end, labels, format, pid, comm, unit)",
                 key);
        st->r = -EINVAL;
        return MHD_NO;
}

static int profile_query_parse(HttpServer *s, Request *req, char *err, size_t errlen)
{
        ProfileQuery *q = &req->query;
        *q = (ProfileQuery){
                .seconds = DEFAULT_PROFILE_SECONDS < s->daemon->options.max_seconds
                                   ? DEFAULT_PROFILE_SECONDS
                                   : s->daemon->options.max_seconds,
                .labels = s->daemon->options.labels,
                .renderer = req->route->renderer,
        };
        ParseState st = {.server = s, .query = q};
        MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, parse_one, &st);
        if (st.r < 0) {
                snprintf(err, errlen, "%s", st.err);
                return st.r;
        }
        return 0;
}

/* ?start= / ?end=: the window asked, checked against now and the history held. */
static int profile_past_window(HttpServer *s, ProfileQuery *q, char *err, size_t errlen)
{
        unsigned max = s->daemon->options.max_seconds;
        uint64_t now = now_realtime_ns(), oldest, latest;
        char a[TIMESTAMP_MAX], b[TIMESTAMP_MAX];

        if (q->has_start && q->has_end && q->has_seconds) {
                snprintf(err, errlen, "give at most two of start, end and seconds");
                return -EINVAL;
        }
        if (q->has_start && !q->has_end)
                q->end_ns = q->start_ns + (uint64_t)q->seconds * NSEC_PER_SEC;
        else if (q->has_end && !q->has_start) {
                uint64_t len = (uint64_t)q->seconds * NSEC_PER_SEC;
                q->start_ns = q->end_ns > len ? q->end_ns - len : 0;
        }
        if (q->end_ns <= q->start_ns) {
                snprintf(err, errlen, "end must be after start");
                return -EINVAL;
        }
        if (q->end_ns - q->start_ns > (uint64_t)max * NSEC_PER_SEC) {
                snprintf(err, errlen, "the window is %.3f s long: at most %u s (--max-seconds)",
                         (double)(q->end_ns - q->start_ns) / 1e9, max);
                return -EINVAL;
        }
        if (q->end_ns > now) {
                timestamp_format(q->end_ns, a, sizeof(a));
                timestamp_format(now, b, sizeof(b));
                snprintf(err, errlen,
                         "the window ends in the future (%s; now is %s): past windows only, or no "
                         "start= and end= for one that starts now",
                         a, b);
                return -EINVAL;
        }
        aggregator_span(s->daemon->aggregator, &oldest, &latest);
        if (oldest == 0 || q->start_ns < oldest) {
                timestamp_format(q->start_ns, a, sizeof(a));
                if (oldest == 0)
                        snprintf(err, errlen, "start %s: no history is held yet", a);
                else {
                        char c[TIMESTAMP_MAX];
                        timestamp_format(oldest, b, sizeof(b));
                        timestamp_format(latest, c, sizeof(c));
                        snprintf(err, errlen,
                                 "start %s is older than the history kept: available from %s to %s", a, b,
                                 c);
                }
                return -ERANGE;
        }
        return 0;
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
        past = req->query.has_start || req->query.has_end;
        if (past && profile_past_window(s, &req->query, err, sizeof(err)) < 0)
                return queue_error(req, 400, "%s\n", err);
        if (s->n_profiles >= d->options.max_concurrent_profiles)
                profiles_reap_gone(s);
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
        conn_park(req->conn, req); /* watches for the client leaving meanwhile */
        if (past) {
                /* Ending within the interval being collected: built after its drain (< 1 s). */
                req->state = REQUEST_DRAIN;
                if (aggregator_wait_for(d->aggregator, req->query.end_ns, on_past_drained, req, &req->wait) <
                    0) {
                        request_set_error(req, 500, "out of memory\n");
                        profile_finish(req);
                }
                return MHD_YES;
        }
        req->state = REQUEST_START;
        profile_cut(req);
        return MHD_YES;
}

/* ---- other endpoints ----------------------------------------------------------------------------- */

static int route_healthz(HttpServer *s, Request *req)
{
        if (s->daemon->sampler && sampler_is_live(s->daemon->sampler))
                return queue_text(req, 200, "text/plain; charset=utf-8", false, "ok\n");
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
        return queue(req, 200, TAKE_PTR(buf), size, "text/plain; charset=utf-8", NULL, false);
}

/* go tool pprof, given a profile URL, POSTs the addresses of frames without a function to
 * .../symbol before it shows anything, and gives up if that fails. profd named in the profile every
 * frame it could; the rest is for the reader's debug files (docs/symbolization.md). So the answer
 * is net/http/pprof's "no symbols here"; the addresses posted are not looked at. */
static int route_symbol(HttpServer *s, Request *req)
{
        (void)s;
        return queue_text(req, 200, "text/plain; charset=utf-8", false, "num_symbols: 0\n");
}

static int route_metrics(HttpServer *s, Request *req)
{
        char *text = NULL;
        size_t size = 0;
        int r = metrics_render(s->daemon, &text, &size);
        if (r < 0)
                return queue_error(req, 500, "rendering metrics failed: %s\n", strerror(-r));
        return queue(req, 200, text, size, "text/plain; version=0.0.4; charset=utf-8", NULL, false);
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
                if (!routes[i].description)
                        continue;
                const char *href = routes[i].example ?: routes[i].path;
                fprintf(f, "<li><a href=\"%s\">%s</a> &mdash; %s</li>\n", href, routes[i].path,
                        routes[i].description);
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
        return queue(req, 200, buf, size, "text/html; charset=utf-8", NULL, false);
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
                        request_set_error(req, 500, "internal error\n");
                return queue(req, req->status ?: 500, TAKE_PTR(req->body), req->body_size,
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

int http_server_new(Daemon *d, HttpServer **ret)
{
        _cleanup_(http_server_freep) HttpServer *s = calloc(1, sizeof(HttpServer));
        _cleanup_close_ int fd = -1;
        int r;

        if (!s)
                return -ENOMEM;
        s->daemon = d;
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
                on_accept, s, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
                s, /* first, or MHD says so on stderr */
                /* TLS (http-tls.c): its options; each new connection's credentials come from
                 * on_connection. */
                MHD_OPTION_ARRAY, http_tls_mhd_options(d->tls), MHD_OPTION_LISTEN_SOCKET, fd,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_CONNECTION_LIMIT, s->connection_limit,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_SEND_TIMEOUT_S, MHD_OPTION_END);
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
                              HTTP_REQUEST_TIMER_ACCURACY_USEC, on_request_timeout, s);
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
                        log_warning_errno(r,
                                          "Cannot probe the HTTP listener on %s, its liveness is not checked: %m",
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
                                request_set_error(req, 503, "profd is shutting down\n");
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
