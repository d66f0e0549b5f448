/* SPDX-License-Identifier: GPL-2.0-only */
/* Query parameters of the profile routes: one parse function per parameter in a table, and the
 * checks of a past window (?start=, ?end=) against now and the history held. */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "http/http-routes.h"
#include "http/http-server-internal.h"
#include "http/profile-query.h"
#include "util/time-util.h"
#include "util/timestamp.h"

#define DEFAULT_PROFILE_SECONDS 30

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
        const ProfileRenderer *rd = v ? profile_renderer_find(v) : NULL;
        if (rd) {
                q->renderer = rd;
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

int profile_query_parse(HttpServer *s, Request *req, char *err, size_t errlen)
{
        ProfileQuery *q = &req->query;
        *q = (ProfileQuery){
                .seconds = DEFAULT_PROFILE_SECONDS < s->daemon->options.max_seconds
                                   ? DEFAULT_PROFILE_SECONDS
                                   : s->daemon->options.max_seconds,
                .labels = s->daemon->options.labels,
                .renderer = req->route->renderer,
                .off_cpu = req->route->off_cpu,
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
int profile_past_window(HttpServer *s, ProfileQuery *q, char *err, size_t errlen)
{
        unsigned max = s->daemon->options.max_seconds;
        uint64_t now = now_ns(CLOCK_REALTIME), oldest, latest;
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
