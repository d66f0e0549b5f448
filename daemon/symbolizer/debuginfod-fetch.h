/* SPDX-License-Identifier: GPL-2.0-only */
/* Debug files fetched by build ID from debuginfod servers (elfutils' libdebuginfod), for files
 * profd found no symbols or DWARF for on the host. The event loop side: which build IDs to ask
 * for (each once; a failed one again only after DEBUGINFOD_RETRY_NS), checking what came back (an
 * ELF file with the very build ID asked for, else removed and counted), the cache directory's size
 * bound, metrics. The fetches themselves run in debuginfod-worker.c's threads; a profile never
 * waits for one: frames are named from the first lookup after the file arrived. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

/* A build ID that could not be fetched (not found, timeout, a wrong or broken file) is not asked
 * for again for this long; libdebuginfod keeps its own "not found" marks for as long. */
#define DEBUGINFOD_RETRY_NS (600ULL * 1000000000ULL)
/* Build IDs remembered (asked, fetched, failed); past this the oldest entry is replaced. */
#define DEBUGINFOD_RECENT_MAX 4096
/* Files of the cache directory considered by one size check; more are left alone (and counted). */
#define DEBUGINFOD_CACHE_MAX_FILES 8192

typedef struct DebuginfodOptions {
        const char *urls;         /* DEBUGINFOD_URLS syntax: space-separated; NULL or "": off */
        const char *cache_dir;    /* NULL: $CACHE_DIRECTORY/debuginfod, else /var/cache/profd/debuginfod */
        uint64_t cache_max_bytes; /* files over it are evicted, oldest fetched first */
        uint64_t timeout_ns;      /* one fetch, start to end */
} DebuginfodOptions;

typedef struct DebuginfodFetch DebuginfodFetch;

/* Called from the loop when a debug file with this build ID was fetched and checked. */
typedef void (*DebuginfodReadyFn)(void *userdata, const uint8_t *build_id, size_t size);

int debuginfod_fetch_new(sd_event *event, const DebuginfodOptions *o, DebuginfodReadyFn ready,
                         void *userdata, DebuginfodFetch **ret);
DebuginfodFetch *debuginfod_fetch_free(DebuginfodFetch *f);
/* Asks for the debug file of build ID id unless it was asked for recently; never waits. */
void debuginfod_fetch_request(DebuginfodFetch *f, const uint8_t *id, size_t size);
/* The directory fetched files are in, as DIR/HEXID/debuginfo. */
const char *debuginfod_fetch_cache_dir(const DebuginfodFetch *f);
/* NULL-safe: zeros when debuginfod is off. */
void debuginfod_fetch_write_metrics(const DebuginfodFetch *f, FILE *out);
