/* SPDX-License-Identifier: GPL-2.0-only */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "http/http-auth.h"
#include "http/http-server.h"
#include "http/http-tls.h"
#include "http/metrics.h"
#include "output/frame-names.h"
#include "output/symbol-warmer.h"
#include "runtimes/hotspot-procs.h"
#include "symbolizer/hotspot-symbols.h"
#include "runtimes/python-procs.h"
#include "runtimes/remote-memory.h"
#include "service/notify.h"
#include "tracker/proc-tracker.h"
#include "unwind/table-pool.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"
#include "util/safe-open.h"
#include "util/time-util.h"

#define LOOP_MONITOR_PERIOD_USEC (250 * 1000ULL)
#define LOOP_MONITOR_ACCURACY_USEC 1000ULL

/* Lateness thresholds counted separately: a scheduler hiccup, a visible stall, a drain missed. */
static const uint64_t loop_stall_thresholds_usec[] = {10 * 1000, 100 * 1000, 1000 * 1000};
static const char *const loop_stall_names[] = {"0.01", "0.1", "1"};

struct LoopMonitor {
        sd_event_source *timer;
        uint64_t checks;
        uint64_t lag_usec_sum, lag_usec_max;
        uint64_t stalls[ELEMENTSOF(loop_stall_thresholds_usec)];
};

static int on_loop_monitor(sd_event_source *s, uint64_t usec, void *userdata)
{
        LoopMonitor *m = userdata;
        uint64_t now;

        if (sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now) < 0)
                return 0;
        /* sd-event may legitimately fire up to the accuracy late; beyond that the loop was busy. */
        uint64_t lag = now > usec + LOOP_MONITOR_ACCURACY_USEC ? now - usec - LOOP_MONITOR_ACCURACY_USEC : 0;
        m->checks++;
        m->lag_usec_sum += lag;
        if (lag > m->lag_usec_max)
                m->lag_usec_max = lag;
        for (size_t i = 0; i < ELEMENTSOF(loop_stall_thresholds_usec); i++)
                if (lag >= loop_stall_thresholds_usec[i])
                        m->stalls[i]++;
        if (lag >= 1000 * 1000)
                log_warning_errno_ratelimited(0, "Event loop was held for %.3f s", (double)lag / 1e6);

        int r = sd_event_source_set_time(s, now + LOOP_MONITOR_PERIOD_USEC);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

int loop_monitor_new(sd_event *e, LoopMonitor **ret)
{
        LoopMonitor *m = calloc(1, sizeof(LoopMonitor));
        if (!m)
                return -ENOMEM;
        int r = sd_event_add_time_relative(e, &m->timer, CLOCK_MONOTONIC, LOOP_MONITOR_PERIOD_USEC,
                                           LOOP_MONITOR_ACCURACY_USEC, on_loop_monitor, m);
        if (r < 0) {
                free(m);
                return r;
        }
        (void)sd_event_source_set_description(m->timer, "loop-monitor");
        *ret = m;
        return 0;
}

LoopMonitor *loop_monitor_free(LoopMonitor *m)
{
        if (!m)
                return NULL;
        sd_event_source_disable_unref(m->timer);
        free(m);
        return NULL;
}

void loop_monitor_write_metrics(const LoopMonitor *m, FILE *f)
{
        metric_family(f, "profd_event_loop_lag_seconds", "summary",
                      "How late a periodic timer ran: time the loop was held by other work.");
        metric_sample_double(f, "profd_event_loop_lag_seconds_sum", NULL, (double)m->lag_usec_sum / 1e6);
        metric_sample(f, "profd_event_loop_lag_seconds_count", NULL, m->checks);
        metric_family(f, "profd_event_loop_lag_max_seconds", "gauge", "Longest the loop was held so far.");
        metric_sample_double(f, "profd_event_loop_lag_max_seconds", NULL, (double)m->lag_usec_max / 1e6);
        metric_labelled(f, "profd_event_loop_stalls_total", "counter",
                        "Loop checks that ran at least this late (seconds).", "over", loop_stall_names,
                        m->stalls, ELEMENTSOF(loop_stall_thresholds_usec));
}

/* The process_* families every Prometheus client library exports (same names, same sources in
 * /proc/self), so the daemon's footprint shows on the dashboards that already exist for them. */
typedef struct SelfStat {
        double cpu_seconds, start_time_seconds;
        uint64_t virtual_bytes, resident_bytes;
} SelfStat;

static int read_boot_time(uint64_t *ret)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
        char line[256];
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long v;
                if (sscanf(line, "btime %llu", &v) == 1) {
                        *ret = v;
                        return 0;
                }
        }
        return -ENODATA;
}

static int read_self_stat(SelfStat *ret)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/stat", "re");
        char buf[1024];
        if (!f)
                return -errno;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        /* The command name may hold spaces and parentheses: fields are counted from the last ')'. */
        const char *p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        unsigned long long utime, stime, starttime, vsize;
        long long rss;
        /* Fields 3 (state) .. 24 (rss); 14, 15 utime/stime, 22 starttime, 23 vsize, 24 rss. */
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu "
                   "%llu %lld",
                   &utime, &stime, &starttime, &vsize, &rss) != 5)
                return -EBADMSG;
        long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        if (tick <= 0 || page <= 0)
                return -EINVAL;
        uint64_t btime = 0;
        int r = read_boot_time(&btime);
        if (r < 0)
                return r;
        *ret = (SelfStat){
                .cpu_seconds = (double)(utime + stime) / (double)tick,
                .start_time_seconds = (double)btime + (double)starttime / (double)tick,
                .virtual_bytes = vsize,
                .resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0,
        };
        return 0;
}

static unsigned count_open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n > 0 ? n - 1 : 0; /* not the one reading the directory */
}

static void write_self(Daemon *d, FILE *f)
{
        SelfStat st = {.start_time_seconds = (double)d->start_ns / 1e9};
        int r = read_self_stat(&st);
        if (r < 0) {
                /* Still the same families, from the clocks. */
                log_debug_errno(r, "Cannot read /proc/self/stat: %m");
                st.cpu_seconds = (double)now_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e9;
        }
        struct rlimit rl = {};
        (void)getrlimit(RLIMIT_NOFILE, &rl);

        uint64_t hwm_kb = 0;
        _cleanup_fclose_ FILE *s = fopen("/proc/self/status", "re");
        if (s) {
                char line[256];
                while (fgets(line, sizeof(line), s)) {
                        unsigned long long v;
                        if (sscanf(line, "VmHWM: %llu kB", &v) == 1)
                                hwm_kb = v;
                }
        }

        char version[128];
        snprintf(version, sizeof(version), "version=\"%s\"", PROFD_VERSION);
        metric_family(f, "profd_build_info", "gauge", "profd version.");
        metric_sample(f, "profd_build_info", version, 1);
        metric_family(f, "process_cpu_seconds_total", "counter",
                      "Total user and system CPU time spent in seconds.");
        metric_sample_fixed(f, "process_cpu_seconds_total", NULL, st.cpu_seconds, 2);
        metric_gauge(f, "process_resident_memory_bytes", "Resident memory size in bytes.",
                     st.resident_bytes);
        metric_gauge(f, "process_virtual_memory_bytes", "Virtual memory size in bytes.", st.virtual_bytes);
        metric_gauge(f, "process_open_fds", "Number of open file descriptors.", count_open_fds());
        metric_gauge(f, "process_max_fds", "Maximum number of open file descriptors.",
                     (uint64_t)rl.rlim_cur);
        metric_family(f, "process_start_time_seconds", "gauge",
                      "Start time of the process since unix epoch in seconds.");
        metric_sample_fixed(f, "process_start_time_seconds", NULL, st.start_time_seconds, 2);
        metric_gauge(f, "profd_resident_memory_max_bytes", "Peak resident memory of the daemon (VmHWM).",
                     hwm_kb * 1024);
}

/* profd_memory_bytes: every box's own figure, then what only the process knows (memory-owners.h). */
static void write_memory(Daemon *d, FILE *f)
{
        MemoryOwners m = {};

        if (d->symbolizer) {
                SymbolizerMemory sm;

                symbolizer_memory(d->symbolizer, &sm);
                memory_owners_add(&m, "dwarf_elf", sm.dwarf_elf);
                m.file_bytes += sm.dwarf_elf_mapped;
                memory_owners_add(&m, "symbol_cache", sm.symbol_cache);
                memory_owners_add(&m, "jit_names", sm.jit_names);
                memory_owners_add(&m, "kallsyms", sm.kallsyms);
        }
        memory_owners_add(&m, "history", aggregator_memory_bytes(d->aggregator));
        memory_owners_add(&m, "process_table", d->processes ? process_table_memory(d->processes) : 0);
        memory_owners_add(&m, "python_code",
                          python_symbols_memory(d->python_symbols) + python_frame_ids_bytes(d->python_ids));
        memory_owners_add(&m, "java_names",
                          hotspot_symbols_memory(d->hotspot_symbols) + hotspot_procs_memory(d->hotspot));
        memory_owners_add(&m, "unwind_pool",
                          table_pool_mapped_bytes(d->pool) + table_pool_host_bytes(d->pool));
        memory_owners_add(&m, "cgroups", cgroup_resolver_memory(d->cgroups));
        memory_owners_add(&m, "v8_names", v8_symbols_memory(d->v8_symbols));
        memory_owners_write_metrics(&m, f);
        if (d->budget)
                memory_budget_write_metrics(d->budget, f);
}

int metrics_render(Daemon *d, char **ret_text, size_t *ret_size)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return -errno;

        write_self(d, f);

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
        /* Written also when TLS or the token is off (zero), so every family is always there. */
        http_auth_write_metrics(d->auth, f);
        http_tls_write_metrics(d->tls, f);
        if (d->loop_monitor)
                loop_monitor_write_metrics(d->loop_monitor, f);
        if (d->warmer)
                symbol_warmer_write_metrics(d->warmer, f);
        if (d->notifier)
                notifier_write_metrics(d->notifier, f);
        if (d->cgroups)
                cgroup_resolver_write_metrics(d->cgroups, f);
        if (d->pool)
                table_pool_write_metrics(d->pool, f);
        if (d->tracker)
                proc_tracker_write_metrics(d->tracker, f);
        python_procs_write_metrics(d->python, f);
        v8_procs_write_metrics(d->v8, f);
        v8_symbols_write_metrics(d->v8_symbols, f);
        python_symbols_write_metrics(d->python_symbols, f);
        python_frame_ids_write_metrics(d->python_ids, f);
        hotspot_procs_write_metrics(d->hotspot, f);
        hotspot_symbols_write_metrics(d->hotspot_symbols, f);
        frame_names_write_metrics(f);
        remote_memory_write_metrics(f);
        safe_open_write_metrics(f);
        write_memory(d, f);

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
