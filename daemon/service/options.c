/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/types.h>
#include <string.h>

#include "bpf/profd-unwind-pool.h"
#include "service/options.h"
#include "tracker/process-table.h"
#include "util/log.h"

#define DEFAULT_HTTP_ADDRESS ":7071"
#define DEFAULT_FREQUENCY_HZ 19
#define DEFAULT_MAX_SECONDS 300
#define DEFAULT_LABELS "comm,pid"
#define DEFAULT_MAX_CONCURRENT_PROFILES 8
#define DEFAULT_HTTP_MAX_CONNECTIONS 128
#define DEFAULT_HTTP_MAX_CONNECTIONS_PER_CLIENT 16
#define DEFAULT_UNWIND_TABLE_MEMORY (256ULL << 20)
#define DEFAULT_DEBUGINFOD_CACHE_SIZE (2ULL << 30)
#define DEFAULT_DEBUGINFOD_TIMEOUT_S 60
#define MAX_DEBUGINFOD_TIMEOUT_S 3600

/* perf's own ceiling for software events is far higher, but past this the daemon's per-interval
 * work stops being "near-zero" and the drop counters would fill with counts-map-full. */
#define MAX_FREQUENCY_HZ 10000
/* A request holds its window's buckets in the history; a day is already far more than any
 * scraper asks for. */
#define MAX_MAX_SECONDS 86400
#define MAX_CONCURRENT_PROFILES_LIMIT 1024
/* Each connection is a file descriptor and up to 32 KiB of request memory; the per-client check
 * scans the open connections. */
#define HTTP_MAX_CONNECTIONS_LIMIT 4096
/* Waits shorter than the threshold are unwound with probability wait / threshold (docs/off-cpu.md);
 * the BPF draw needs it below 2^32 ns. */
#define DEFAULT_OFF_CPU_THRESHOLD_US 1000
#define MAX_OFF_CPU_THRESHOLD_US 4000000

enum {
        ARG_HTTP_ADDRESS = 0x100,
        ARG_FREQUENCY,
        ARG_MAX_SECONDS,
        ARG_LABELS,
        ARG_MAX_CONCURRENT_PROFILES,
        ARG_HTTP_MAX_CONNECTIONS,
        ARG_HTTP_MAX_CONNECTIONS_PER_CLIENT,
        ARG_UNWIND_TABLE_MEMORY,
        ARG_PROCESS_TABLE_MEMORY,
        ARG_LOG_LEVEL,
        ARG_PID,
        ARG_COMM,
        ARG_UNIT,
        ARG_CGROUP,
        ARG_VERSION,
        ARG_TLS_CERT,
        ARG_TLS_KEY,
        ARG_TLS_CLIENT_CA,
        ARG_AUTH_TOKEN_FILE,
        ARG_KERNEL_ADDRESSES,
        ARG_DEBUGINFOD_URLS,
        ARG_DEBUGINFOD_CACHE,
        ARG_DEBUGINFOD_CACHE_SIZE,
        ARG_DEBUGINFOD_TIMEOUT,
        ARG_OFF_CPU,
        ARG_OFF_CPU_THRESHOLD,
        ARG_NO_PYTHON_FRAMES,
        ARG_NO_V8_FRAMES,
        ARG_NO_JAVA_FRAMES,
};

static const struct option long_options[] = {
        {"http-address", required_argument, NULL, ARG_HTTP_ADDRESS},
        {"frequency", required_argument, NULL, ARG_FREQUENCY},
        {"max-seconds", required_argument, NULL, ARG_MAX_SECONDS},
        {"labels", required_argument, NULL, ARG_LABELS},
        {"max-concurrent-profiles", required_argument, NULL, ARG_MAX_CONCURRENT_PROFILES},
        {"http-max-connections", required_argument, NULL, ARG_HTTP_MAX_CONNECTIONS},
        {"http-max-connections-per-client", required_argument, NULL, ARG_HTTP_MAX_CONNECTIONS_PER_CLIENT},
        {"unwind-table-memory", required_argument, NULL, ARG_UNWIND_TABLE_MEMORY},
        {"process-table-memory", required_argument, NULL, ARG_PROCESS_TABLE_MEMORY},
        {"log-level", required_argument, NULL, ARG_LOG_LEVEL},
        {"pid", required_argument, NULL, ARG_PID},
        {"comm", required_argument, NULL, ARG_COMM},
        {"unit", required_argument, NULL, ARG_UNIT},
        {"cgroup", required_argument, NULL, ARG_CGROUP},
        {"tls-cert", required_argument, NULL, ARG_TLS_CERT},
        {"tls-key", required_argument, NULL, ARG_TLS_KEY},
        {"tls-client-ca", required_argument, NULL, ARG_TLS_CLIENT_CA},
        {"auth-token-file", required_argument, NULL, ARG_AUTH_TOKEN_FILE},
        {"kernel-addresses", no_argument, NULL, ARG_KERNEL_ADDRESSES},
        {"debuginfod-urls", required_argument, NULL, ARG_DEBUGINFOD_URLS},
        {"debuginfod-cache", required_argument, NULL, ARG_DEBUGINFOD_CACHE},
        {"debuginfod-cache-size", required_argument, NULL, ARG_DEBUGINFOD_CACHE_SIZE},
        {"debuginfod-timeout", required_argument, NULL, ARG_DEBUGINFOD_TIMEOUT},
        {"off-cpu", no_argument, NULL, ARG_OFF_CPU},
        {"off-cpu-threshold", required_argument, NULL, ARG_OFF_CPU_THRESHOLD},
        {"no-python-frames", no_argument, NULL, ARG_NO_PYTHON_FRAMES},
        {"no-v8-frames", no_argument, NULL, ARG_NO_V8_FRAMES},
        {"no-java-frames", no_argument, NULL, ARG_NO_JAVA_FRAMES},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, ARG_VERSION},
        {}};

static void help(void)
{
        printf("Usage: profd [OPTIONS]\n"
               "\n"
               "Continuous CPU profiler: samples every CPU with eBPF and serves pprof over HTTP.\n"
               "\n"
               "Options:\n"
               "  --http-address [HOST]:PORT  listen address (default " DEFAULT_HTTP_ADDRESS
               ": EVERY address of the\n"
               "                              host; e.g. 127.0.0.1:7071 for local scrapers only).\n"
               "                              Ignored under socket activation.\n"
               "  --tls-cert FILE             serve HTTPS with this PEM certificate (chain); needs\n"
               "  --tls-key FILE              its PEM private key (not readable by every user)\n"
               "  --tls-client-ca FILE        require client certificates signed by these PEM CAs (mTLS)\n"
               "  --auth-token-file FILE      require 'Authorization: Bearer <token>' on every endpoint\n"
               "                              but /healthz; the token is the file's content (the file\n"
               "                              must not be readable by every user). Certificates, key,\n"
               "                              CAs and token are re-read on SIGHUP.\n"
               "  --kernel-addresses          put kernel text addresses into profiles (they reveal the\n"
               "                              KASLR offset; default: kernel frames by name only)\n"
               "  --debuginfod-urls URLS      fetch debug files of stripped binaries by build ID from\n"
               "                              these debuginfod servers (space-separated; default\n"
               "                              $DEBUGINFOD_URLS; \"\": off). The servers learn the build\n"
               "                              IDs of the host's software.\n"
               "  --debuginfod-cache DIR      where fetched files are kept (default\n"
               "                              $CACHE_DIRECTORY/debuginfod, else\n"
               "                              /var/cache/profd/debuginfod)\n"
               "  --debuginfod-cache-size SIZE\n"
               "                              bound of that directory, suffix K, M or G (default 2G)\n"
               "  --debuginfod-timeout SECONDS\n"
               "                              longest one fetch may take (default 60)\n"
               "  --frequency HZ              samples per second per CPU (default %u)\n"
               "  --off-cpu                   also record where threads wait off CPU, served on\n"
               "                              /debug/pprof/offcpu (default off: costs up to ~1 us per\n"
               "                              context switch, see docs/off-cpu.md)\n"
               "  --off-cpu-threshold USEC    waits this long or longer are always unwound; shorter\n"
               "                              ones with probability wait/threshold, weighted so totals\n"
               "                              stay exact on average (default %u)\n"
               "  --no-python-frames          do not walk CPython frames: Python processes show their\n"
               "                              interpreter's native frames only\n"
               "  --no-v8-frames              do not walk V8 frames: Node.js JavaScript frames are\n"
               "                              named from perf maps (node --perf-basic-prof) only\n"
               "  --no-java-frames            do not walk HotSpot frames: JVMs show their native\n"
               "                              frames only (Java frames unnamed)\n"
               "  --max-seconds N             longest ?seconds= a profile request may ask for (default %u)\n"
               "  --labels LIST               labels on every sample, comma-separated, from comm, pid,\n"
               "                              tid, thread_name, unit, container_id (pid and tid are\n"
               "                              numeric labels)\n"
               "                              (default " DEFAULT_LABELS "; \"\" for none)\n"
               "  --max-concurrent-profiles N profile requests served at once; more get 503 (default %u)\n"
               "  --http-max-connections N    HTTP connections open at once (default %u, at least\n"
               "                              --max-concurrent-profiles + 32); more wait to be accepted\n"
               "  --http-max-connections-per-client N\n"
               "                              connections one client address may hold; more are closed\n"
               "                              at once (default %u; 0: no per-client limit)\n"
               "  --unwind-table-memory SIZE  memory for DWARF unwind tables, suffix K, M or G\n"
               "                              (default 256M; at least 4M, one shard)\n"
               "  --process-table-memory SIZE memory for the mappings of known processes, incl. exited\n"
               "                              ones kept for symbolization (default 32M; at least 1M)\n"
               "  --pid PID                   sample only this process (repeatable)\n"
               "  --comm NAME                 sample only processes or threads of this name (repeatable)\n"
               "  --unit UNIT                 sample only this systemd unit's cgroup and below, e.g.\n"
               "                              nginx.service (repeatable; follows restarts)\n"
               "  --cgroup PATH               sample only this cgroup v2 path and below (repeatable)\n"
               "                              Filters act in BPF; different kinds combine with AND.\n"
               "  --log-level LEVEL           err, warning, notice, info or debug (default info)\n"
               "  -h --help                   show this help\n"
               "     --version                show the version\n"
               "\n"
               "Endpoints (GET):\n"
               "  /debug/pprof/profile         gzipped pprof of the next N seconds; parameters:\n"
               "                                 seconds=N (default 30, at most --max-seconds)\n"
               "                                 start=TIME, end=TIME: a past window from the\n"
               "                                 history, at once (RFC 3339 or unix seconds;\n"
               "                                 two of start, end, seconds)\n"
               "                                 labels=LIST (as --labels, for this request)\n"
               "                                 pid=PID, comm=NAME, unit=UNIT (repeatable filters)\n"
               "                                 format=pprof|folded|flamegraph\n"
               "  /debug/pprof/flamegraph      flame graph page of the next N seconds (same parameters)\n"
               "  /debug/pprof/offcpu          with --off-cpu: off-CPU profile of the next N seconds,\n"
               "                               time off CPU per stack, state=blocked|preempted (same\n"
               "                               parameters)\n"
               "  /debug/pprof/                index of the endpoints\n"
               "  /metrics                     Prometheus metrics (samples, drops by reason, tables)\n"
               "  /healthz                     200 once sampling is live, 503 before\n"
               "  /debug/profd/process?pid=N   whether a process's unwind tables are in place\n"
               "  With --auth-token-file every endpoint but /healthz answers 401 without the token.\n"
               "\n"
               "Needs Linux 5.10 or newer (x86-64 or arm64, with BTF) and root or the capabilities in "
               "profd(8).\n",
               DEFAULT_FREQUENCY_HZ, DEFAULT_OFF_CPU_THRESHOLD_US, DEFAULT_MAX_SECONDS,
               DEFAULT_MAX_CONCURRENT_PROFILES, DEFAULT_HTTP_MAX_CONNECTIONS,
               DEFAULT_HTTP_MAX_CONNECTIONS_PER_CLIENT);
}

/* Strict: digits only, no sign, no trailing garbage, within [min, max]. */
static int parse_unsigned(const char *s, unsigned min, unsigned max, unsigned *ret)
{
        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || *end != 0)
                return -EINVAL;
        if (v < min || v > max)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0)
                return -ERANGE;

        unsigned shift = 0;
        switch (*end) {
        case 0:
                break;
        case 'K':
        case 'k':
                shift = 10;
                break;
        case 'M':
        case 'm':
                shift = 20;
                break;
        case 'G':
        case 'g':
                shift = 30;
                break;
        default:
                return -EINVAL;
        }
        if (*end != 0) {
                end++;
                /* Accept "256M", "256MB" and "256MiB" alike. */
                if (strcmp(end, "") != 0 && strcmp(end, "B") != 0 && strcmp(end, "iB") != 0)
                        return -EINVAL;
        }
        if (shift > 0 && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = (uint64_t)v << shift;
        return 0;
}

static int bad_value(const char *flag, const char *value, const char *why)
{
        fprintf(stderr, "profd: invalid value '%s' for --%s: %s (see --help)\n", value, flag, why);
        return -EINVAL;
}

void options_done(Options *o)
{
        if (!o)
                return;
        o->http_address = mfree(o->http_address);
        o->labels_string = mfree(o->labels_string);
        o->tls_cert_file = mfree(o->tls_cert_file);
        o->tls_key_file = mfree(o->tls_key_file);
        o->tls_client_ca_file = mfree(o->tls_client_ca_file);
        o->auth_token_file = mfree(o->auth_token_file);
        o->debuginfod_urls = mfree(o->debuginfod_urls);
        o->debuginfod_cache = mfree(o->debuginfod_cache);
}

static int set_string(char **p, const char *v)
{
        char *c = strdup(v);
        if (!c)
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

int options_parse(int argc, char **argv, Options *ret)
{
        Options o = {
                .frequency_hz = DEFAULT_FREQUENCY_HZ,
                .off_cpu_threshold_us = DEFAULT_OFF_CPU_THRESHOLD_US,
                .python_frames = true,
                .v8_frames = true,
                .java_frames = true,
                .max_seconds = DEFAULT_MAX_SECONDS,
                .max_concurrent_profiles = DEFAULT_MAX_CONCURRENT_PROFILES,
                .http_max_connections = DEFAULT_HTTP_MAX_CONNECTIONS,
                .http_max_connections_per_client = DEFAULT_HTTP_MAX_CONNECTIONS_PER_CLIENT,
                .unwind_table_memory = DEFAULT_UNWIND_TABLE_MEMORY,
                .process_table_memory = PROCESS_TABLE_DEFAULT_MEMORY,
                .log_level = LOG_INFO,
                .debuginfod_cache_size = DEFAULT_DEBUGINFOD_CACHE_SIZE,
                .debuginfod_timeout_s = DEFAULT_DEBUGINFOD_TIMEOUT_S,
        };
        int c, r;

        if (set_string(&o.http_address, DEFAULT_HTTP_ADDRESS) < 0 ||
            set_string(&o.labels_string, DEFAULT_LABELS) < 0)
                goto oom;
        (void)label_set_parse(DEFAULT_LABELS, &o.labels, NULL);

        opterr = 0; /* we print one message of our own */
        optind = 0;
        while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        options_done(&o);
                        return 1;
                case ARG_VERSION:
                        printf("profd %s\n", PROFD_VERSION);
                        options_done(&o);
                        return 1;
                case ARG_HTTP_ADDRESS: {
                        const char *colon = strrchr(optarg, ':');
                        unsigned port;
                        if (!colon || parse_unsigned(colon + 1, 1, 65535, &port) < 0) {
                                r = bad_value(
                                        "http-address", optarg,
                                        "expected [HOST]:PORT with PORT 1..65535, e.g. :7071 or [::1]:7071");
                                goto fail;
                        }
                        if (set_string(&o.http_address, optarg) < 0)
                                goto oom;
                        break;
                }
                case ARG_FREQUENCY:
                        if (parse_unsigned(optarg, 1, MAX_FREQUENCY_HZ, &o.frequency_hz) < 0) {
                                r = bad_value("frequency", optarg, "expected an integer from 1 to 10000");
                                goto fail;
                        }
                        break;
                case ARG_MAX_SECONDS:
                        if (parse_unsigned(optarg, 1, MAX_MAX_SECONDS, &o.max_seconds) < 0) {
                                r = bad_value("max-seconds", optarg, "expected an integer from 1 to 86400");
                                goto fail;
                        }
                        break;
                case ARG_LABELS: {
                        const char *bad = NULL;
                        if (label_set_parse(optarg, &o.labels, &bad) < 0) {
                                char why[160];
                                snprintf(why, sizeof(why),
                                         "unknown label '%s' (known: comm, pid, tid, thread_name, "
                                         "unit, "
                                         "container_id)",
                                         bad ?: "");
                                r = bad_value("labels", optarg, why);
                                goto fail;
                        }
                        if (set_string(&o.labels_string, optarg) < 0)
                                goto oom;
                        break;
                }
                case ARG_MAX_CONCURRENT_PROFILES:
                        if (parse_unsigned(optarg, 1, MAX_CONCURRENT_PROFILES_LIMIT,
                                           &o.max_concurrent_profiles) < 0) {
                                r = bad_value("max-concurrent-profiles", optarg,
                                              "expected an integer from 1 to 1024");
                                goto fail;
                        }
                        break;
                case ARG_HTTP_MAX_CONNECTIONS:
                        if (parse_unsigned(optarg, 1, HTTP_MAX_CONNECTIONS_LIMIT, &o.http_max_connections) <
                            0) {
                                r = bad_value("http-max-connections", optarg,
                                              "expected an integer from 1 to 4096");
                                goto fail;
                        }
                        break;
                case ARG_HTTP_MAX_CONNECTIONS_PER_CLIENT:
                        if (parse_unsigned(optarg, 0, HTTP_MAX_CONNECTIONS_LIMIT,
                                           &o.http_max_connections_per_client) < 0) {
                                r = bad_value("http-max-connections-per-client", optarg,
                                              "expected an integer from 0 (no limit) to 4096");
                                goto fail;
                        }
                        break;
                case ARG_UNWIND_TABLE_MEMORY:
                        /* Less than one shard would leave no room for any table: DWARF
                         * unwinding would be off without anyone asking for it. */
                        if (parse_size(optarg, &o.unwind_table_memory) < 0 ||
                            o.unwind_table_memory < PROFD_SHARD_BYTES) {
                                r = bad_value("unwind-table-memory", optarg,
                                              "expected a size of at least 4M (one table shard), with "
                                              "suffix K, M or G");
                                goto fail;
                        }
                        break;
                case ARG_PROCESS_TABLE_MEMORY:
                        if (parse_size(optarg, &o.process_table_memory) < 0 ||
                            o.process_table_memory < (1ULL << 20) || o.process_table_memory > (1ULL << 40)) {
                                r = bad_value("process-table-memory", optarg,
                                              "expected a size of at least 1M, with suffix K, M or G");
                                goto fail;
                        }
                        break;
                case ARG_PID:
                case ARG_COMM:
                case ARG_UNIT:
                case ARG_CGROUP: {
                        static const char *const kinds[] = {"pid", "comm", "unit", "cgroup"};
                        const char *kind = kinds[c - ARG_PID];
                        char why[160];
                        if (sample_filter_add(&o.filter, kind, optarg, why, sizeof(why)) < 0) {
                                r = bad_value(kind, optarg, why);
                                goto fail;
                        }
                        break;
                }
                case ARG_TLS_CERT:
                case ARG_TLS_KEY:
                case ARG_TLS_CLIENT_CA:
                case ARG_AUTH_TOKEN_FILE: {
                        /* In enum order. */
                        static const char *const flags[] = {"tls-cert", "tls-key", "tls-client-ca",
                                                            "auth-token-file"};
                        char **files[] = {&o.tls_cert_file, &o.tls_key_file, &o.tls_client_ca_file,
                                          &o.auth_token_file};
                        size_t i = (size_t)(c - ARG_TLS_CERT);
                        if (!*optarg) {
                                r = bad_value(flags[i], optarg, "expected a file name");
                                goto fail;
                        }
                        if (set_string(files[i], optarg) < 0)
                                goto oom;
                        break;
                }
                case ARG_OFF_CPU:
                        o.off_cpu = true;
                        break;
                case ARG_OFF_CPU_THRESHOLD:
                        if (parse_unsigned(optarg, 1, MAX_OFF_CPU_THRESHOLD_US, &o.off_cpu_threshold_us) <
                            0) {
                                r = bad_value("off-cpu-threshold", optarg,
                                              "expected microseconds from 1 to 4000000");
                                goto fail;
                        }
                        break;
                case ARG_NO_PYTHON_FRAMES:
                        o.python_frames = false;
                        break;
                case ARG_NO_V8_FRAMES:
                        o.v8_frames = false;
                        break;
                case ARG_NO_JAVA_FRAMES:
                        o.java_frames = false;
                        break;
                case ARG_KERNEL_ADDRESSES:
                        o.kernel_addresses = true;
                        break;
                case ARG_DEBUGINFOD_URLS:
                        if (set_string(&o.debuginfod_urls, optarg) < 0)
                                goto oom;
                        break;
                case ARG_DEBUGINFOD_CACHE:
                        if (optarg[0] != '/') {
                                r = bad_value("debuginfod-cache", optarg, "expected an absolute directory");
                                goto fail;
                        }
                        if (set_string(&o.debuginfod_cache, optarg) < 0)
                                goto oom;
                        break;
                case ARG_DEBUGINFOD_CACHE_SIZE:
                        if (parse_size(optarg, &o.debuginfod_cache_size) < 0 ||
                            o.debuginfod_cache_size < (1ULL << 20)) {
                                r = bad_value("debuginfod-cache-size", optarg,
                                              "expected a size of at least 1M, with suffix K, M or G");
                                goto fail;
                        }
                        break;
                case ARG_DEBUGINFOD_TIMEOUT:
                        if (parse_unsigned(optarg, 1, MAX_DEBUGINFOD_TIMEOUT_S, &o.debuginfod_timeout_s) <
                            0) {
                                r = bad_value("debuginfod-timeout", optarg,
                                              "expected seconds from 1 to 3600");
                                goto fail;
                        }
                        break;
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r < 0) {
                                r = bad_value("log-level", optarg,
                                              "expected err, warning, notice, info, debug or 0..7");
                                goto fail;
                        }
                        o.log_level = r;
                        break;
                case ':':
                        fprintf(stderr, "profd: option '%s' needs a value (see --help)\n", argv[optind - 1]);
                        r = -EINVAL;
                        goto fail;
                case '?':
                default:
                        if (optopt != 0 && optopt < 0x100)
                                fprintf(stderr, "profd: unknown option '-%c' (see --help)\n", optopt);
                        else
                                fprintf(stderr, "profd: unknown option '%s' (see --help)\n",
                                        argv[optind - 1]);
                        r = -EINVAL;
                        goto fail;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "profd: unexpected argument '%s' (profd takes only options; see --help)\n",
                        argv[optind]);
                r = -EINVAL;
                goto fail;
        }

        if (!o.tls_cert_file != !o.tls_key_file) {
                fprintf(stderr, "profd: --tls-cert and --tls-key go together (see --help)\n");
                r = -EINVAL;
                goto fail;
        }
        if (o.tls_client_ca_file && !o.tls_cert_file) {
                fprintf(stderr, "profd: --tls-client-ca needs --tls-cert and --tls-key: client "
                                "certificates are only asked for over HTTPS (see --help)\n");
                r = -EINVAL;
                goto fail;
        }

        /* The variable libdebuginfod and every other elfutils tool read (debuginfod-client(3)). */
        if (!o.debuginfod_urls && getenv("DEBUGINFOD_URLS") &&
            set_string(&o.debuginfod_urls, getenv("DEBUGINFOD_URLS")) < 0)
                goto oom;

        *ret = o;
        return 0;

oom:
        fprintf(stderr, "profd: out of memory\n");
        r = -ENOMEM;
fail:
        options_done(&o);
        return r;
}
