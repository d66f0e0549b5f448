/* SPDX-License-Identifier: GPL-2.0-only */
/* Why a probe over a real connection and not a flag the server sets: what goes wrong is what no
 * in-process check sees. A listening socket libmicrohttpd no longer watches, an accept queue full
 * of connections that never get a slot, a connection limit held by clients that never finish: the
 * event loop runs on happily in all of them, only a client can tell. So the probe is a client,
 * connecting to the same socket every other client uses, and HTTP counts as answering when it gets
 * a status line back (any status: 503 before sampling is live is an answer).
 *
 * Everything is non-blocking from the one event loop: the connect, the request and the answer are
 * one IO source, and a probe's deadline is the next tick of the probe timer.
 *
 * The probe speaks plain HTTP. It counts for liveness only once one probe has been answered: a
 * listener it cannot talk to at all (one that wants TLS, say) must not get profd restarted in a
 * loop; that is logged instead. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "http/http-probe.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/sockaddr-util.h"

#define PROBE_TIMER_ACCURACY_USEC (100 * 1000)

typedef union SockAddr {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
        struct sockaddr_storage storage;
} SockAddr;

typedef enum ProbeResult {
        PROBE_ANSWERED,
        PROBE_TIMEOUT, /* no status line by the next tick */
        PROBE_FAILED,  /* refused, reset, closed or garbage */
        _PROBE_RESULT_MAX,
} ProbeResult;

static const char *const probe_result_names[_PROBE_RESULT_MAX] = {"answered", "timeout", "failed"};

static const char probe_request[] = "GET /healthz HTTP/1.1\r\nHost: profd\r\n"
                                    "User-Agent: profd-liveness-probe\r\nConnection: close\r\n\r\n";

struct HttpProbe {
        sd_event *event;
        sd_event_source *timer, *io;
        SockAddr target;
        socklen_t target_len;

        /* The probe in flight. */
        int fd; /* -1: none */
        SockAddr local;
        socklen_t local_len;
        uint64_t started; /* CLOCK_MONOTONIC usec */
        size_t sent;
        char answer[32];
        size_t answer_len;
        bool answered; /* status line in; the rest is read until the server closes */

        uint64_t unanswered_since; /* start of the first probe that failed since one was answered; 0: none */
        bool armed;                /* one probe has been answered: failures count */
        bool warned;
        int last_error;
        uint64_t results[_PROBE_RESULT_MAX];
};

static uint64_t probe_now(const HttpProbe *p)
{
        uint64_t now = 0;
        (void)sd_event_now(p->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* Closes the connection without counting anything. */
static void probe_close(HttpProbe *p)
{
        p->io = sd_event_source_disable_unref(p->io);
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
        p->local_len = 0;
}

static void probe_result(HttpProbe *p, ProbeResult result, int error)
{
        uint64_t now = probe_now(p);

        p->results[result]++;
        if (result == PROBE_ANSWERED) {
                p->armed = true;
                if (p->warned)
                        log_notice("HTTP answers its liveness probe again, after %.0f s",
                                   (double)(now - p->unanswered_since) / USEC_PER_SEC);
                p->unanswered_since = 0;
                p->warned = false;
                return;
        }
        p->last_error = error;
        if (p->unanswered_since == 0)
                p->unanswered_since = p->started;
        log_debug_errno(error, "HTTP liveness probe %s: %m", probe_result_names[result]);
        if (!p->warned && now - p->unanswered_since >= HTTP_PROBE_UNANSWERED_MAX_USEC) {
                p->warned = true;
                if (p->armed)
                        log_warning_errno(
                                error,
                                "HTTP has not answered its liveness probe for %.0f s (last probe: %s, %m)",
                                (double)(now - p->unanswered_since) / USEC_PER_SEC,
                                probe_result_names[result]);
                else
                        log_warning_errno(error,
                                          "HTTP has never answered its liveness probe (last probe: %s, %m); "
                                          "the watchdog does not depend on it until it does",
                                          probe_result_names[result]);
        }
}

static void probe_fail(HttpProbe *p, ProbeResult result, int error)
{
        probe_close(p);
        probe_result(p, result, error);
}

/* Sends what remains of the request, reads what the socket has; as far as it goes without
 * blocking. */
static void probe_step(HttpProbe *p)
{
        while (p->sent < sizeof(probe_request) - 1) {
                /* EAGAIN also while still connecting. */
                ssize_t n = send(p->fd, probe_request + p->sent, sizeof(probe_request) - 1 - p->sent,
                                 MSG_NOSIGNAL);
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0)
                        return probe_fail(p, PROBE_FAILED, -errno);
                p->sent += (size_t)n;
                if (p->sent == sizeof(probe_request) - 1)
                        (void)sd_event_source_set_io_events(p->io, EPOLLIN);
        }

        for (;;) {
                char buf[512];
                ssize_t n = recv(p->fd, buf, sizeof(buf), 0);
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0 || n == 0) {
                        /* Read to the end, so that closing sends no reset the server would log. */
                        int error = n < 0 ? -errno : -ECONNRESET;
                        bool answered = p->answered;
                        probe_close(p);
                        if (!answered)
                                probe_result(p, PROBE_FAILED, error);
                        return;
                }
                if (p->answered)
                        continue;
                size_t take = (size_t)n < sizeof(p->answer) - p->answer_len
                                      ? (size_t)n
                                      : sizeof(p->answer) - p->answer_len;
                memcpy(p->answer + p->answer_len, buf, take);
                p->answer_len += take;
                if (p->answer_len < 12)
                        continue;
                /* "HTTP/1.1 200": any status is an answer. */
                const char *a = p->answer;
                if (memcmp(a, "HTTP/1.", 7) != 0 || a[8] != ' ' || a[9] < '1' || a[9] > '5' || a[10] < '0' ||
                    a[10] > '9' || a[11] < '0' || a[11] > '9')
                        return probe_fail(p, PROBE_FAILED, -EBADMSG);
                p->answered = true;
                probe_result(p, PROBE_ANSWERED, 0);
        }
}

static int on_probe_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        probe_step(userdata);
        return 0;
}

static void probe_start(HttpProbe *p)
{
        _cleanup_close_ int fd =
                socket(p->target.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int r;

        p->started = probe_now(p);
        p->sent = 0;
        p->answer_len = 0;
        p->answered = false;
        if (fd < 0)
                return probe_result(p, PROBE_FAILED, -errno);
        /* An AF_UNIX listener with a full queue fails at once (EAGAIN): also an unanswered probe. */
        if (connect(fd, &p->target.sa, p->target_len) < 0 && errno != EINPROGRESS)
                return probe_result(p, PROBE_FAILED, -errno);
        p->local_len = sizeof(p->local);
        if (getsockname(fd, &p->local.sa, &p->local_len) < 0)
                p->local_len = 0;
        r = sd_event_add_io(p->event, &p->io, fd, EPOLLIN | EPOLLOUT, on_probe_io, p);
        if (r < 0) {
                p->local_len = 0;
                return probe_result(p, PROBE_FAILED, r);
        }
        (void)sd_event_source_set_description(p->io, "http-probe");
        p->fd = TAKE_FD(fd);
}

static int on_probe_tick(sd_event_source *es, uint64_t usec, void *userdata)
{
        HttpProbe *p = userdata;

        if (p->fd >= 0) {
                /* Whatever arrived in the same loop iteration as this tick still counts. */
                probe_step(p);
                if (p->fd >= 0) {
                        if (p->answered)
                                probe_close(p);
                        else
                                probe_fail(p, PROBE_TIMEOUT, -ETIMEDOUT);
                }
        }
        probe_start(p);

        /* From now, not from the planned time: after the loop was held, a probe still gets its full
         * interval. */
        int r = sd_event_source_set_time(es, probe_now(p) + HTTP_PROBE_INTERVAL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        if (r < 0)
                log_error_errno(r, "Cannot re-arm the HTTP liveness probe, HTTP is no longer checked: %m");
        return 0;
}

/* Where a client of listen_fd connects to. */
static int probe_target(int listen_fd, SockAddr *ret, socklen_t *ret_len)
{
        SockAddr a = {};
        socklen_t len = sizeof(a);

        if (getsockname(listen_fd, &a.sa, &len) < 0)
                return -errno;
        switch (a.sa.sa_family) {
        case AF_INET:
                if (a.in.sin_addr.s_addr == htonl(INADDR_ANY))
                        a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                break;
        case AF_INET6:
                if (IN6_IS_ADDR_UNSPECIFIED(&a.in6.sin6_addr)) {
                        int v6only = 1;
                        socklen_t l = sizeof(v6only);
                        (void)getsockopt(listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &l);
                        if (v6only)
                                a.in6.sin6_addr = in6addr_loopback;
                        else {
                                /* A dual-stack socket: IPv4 loopback works even where ::1 is off. */
                                in_port_t port = a.in6.sin6_port;
                                a = (SockAddr){.in = {.sin_family = AF_INET, .sin_port = port}};
                                a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                                len = sizeof(struct sockaddr_in);
                        }
                }
                break;
        case AF_UNIX:
                if (len <= offsetof(struct sockaddr_un, sun_path))
                        return -EAFNOSUPPORT; /* unnamed */
                break;
        default:
                return -EAFNOSUPPORT;
        }
        *ret = a;
        *ret_len = len;
        return 0;
}

int http_probe_new(sd_event *e, int listen_fd, HttpProbe **ret)
{
        _cleanup_(http_probe_freep) HttpProbe *p = calloc(1, sizeof(HttpProbe));
        int r;

        if (!p)
                return -ENOMEM;
        p->fd = -1;
        p->event = sd_event_ref(e);
        r = probe_target(listen_fd, &p->target, &p->target_len);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(e, &p->timer, CLOCK_MONOTONIC, HTTP_PROBE_INTERVAL_USEC,
                                       PROBE_TIMER_ACCURACY_USEC, on_probe_tick, p);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(p->timer, "http-probe-timer");
        *ret = TAKE_PTR(p);
        return 0;
}

HttpProbe *http_probe_free(HttpProbe *p)
{
        if (!p)
                return NULL;
        probe_close(p);
        sd_event_source_disable_unref(p->timer);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

bool http_probe_is_peer(const HttpProbe *p, const struct sockaddr *sa, socklen_t len)
{
        uint8_t a[16], b[16];
        uint16_t pa, pb;

        if (!p || p->fd < 0 || p->local_len == 0)
                return false;
        if (!sockaddr_ip_key(&p->local.sa, p->local_len, a, &pa) || !sockaddr_ip_key(sa, len, b, &pb))
                return false;
        return pa == pb && memcmp(a, b, sizeof(a)) == 0;
}

bool http_probe_responsive(const HttpProbe *p, char *why, size_t size)
{
        if (!p || !p->armed || p->unanswered_since == 0)
                return true;
        uint64_t now = probe_now(p), for_usec = now > p->unanswered_since ? now - p->unanswered_since : 0;
        if (for_usec < HTTP_PROBE_UNANSWERED_MAX_USEC)
                return true;
        snprintf(why, size, "HTTP has not answered its liveness probe for %.0f s (%s)",
                 (double)for_usec / USEC_PER_SEC, strerror(-p->last_error));
        return false;
}

void http_probe_write_metrics(const HttpProbe *p, FILE *f)
{
        uint64_t now = probe_now(p);
        double unanswered = p->unanswered_since && now > p->unanswered_since
                                    ? (double)(now - p->unanswered_since) / USEC_PER_SEC
                                    : 0;

        metric_labelled(f, "profd_http_probes_total", "counter",
                        "Liveness probes of the daemon's own HTTP listener (GET /healthz every 5 s), by "
                        "result.",
                        "result", probe_result_names, p->results, _PROBE_RESULT_MAX);
        metric_family(f, "profd_http_unanswered_seconds", "gauge",
                      "How long the liveness probes have gone unanswered (0 while HTTP answers).");
        metric_sample_fixed(f, "profd_http_unanswered_seconds", NULL, unanswered, 3);
}
