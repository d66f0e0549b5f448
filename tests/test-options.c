/* SPDX-License-Identifier: GPL-2.0-only */
/* Command-line parsing: defaults, every flag, and bad input rejected (the daemon exits 2 on it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/options.h"

#include "lib/test-util.h"

#define PARSE(o, ...)                                                                                       \
        ({                                                                                                  \
                char *argv_[] = {"profd", __VA_ARGS__, NULL};                                               \
                options_parse((int)(sizeof(argv_) / sizeof(argv_[0])) - 1, argv_, (o));                     \
        })

int main(void)
{
        Options o;
        uint64_t v;

        char *none[] = {"profd", NULL};
        CHECK(options_parse(1, none, &o) == 0);
        CHECK(strcmp(o.http_address, ":7071") == 0);
        CHECK(o.frequency_hz == 19 && o.max_seconds == 300 && o.max_concurrent_profiles == 8);
        CHECK(o.unwind_table_memory == 256ULL << 20 && o.process_table_memory == 32ULL << 20);
        CHECK(o.http_max_connections == 128 && o.http_max_connections_per_client == 16);
        CHECK(o.labels.enabled[LABEL_COMM] && o.labels.enabled[LABEL_PID] &&
              !o.labels.enabled[LABEL_THREAD_ID]);
        options_done(&o);

        CHECK(PARSE(&o, "--http-address", "127.0.0.1:9000", "--frequency", "99", "--max-seconds", "60",
                    "--labels", "tid,unit", "--unwind-table-memory", "1G", "--log-level", "debug",
                    "--max-concurrent-profiles", "3") == 0);
        CHECK(strcmp(o.http_address, "127.0.0.1:9000") == 0 && o.frequency_hz == 99 && o.max_seconds == 60);
        CHECK(o.labels.enabled[LABEL_THREAD_ID] && o.labels.enabled[LABEL_UNIT] &&
              !o.labels.enabled[LABEL_COMM]);
        CHECK(strcmp(o.labels_string, "tid,unit") == 0);
        CHECK(o.unwind_table_memory == 1ULL << 30 && o.log_level == 7 && o.max_concurrent_profiles == 3);
        options_done(&o);

        CHECK(PARSE(&o, "--http-max-connections", "4096", "--http-max-connections-per-client", "0") == 0);
        CHECK(o.http_max_connections == 4096 && o.http_max_connections_per_client == 0);
        options_done(&o);

        /* tid's name from before it became a numeric label still selects it. */
        CHECK(PARSE(&o, "--labels", "pid,thread_id") == 0);
        CHECK(o.labels.enabled[LABEL_PID] && o.labels.enabled[LABEL_THREAD_ID] &&
              !o.labels.enabled[LABEL_COMM]);
        options_done(&o);

        CHECK(PARSE(&o, "--labels=") == 0);
        for (int l = 0; l < _LABEL_MAX; l++)
                CHECK(!o.labels.enabled[l]);
        options_done(&o);

        /* Bad flags and values: -EINVAL (exit 2), after one message on stderr. */
        CHECK(PARSE(&o, "--nope") == -EINVAL);
        CHECK(PARSE(&o, "-z") == -EINVAL);
        CHECK(PARSE(&o, "--frequency") == -EINVAL);
        CHECK(PARSE(&o, "--frequency", "0") == -EINVAL);
        CHECK(PARSE(&o, "--frequency", "12abc") == -EINVAL);
        CHECK(PARSE(&o, "--frequency", "-5") == -EINVAL);
        CHECK(PARSE(&o, "--frequency", "99999999999999999999999") == -EINVAL);
        CHECK(PARSE(&o, "--max-seconds", "0") == -EINVAL);
        CHECK(PARSE(&o, "--labels", "comm,bogus") == -EINVAL);
        CHECK(PARSE(&o, "--unwind-table-memory", "12Q") == -EINVAL);
        /* Below one 4 MiB shard no table fits: refused, not DWARF unwinding silently off. */
        CHECK(PARSE(&o, "--unwind-table-memory", "3M") == -EINVAL);
        CHECK(PARSE(&o, "--unwind-table-memory", "4M") == 0 && o.unwind_table_memory == 4ULL << 20);
        options_done(&o);
        CHECK(PARSE(&o, "--process-table-memory", "512K") == -EINVAL);
        CHECK(PARSE(&o, "--process-table-memory", "64M") == 0 && o.process_table_memory == 64ULL << 20);
        options_done(&o);
        CHECK(PARSE(&o, "--log-level", "chatty") == -EINVAL);
        CHECK(PARSE(&o, "--http-max-connections", "0") == -EINVAL);
        CHECK(PARSE(&o, "--http-max-connections", "4097") == -EINVAL);
        CHECK(PARSE(&o, "--http-max-connections-per-client", "-1") == -EINVAL);
        CHECK(PARSE(&o, "--http-max-connections-per-client", "4097") == -EINVAL);
        CHECK(PARSE(&o, "--http-address", "7071") == -EINVAL);
        CHECK(PARSE(&o, "--http-address", ":http") == -EINVAL);
        CHECK(PARSE(&o, "--http-address", "127.0.0.1:70000") == -EINVAL);
        CHECK(PARSE(&o, "--http-address", "[::1]:") == -EINVAL);
        CHECK(PARSE(&o, "--http-address", "[::1]:7071") == 0);
        options_done(&o);
        CHECK(PARSE(&o, "stray") == -EINVAL);

        /* Runtime frame walks: on unless turned off, each on its own. */
        CHECK(options_parse(1, none, &o) == 0);
        CHECK(o.python_frames && o.v8_frames && o.java_frames);
        options_done(&o);
        CHECK(PARSE(&o, "--no-python-frames") == 0);
        CHECK(!o.python_frames && o.v8_frames);
        options_done(&o);
        CHECK(PARSE(&o, "--no-v8-frames") == 0);
        CHECK(o.python_frames && !o.v8_frames);
        options_done(&o);
        CHECK(PARSE(&o, "--no-python-frames", "--no-v8-frames") == 0);
        CHECK(!o.python_frames && !o.v8_frames);
        options_done(&o);
        CHECK(PARSE(&o, "--no-v8-frames=yes") == -EINVAL);
        CHECK(PARSE(&o, "--no-java-frames") == 0);
        CHECK(o.python_frames && o.v8_frames && !o.java_frames);
        options_done(&o);
        CHECK(PARSE(&o, "--no-java-frames=yes") == -EINVAL);

        /* Who may scrape: the files are only named here (read at start-up, see test-http-auth.py). */
        CHECK(PARSE(&o, "--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--tls-client-ca", "/ca.pem",
                    "--auth-token-file", "/t", "--kernel-addresses") == 0);
        CHECK(strcmp(o.tls_cert_file, "/c.pem") == 0 && strcmp(o.tls_key_file, "/k.pem") == 0 &&
              strcmp(o.tls_client_ca_file, "/ca.pem") == 0 && strcmp(o.auth_token_file, "/t") == 0 &&
              o.kernel_addresses);
        options_done(&o);
        CHECK(options_parse(1, none, &o) == 0);
        CHECK(!o.tls_cert_file && !o.auth_token_file && !o.kernel_addresses);
        options_done(&o);
        CHECK(PARSE(&o, "--auth-token-file", "/t") == 0 && !o.tls_cert_file);
        options_done(&o);
        CHECK(PARSE(&o, "--tls-cert", "/c.pem") == -EINVAL);
        CHECK(PARSE(&o, "--tls-key", "/k.pem") == -EINVAL);
        CHECK(PARSE(&o, "--tls-client-ca", "/ca.pem") == -EINVAL);
        CHECK(PARSE(&o, "--tls-cert", "", "--tls-key", "/k.pem") == -EINVAL);
        CHECK(PARSE(&o, "--auth-token-file") == -EINVAL);
        CHECK(PARSE(&o, "--kernel-addresses=yes") == -EINVAL);

        /* debuginfod: off by default; DEBUGINFOD_URLS is the default, the flag (even "") wins. */
        unsetenv("DEBUGINFOD_URLS");
        CHECK(options_parse(1, none, &o) == 0);
        CHECK(!o.debuginfod_urls && !o.debuginfod_cache && o.debuginfod_cache_size == 2ULL << 30 &&
              o.debuginfod_timeout_s == 60);
        options_done(&o);
        setenv("DEBUGINFOD_URLS", "https://a.example https://b.example", 1);
        CHECK(options_parse(1, none, &o) == 0);
        CHECK(o.debuginfod_urls && strcmp(o.debuginfod_urls, "https://a.example https://b.example") == 0);
        options_done(&o);
        CHECK(PARSE(&o, "--debuginfod-urls", "") == 0 && o.debuginfod_urls && !o.debuginfod_urls[0]);
        options_done(&o);
        unsetenv("DEBUGINFOD_URLS");
        CHECK(PARSE(&o, "--debuginfod-urls", "https://c.example", "--debuginfod-cache", "/var/cache/x",
                    "--debuginfod-cache-size", "64M", "--debuginfod-timeout", "5") == 0);
        CHECK(strcmp(o.debuginfod_urls, "https://c.example") == 0 &&
              strcmp(o.debuginfod_cache, "/var/cache/x") == 0 && o.debuginfod_cache_size == 64ULL << 20 &&
              o.debuginfod_timeout_s == 5);
        options_done(&o);
        CHECK(PARSE(&o, "--debuginfod-cache", "relative/dir") == -EINVAL);
        CHECK(PARSE(&o, "--debuginfod-cache-size", "512K") == -EINVAL);
        CHECK(PARSE(&o, "--debuginfod-timeout", "0") == -EINVAL);
        CHECK(PARSE(&o, "--debuginfod-timeout", "3601") == -EINVAL);

        /* --help / --version: handled, exit 0. */
        CHECK(PARSE(&o, "--version") == 1);

        CHECK(parse_size("128", &v) == 0 && v == 128);
        CHECK(parse_size("64K", &v) == 0 && v == 64ULL << 10);
        CHECK(parse_size("256M", &v) == 0 && v == 256ULL << 20);
        CHECK(parse_size("2GiB", &v) == 0 && v == 2ULL << 30);
        CHECK(parse_size("", &v) < 0 && parse_size("M", &v) < 0 && parse_size("-1M", &v) < 0);
        CHECK(parse_size("1T", &v) < 0 && parse_size("1MX", &v) < 0);
        CHECK(parse_size("99999999999999999999G", &v) < 0 && parse_size("17179869184G", &v) < 0);

        if (failures) {
                fprintf(stderr, "%u check(s) failed\n", failures);
                return 1;
        }
        printf("all option checks passed\n");
        return 0;
}
