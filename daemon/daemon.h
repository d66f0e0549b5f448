/* SPDX-License-Identifier: GPL-2.0-only */
/* The daemon's components, wired by main.c. */
#pragma once

#include <systemd/sd-event.h>

#include "aggregator/aggregator.h"
#include "runtimes/hotspot-procs.h"
#include "runtimes/python-procs.h"
#include "runtimes/v8-procs.h"
#include "sampler/sample-filter.h"
#include "sampler/sampler.h"
#include "service/options.h"
#include "symbolizer/hotspot-symbols.h"
#include "symbolizer/python-symbols.h"
#include "symbolizer/v8-symbols.h"
#include "symbolizer/symbolizer.h"
#include "tracker/cgroup-resolver.h"
#include "tracker/process-table.h"
#include "util/memory-budget.h"

typedef struct HttpServer HttpServer;
typedef struct TablePool TablePool;
typedef struct ProcTracker ProcTracker;
typedef struct Notifier Notifier;
typedef struct LoopMonitor LoopMonitor;
typedef struct HttpTls HttpTls;
typedef struct HttpAuth HttpAuth;
typedef struct SymbolWarmer SymbolWarmer;

typedef struct Daemon {
        sd_event *event;
        Options options;
        Sampler *sampler;
        Aggregator *aggregator;
        ProcessTable *processes;
        Symbolizer *symbolizer;
        HttpServer *http;

        /* Who may scrape: the bearer token (if any) and refusal counters; TLS (NULL: plain HTTP). */
        HttpAuth *auth;
        HttpTls *tls;

        TablePool *pool;      /* BPF unwind tables; NULL: frame-pointer unwinding only */
        ProcTracker *tracker; /* keeps the pool's per-process entries current */
        PythonProcs *python;  /* processes whose CPython frames BPF walks */
        V8Procs *v8;          /* processes whose V8 (Node.js) frames BPF reads */
        V8Symbols *v8_symbols; /* names of their JavaScript frames */
        PythonSymbols *python_symbols; /* their code objects' names */
        PythonFrameIds *python_ids;    /* ids of Python frames in drained stacks */
        HotspotProcs *hotspot;         /* processes running a HotSpot JVM */
        HotspotSymbols *hotspot_symbols; /* their Java frames' names */
        CgroupResolver *cgroups;     /* NULL without a cgroup2 mount */
        CgroupFilter *cgroup_filter; /* NULL without --unit/--cgroup */
        uint64_t start_ns;
        Notifier *notifier; /* sd_notify: READY/STATUS/WATCHDOG/STOPPING */
        LoopMonitor *loop_monitor; /* event loop latency on /metrics */
        SymbolWarmer *warmer;      /* symbolizes while profile windows are open */
        MemoryBudget *budget;      /* lowers owners' bounds while RSS is over its target */
} Daemon;
