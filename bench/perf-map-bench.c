/* SPDX-License-Identifier: GPL-2.0-only */
/* Perf map figures: a Node-like /tmp/perf-PID.map of N lines (this process's own) loaded in read
 * steps, then looked up. Prints time per step, load time, bytes per entry and ns per lookup. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtimes/perf-map.h"
#include "util/time-util.h"

static uint64_t own_start_time(void)
{
        char buf[1024], *p, *tok, *save = NULL;
        FILE *f = fopen("/proc/self/stat", "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        unsigned i = 0;

        if (f)
                fclose(f);
        buf[n] = 0;
        p = strrchr(buf, ')');
        for (tok = p ? strtok_r(p + 1, " ", &save) : NULL; tok; tok = strtok_r(NULL, " ", &save))
                if (++i == 20)
                        return strtoull(tok, NULL, 10);
        return 0;
}

static unsigned long long metric(PerfMaps *pm, const char *name)
{
        char *buf = NULL, *p;
        size_t size = 0;
        unsigned long long v = 0;
        FILE *f = open_memstream(&buf, &size);

        perf_maps_write_metrics(pm, f);
        fclose(f);
        for (p = strstr(buf, name); p && p > buf && p[-1] != '\n'; p = strstr(p + 1, name))
                ;
        if (p)
                v = strtoull(p + strlen(name) + 1, NULL, 10);
        free(buf);
        return v;
}

int main(int argc, char **argv)
{
        unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 200000, steps = 0;
        ProcMapping anon = {.start = 0x1000, .end = 0x100000, .path = "", .executable = true};
        Process p = {.pid = getpid(), .start_time = own_start_time(), .mappings = &anon, .n_mappings = 1};
        char path[64];
        uint64_t t0, t1, max_step = 0, sink = 0;
        PerfMaps *pm = NULL;
        size_t file_size;
        FILE *f;

        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
        f = fopen(path, "w");
        if (!f || perf_maps_new(&pm) < 0)
                return 1;
        /* Node's shape: 64-byte aligned code, names with a path and position. */
        for (unsigned i = 0; i < n; i++)
                fprintf(f, "%x %x JS:*handler_%u /srv/app/node_modules/pkg/lib/module_%u.js:%u:%u\n",
                        0x40000000 + i * 0x100, 0xc0 + (i % 64), i, i % 997, i % 5000, i % 80);
        file_size = (size_t)ftell(f);
        fclose(f);

        t0 = now_ns(CLOCK_MONOTONIC);
        /* A miss reads one step while more is left. */
        while (metric(pm, "profd_perf_map_read_bytes_total") +
                               metric(pm, "profd_perf_map_skipped_bytes_total") <
                       file_size &&
               steps < 100000) {
                uint64_t s0 = now_ns(CLOCK_MONOTONIC), d;
                (void)perf_maps_lookup(pm, &p, 0x1, NULL);
                d = now_ns(CLOCK_MONOTONIC) - s0;
                if (d > max_step)
                        max_step = d;
                steps++;
        }
        t1 = now_ns(CLOCK_MONOTONIC);
        printf("perf map: %u lines, %zu bytes: loaded in %u steps, %.1f ms (longest step %.2f ms)\n", n,
               file_size, steps, (t1 - t0) / 1e6, max_step / 1e6);
        printf("entries: %llu kept, %llu dropped over the per-process cap\n",
               metric(pm, "profd_perf_map_entries"),
               metric(pm, "profd_perf_map_entries_dropped_total{reason=\"process_cap\"}"));
        printf("memory: %llu bytes, %.1f bytes per entry (file: %.1f bytes per line)\n",
               metric(pm, "profd_perf_map_bytes"),
               (double)metric(pm, "profd_perf_map_bytes") / (double)metric(pm, "profd_perf_map_entries"),
               (double)file_size / n);

        srand(1);
        t0 = now_ns(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < 1000000; i++) {
                const char *name =
                        perf_maps_lookup(pm, &p, 0x40000000 + (uint64_t)(rand() % n) * 0x100 + 8, NULL);
                sink += name ? (unsigned char)name[0] : 0;
        }
        t1 = now_ns(CLOCK_MONOTONIC);
        printf("lookup: %.0f ns per hit (1M random addresses, %llu found)\n", (t1 - t0) / 1e6,
               metric(pm, "profd_perf_map_lookups_total{result=\"found\"}"));
        (void)sink;
        unlink(path);
        perf_maps_free(pm);
        return 0;
}
