/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "http-server.h"
#include "log.h"
#include "metrics.h"
#include "proc-tracker.h"
#include "table-pool.h"

/* The daemon's own footprint, so "near-zero overhead" can be watched from the same scrape. */
static void write_self(FILE *f)
{
        struct timespec ts;
        double cpu = 0;
        if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
                cpu = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;

        uint64_t rss_kb = 0, hwm_kb = 0;
        _cleanup_fclose_ FILE *s = fopen("/proc/self/status", "re");
        if (s) {
                char line[256];
                while (fgets(line, sizeof(line), s)) {
                        unsigned long long v;
                        if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
                                rss_kb = v;
                        else if (sscanf(line, "VmHWM: %llu kB", &v) == 1)
                                hwm_kb = v;
                }
        }

        fprintf(f,
                "# HELP profd_build_info profd version.\n"
                "# TYPE profd_build_info gauge\n"
                "profd_build_info{version=\"%s\"} 1\n"
                "# HELP profd_process_cpu_seconds_total CPU time the daemon itself used.\n"
                "# TYPE profd_process_cpu_seconds_total counter\n"
                "profd_process_cpu_seconds_total %.6f\n"
                "# HELP profd_process_resident_memory_bytes Resident memory of the daemon.\n"
                "# TYPE profd_process_resident_memory_bytes gauge\n"
                "profd_process_resident_memory_bytes %" PRIu64 "\n"
                "# HELP profd_process_resident_memory_max_bytes Peak resident memory of the daemon.\n"
                "# TYPE profd_process_resident_memory_max_bytes gauge\n"
                "profd_process_resident_memory_max_bytes %" PRIu64 "\n",
                PROFD_VERSION, cpu, rss_kb * 1024, hwm_kb * 1024);
}

int metrics_render(Daemon *d, char **ret_text, size_t *ret_size)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return -errno;

        write_self(f);
        fprintf(f,
                "# HELP profd_start_time_seconds When the daemon started, seconds since the epoch.\n"
                "# TYPE profd_start_time_seconds gauge\n"
                "profd_start_time_seconds %.3f\n",
                (double)d->start_ns / 1e9);

        /* Components add their families here; each one is optional (not created yet, or failed). */
        if (d->sampler)
                sampler_write_metrics(d->sampler, f);
        if (d->aggregator)
                aggregator_write_metrics(d->aggregator, f);
        if (d->processes)
                process_table_write_metrics(d->processes, f);
        if (d->symbolizer)
                symbolizer_write_metrics(d->symbolizer, f);
        if (d->http)
                http_server_write_metrics(d->http, f);
        if (d->cgroups)
                cgroup_resolver_write_metrics(d->cgroups, f);
        if (d->pool)
                table_pool_write_metrics(d->pool, f);
        if (d->tracker)
                proc_tracker_write_metrics(d->tracker, f);

        if (ferror(f)) {
                fclose(f);
                free(buf);
                return -ENOMEM;
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret_text = buf;
        *ret_size = size;
        return 0;
}
