/* SPDX-License-Identifier: GPL-2.0-only */
/* The parameters of a profile request (?seconds=, ?start=, ?end=, ?labels=, ?format= and the
 * filters), parsed and checked before its window starts. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/profile-renderers.h"
#include "sampler/sample-filter.h"
#include "tracker/labels.h"

typedef struct HttpServer HttpServer;
typedef struct Request Request;

/* A profile request's parameters, parsed and validated before the window starts. Filters and
 * other per-request options are added here and to the parameter table in profile-query.c. */
struct ProfileQuery {
        unsigned seconds;
        LabelSet labels;
        const ProfileRenderer *renderer;
        SampleFilter filter; /* ?pid= ?comm= ?unit= */
        /* A past window (?start=, ?end=, CLOCK_REALTIME ns) is served from the history at once;
         * without either the window starts now. */
        uint64_t start_ns, end_ns;
        bool has_start, has_end, has_seconds;
        bool off_cpu; /* the route's: an off-CPU profile */
};

/* Fills req->query from the request's parameters, on top of the defaults (--max-seconds, --labels,
 * the route's renderer). On failure, -EINVAL and a one-line reason in err. */
int profile_query_parse(HttpServer *s, Request *req, char *err, size_t errlen);
/* ?start= / ?end=: the window asked, checked against now and the history held. */
int profile_past_window(HttpServer *s, ProfileQuery *q, char *err, size_t errlen);
