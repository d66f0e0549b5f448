/* SPDX-License-Identifier: GPL-2.0-only */
/* GET /metrics: Prometheus text format (0.0.4), every name prefixed profd_. Each component writes
 * its own families through its *_write_metrics(FILE *). */
#pragma once

#include <stddef.h>

typedef struct Daemon Daemon;

/* The whole exposition into a malloc()ed buffer. */
int metrics_render(Daemon *d, char **ret_text, size_t *ret_size);
