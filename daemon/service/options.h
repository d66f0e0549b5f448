/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sampler/sample-filter.h"
#include "tracker/labels.h"

typedef struct Options {
        char *http_address;    /* "[host]:port"; default ":7071" */
        unsigned frequency_hz; /* default 19 */
        unsigned max_seconds;  /* default 300 */
        LabelSet labels;       /* default comm,pid */
        char *labels_string;
        unsigned max_concurrent_profiles;         /* default 8: more get 503 */
        unsigned http_max_connections;            /* default 128, at least max_concurrent_profiles + 32 */
        unsigned http_max_connections_per_client; /* default 16; 0: no per-client limit */
        uint64_t unwind_table_memory;             /* bytes; default 256M, at least one shard */
        uint64_t process_table_memory;            /* bytes; default 32M */
        int log_level;
        SampleFilter filter; /* --pid/--comm/--unit/--cgroup, applied in BPF */
        /* HTTPS (--tls-cert and --tls-key together), client certificates (--tls-client-ca) and a
         * bearer token (--auth-token-file); NULL: off. Files are read at start and on SIGHUP. */
        char *tls_cert_file;
        char *tls_key_file;
        char *tls_client_ca_file;
        char *auth_token_file;
        bool kernel_addresses; /* --kernel-addresses: serve kernel text addresses (KASLR) */
        /* Debug files from debuginfod: --debuginfod-urls, else $DEBUGINFOD_URLS; NULL or "": off. */
        char *debuginfod_urls;
        char *debuginfod_cache; /* NULL: $CACHE_DIRECTORY/debuginfod or /var/cache/profd/debuginfod */
        uint64_t debuginfod_cache_size; /* bytes; default 2G */
        unsigned debuginfod_timeout_s;  /* one fetch; default 60 */
        bool off_cpu;                   /* --off-cpu: record where threads wait (docs/off-cpu.md) */
        unsigned off_cpu_threshold_us;  /* --off-cpu-threshold; default 1000 */
        bool python_frames;             /* CPython frames walked in BPF; --no-python-frames: off */
        bool v8_frames;                 /* V8 (Node.js) frames walked in BPF; --no-v8-frames: off */
        bool java_frames;               /* HotSpot frames walked in BPF; --no-java-frames: off */
} Options;

/* Parses argv. Returns 0 to run, 1 when --help/--version was handled (exit 0), -EINVAL after
 * printing a one-line error for bad flags (exit 2). */
int options_parse(int argc, char **argv, Options *ret);
void options_done(Options *o);
/* "128", "64K", "256M", "1G" -> bytes. */
int parse_size(const char *s, uint64_t *ret);
