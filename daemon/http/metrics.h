/* SPDX-License-Identifier: GPL-2.0-only */
/* GET /metrics: Prometheus text format (0.0.4), every name prefixed profd_ but the standard
 * process_* families of the daemon itself. Each component writes
 * its own families through its *_write_metrics(FILE *). */
#pragma once

#include <stddef.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct Daemon Daemon;
typedef struct LoopMonitor LoopMonitor;

/* The whole exposition into a malloc()ed buffer. */
int metrics_render(Daemon *d, char **ret_text, size_t *ret_size);

/* Watches the event loop's own latency: a timer that should fire every 250 ms records how late it
 * ran. Anything that holds the loop (a long build step, a slow /proc read) shows up here, and it
 * delays drains, request cuts and answers by that much. */
int loop_monitor_new(sd_event *e, LoopMonitor **ret);
LoopMonitor *loop_monitor_free(LoopMonitor *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(LoopMonitor *, loop_monitor_free);
void loop_monitor_write_metrics(const LoopMonitor *m, FILE *f);
