/* SPDX-License-Identifier: GPL-2.0-only */
/* DEBUGINFOD_WORKERS threads (util/work-threads.h) that call libdebuginfod, which is synchronous
 * (a download can take minutes, a server can hang). They touch no daemon state: a job goes in (a
 * build ID), a result comes out (a descriptor and path in the debuginfod cache, or an error), both
 * through the locked job slots of work-threads.h, and the event loop learns of results from an
 * eventfd it watches. Everything else (checking the file, naming frames, metrics) happens in the
 * loop (debuginfod-fetch.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fetches run at once: a few, so that one slow server does not hold every other build ID, and
 * not more, since each holds a connection and libcurl's buffers. */
#define DEBUGINFOD_WORKERS 2
/* Build IDs waiting for a worker; more are refused (counted as skipped by the caller). */
#define DEBUGINFOD_QUEUE_MAX 64
/* GNU build IDs are 20 bytes (SHA-1); 64 leaves room for any other note size seen in practice. */
#define DEBUGINFOD_BUILD_ID_MAX 64

typedef struct DebuginfodJob {
        uint8_t build_id[DEBUGINFOD_BUILD_ID_MAX];
        size_t build_id_size;
        /* Results: fd >= 0 and path (malloc'd) on success, else error (negative errno). */
        int fd;
        char *path;
        int error;
        bool timed_out; /* aborted at the deadline */
        uint64_t duration_ns;
} DebuginfodJob;

typedef struct DebuginfodWorkers DebuginfodWorkers;

/* Starts the threads; the caller watches *ret_eventfd (readable when results wait). libdebuginfod
 * reads its configuration (DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH, ...) from the environment,
 * which must be set before and not changed afterwards. timeout_ns bounds each fetch. */
int debuginfod_workers_new(uint64_t timeout_ns, DebuginfodWorkers **ret, int *ret_eventfd);
/* Stops the threads (a fetch in progress is aborted within about a second) and frees all. */
DebuginfodWorkers *debuginfod_workers_free(DebuginfodWorkers *w);
/* Queues a fetch; -EAGAIN when DEBUGINFOD_QUEUE_MAX wait already. */
int debuginfod_workers_submit(DebuginfodWorkers *w, const uint8_t *build_id, size_t size);
/* Moves up to max finished jobs into ret (the caller closes fd, frees path); returns how many. */
size_t debuginfod_workers_take(DebuginfodWorkers *w, DebuginfodJob *ret, size_t max);
/* Jobs queued or running. */
size_t debuginfod_workers_pending(DebuginfodWorkers *w);
