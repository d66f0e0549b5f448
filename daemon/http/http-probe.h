/* SPDX-License-Identifier: GPL-2.0-only */
/* The HTTP liveness probe: the daemon asks its own listening socket for /healthz, as a client
 * would, every few seconds and from its own event loop, so that "the loop runs but HTTP does not
 * answer" is noticed (the watchdog pings come from that same loop and cannot tell). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

/* One probe every interval; a probe not answered by the next one has failed. */
#define HTTP_PROBE_INTERVAL_USEC (5 * USEC_PER_SEC)
/* HTTP counts as unresponsive once probes started this long ago have all failed: longer than the
 * request timeout (10 s), after which a server that is merely full frees connections. */
#define HTTP_PROBE_UNANSWERED_MAX_USEC (30 * USEC_PER_SEC)

typedef struct HttpProbe HttpProbe;

/* Probes the address listen_fd is bound to (the loopback address of its family when it listens on
 * every address). -EAFNOSUPPORT for a socket it cannot reach (an unnamed AF_UNIX socket). */
int http_probe_new(sd_event *e, int listen_fd, HttpProbe **ret);
HttpProbe *http_probe_free(HttpProbe *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpProbe *, http_probe_free);

/* Whether a connecting client at sa is the probe in flight (the server exempts it from the
 * per-client connection limit and leaves it out of the request counters). NULL-safe. */
bool http_probe_is_peer(const HttpProbe *p, const struct sockaddr *sa, socklen_t len);

/* False, with how long HTTP has not answered in a reason line for logs, once probes have failed for
 * HTTP_PROBE_UNANSWERED_MAX_USEC; true otherwise, and until a first probe has been answered. */
bool http_probe_responsive(const HttpProbe *p, char *why, size_t size);

void http_probe_write_metrics(const HttpProbe *p, FILE *f);
