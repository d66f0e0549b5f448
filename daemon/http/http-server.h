/* SPDX-License-Identifier: GPL-2.0-only */
/* HTTP on libmicrohttpd in external-event mode: MHD's epoll fd is an sd-event IO source, its
 * timeout an sd-event timer, so requests are served by the daemon's one loop. Profile requests
 * are suspended connections while their window runs and while their result is built step by step
 * from a low-priority source. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util/macro.h"

typedef struct Daemon Daemon;
typedef struct HttpServer HttpServer;

/* The whole /metrics exposition into a malloc()ed buffer: metrics_render() (http/metrics.h), given
 * by the creator so that the server, which metrics.c asks for its own families, calls nothing of
 * it. */
typedef int (*http_metrics_render_t)(Daemon *d, char **ret_text, size_t *ret_size);

/* Listens on the socket passed by systemd (sd_listen_fds) if there is one, else on
 * d->options.http_address, and registers with d->event. /metrics is rendered by render_metrics. */
int http_server_new(Daemon *d, http_metrics_render_t render_metrics, HttpServer **ret);
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
