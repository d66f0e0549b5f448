/* SPDX-License-Identifier: GPL-2.0-only */
/* The daemon's components, wired by main.c. */
#pragma once

#include <systemd/sd-event.h>

#include "aggregator.h"
#include "options.h"
#include "process-table.h"
#include "sampler.h"
#include "symbolizer.h"

typedef struct HttpServer HttpServer;

typedef struct Daemon {
        sd_event *event;
        Options options;
        Sampler *sampler;
        Aggregator *aggregator;
        ProcessTable *processes;
        Symbolizer *symbolizer;
        HttpServer *http;
        uint64_t start_ns;
} Daemon;
