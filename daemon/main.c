/* SPDX-License-Identifier: GPL-2.0-only */
/* profd: wiring only. Every component lives in its own file; this creates them in dependency order,
 * connects the sampler's intervals to the aggregator and the process table, and runs the loop. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "daemon.h"
#include "http/http-auth.h"
#include "http/http-server.h"
#include "http/http-tls.h"
#include "http/metrics.h"
#include "output/frame-names.h"
#include "output/symbol-warmer.h"
#include "runtimes/python-procs.h"
#include "runtimes/v8-stack.h" /* the runtimes' entry bits */
#include "service/capabilities.h"
#include "service/memory-budget-owners.h"
#include "service/notify.h"
#include "symbolizer/python-symbols.h"
#include "tracker/proc-tracker.h"
#include "unwind/table-pool.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/time-util.h"

/* Drain period: the granularity of the history (requests cut exactly on their own anyway). */
#define DRAIN_INTERVAL_NS (1 * NSEC_PER_SEC)
/* Exited processes stay symbolizable this long: a window can be at most --max-seconds old when it
 * is rendered, plus the drain and build time. */
#define EXIT_GRACE_EXTRA_NS (60 * NSEC_PER_SEC)
#define PROCESS_GC_INTERVAL_USEC (10 * USEC_PER_SEC)
/* Longest wait at start for the processes found then to be read before sampling starts. */
#define START_SETTLE_NS (3 * NSEC_PER_SEC)
/* cgroup ids remembered (unit / container_id labels); a host rarely has more live cgroups. */
#define CGROUP_CACHE_MAX 16384

static const Process *find_process(pid_t pid, void *userdata)
{
        return process_table_find(userdata, pid);
}

static void runtimes_mapped(void *userdata, const Process *p);

static void on_interval(void *userdata, uint64_t start_ns, uint64_t end_ns, const SampleRecord *records,
                        size_t n)
{
        Daemon *d = userdata;
        pid_t starting[HOTSPOT_STARTING_MAX];

        /* JVMs that had no code cache when their mappings were read: described now. */
        for (size_t i = 0, k = hotspot_procs_take_starting(d->hotspot, starting, ELEMENTSOF(starting));
             i < k; i++) {
                const Process *p = process_table_find(d->processes, starting[i]);

                if (p)
                        runtimes_mapped(d, p);
        }

        aggregator_add_interval(d->aggregator, start_ns, end_ns, records, n);
        /* Python frames: their code objects are read now, while the processes run. */
        python_symbols_note(d->python_symbols, records, n);
        hotspot_symbols_note(d->hotspot_symbols, records, n);

        /* Resolve new cgroup ids now, while the cgroups exist (cached for the history). */
        if (d->cgroups)
                for (size_t i = 0; i < n; i++)
                        cgroup_resolver_note(d->cgroups, records[i].cgroup_id, end_ns);

        /* Read the maps of newly sampled processes now, while they still exist, so that a process
         * that exits before its window is rendered can still be symbolized. */
        _cleanup_free_ uint32_t *pids = NULL;
        size_t n_pids = aggregator_take_pids(d->aggregator, &pids);
        for (size_t i = 0; i < n_pids; i++) {
                Process *p;
                if (pids[i] != 0 && process_table_get(d->processes, (pid_t)pids[i], &p) >= 0)
                        symbolizer_note_process(d->symbolizer, p);
        }
        /* Known processes that mapped code after their snapshot are read again now, so that every
         * output names their frames alike (frame-names.h) without reading /proc itself. */
        frame_names_note_interval(d->processes, start_ns, records, n);
        /* And what JITs appended to their perf maps since, while they run (bounded steps). */
        symbolizer_tick(d->symbolizer, find_process, d->processes);
        /* Over the memory target: the owners that can give memory back lower their bounds. */
        if (d->budget)
                (void)memory_budget_check_self(d->budget);
}

static int on_process_gc(sd_event_source *s, uint64_t usec, void *userdata)
{
        Daemon *d = userdata;
        process_table_gc(d->processes, now_ns(CLOCK_REALTIME));
        if (d->cgroups)
                cgroup_resolver_gc(d->cgroups, now_ns(CLOCK_REALTIME));
        int r = sd_event_source_set_time_relative(s, PROCESS_GC_INTERVAL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (r < 0)
                log_error_errno(r, "Cannot re-arm the process table timer, exited processes are no longer "
                                   "forgotten: %m");
        return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Daemon *d = userdata;
        log_info("Received %s, shutting down", strsignal((int)si->ssi_signo));
        (void)notifier_stopping(d->notifier);
        return sd_event_exit(d->event, 0);
}

/* systemctl reload (ExecReload=kill -HUP): the files named on the command line are read again;
 * open connections and in-flight profiles carry on with what they have. */
static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        Daemon *d = userdata;
        if (!d->tls && !d->options.auth_token_file) {
                log_info("Received SIGHUP: no TLS files or token file to re-read");
                return 0;
        }
        log_info("Received SIGHUP: re-reading the TLS certificate, key, client CAs and token file");
        (void)http_tls_reload(d->tls);
        (void)http_auth_reload(d->auth);
        return 0;
}

/* The STATUS= line systemctl status shows. */
static void notify_stats(void *userdata, NotifyStats *ret)
{
        Daemon *d = userdata;
        ret->processes = proc_tracker_n_processes(d->tracker);
        ret->tables = table_pool_n_tables(d->pool);
        ret->samples_per_sec = d->sampler ? sampler_rate(d->sampler) : 0;
}

/* The watchdog's health check: the loop runs (or this would not be called) and HTTP answers. */
static bool daemon_healthy(void *userdata, char *why, size_t size)
{
        Daemon *d = userdata;
        return http_server_responsive(d->http, why, size);
}

static void daemon_done(Daemon *d)
{
        /* HTTP first (answers waiting requests), then the sampler (detaches every BPF link and perf
         * event), then what they used. */
        d->http = http_server_free(d->http);
        d->warmer = symbol_warmer_free(d->warmer); /* before what it warms */
        d->tls = http_tls_free(d->tls);            /* after HTTP: its connections held the credentials */
        d->auth = http_auth_free(d->auth);
        d->cgroup_filter = cgroup_filter_free(d->cgroup_filter);
        d->tracker = proc_tracker_free(d->tracker);
        d->python = python_procs_free(d->python); /* after the tracker, which used it */
        d->hotspot_symbols = hotspot_symbols_free(d->hotspot_symbols);
        d->hotspot = hotspot_procs_free(d->hotspot);
        d->v8 = v8_procs_free(d->v8);
        d->v8_symbols = v8_symbols_free(d->v8_symbols);
        d->python_symbols = python_symbols_free(d->python_symbols);
        d->pool = table_pool_free(d->pool);
        d->sampler = sampler_free(d->sampler);
        d->python_ids = python_frame_ids_free(d->python_ids); /* after the sampler, which used them */
        d->cgroups = cgroup_resolver_free(d->cgroups);
        d->aggregator = aggregator_free(d->aggregator);
        d->budget = memory_budget_free(d->budget); /* before the owners it asks */
        d->symbolizer = symbolizer_free(d->symbolizer);
        d->processes = process_table_free(d->processes);
        d->notifier = notifier_free(d->notifier);
        d->loop_monitor = loop_monitor_free(d->loop_monitor);
        d->event = sd_event_unref(d->event);
        options_done(&d->options);
}

/* The line a user looks for: where the profiles are. */
static void log_ready_line(Daemon *d)
{
        const char *a = http_server_address(d->http), *scheme = http_tls_scheme(d->tls);

        if (a[0] == ':')
                log_info("profd %s ready: sampling at %u Hz; profiles on port %s of every address, e.g. "
                         "curl -o cpu.pb.gz '%s://localhost%s/debug/pprof/profile?seconds=30'",
                         PROFD_VERSION, d->options.frequency_hz, a + 1, scheme, a);
        else if (strchr(a, ':'))
                log_info("profd %s ready: sampling at %u Hz; profiles at "
                         "%s://%s/debug/pprof/profile?seconds=30",
                         PROFD_VERSION, d->options.frequency_hz, scheme, a);
        else
                log_info("profd %s ready: sampling at %u Hz; serving HTTP on %s", PROFD_VERSION,
                         d->options.frequency_hz, a);
}

/* The tracker's observer: runtime walkers learn of processes from the mappings it reads. */
static void runtimes_mapped(void *userdata, const Process *p)
{
        Daemon *d = userdata;
        int r;

        python_procs_note(d->python, p);
        hotspot_procs_note(d->hotspot, p);
        v8_procs_note(d->v8, p);
        r = table_pool_set_process_runtimes(
                d->pool, p->pid,
                (python_procs_get(d->python, p->pid) ? TABLE_POOL_RUNTIME_PYTHON : 0) |
                        (hotspot_procs_get(d->hotspot, p->pid) ? TABLE_POOL_RUNTIME_HOTSPOT : 0) |
                        (d->v8_symbols && v8_procs_get(d->v8, p->pid) ? TABLE_POOL_RUNTIME_V8 : 0));
        if (r == -ENOENT && hotspot_procs_get(d->hotspot, p->pid))
                /* Not in the pool yet (its tables are being built): marked at the next interval. */
                hotspot_procs_retry(d->hotspot, p->pid);
        else if (r < 0 && r != -ENOENT)
                log_debug_errno(r, "Marking the runtimes of pid %d for BPF failed: %m", (int)p->pid);
}

static void runtimes_forgotten(void *userdata, pid_t pid)
{
        Daemon *d = userdata;

        python_procs_forget(d->python, pid);
        hotspot_procs_forget(d->hotspot, pid);
        v8_procs_forget(d->v8, pid);
}

static int run(int argc, char **argv)
{
        _cleanup_(daemon_done) Daemon d = {};
        int r;

        memory_allocator_setup();
        r = options_parse(argc, argv, &d.options);
        if (r == -EINVAL)
                return 2;
        if (r < 0)
                return 1;
        if (r > 0)
                return 0;

        log_open();
        log_set_max_level(d.options.log_level);
        d.start_ns = now_ns(CLOCK_REALTIME);

        /* Who may scrape, first: a certificate, key, CA or token file that cannot be used is a
         * configuration error like a bad flag (one line, exit 2), found before anything loads. */
        r = http_auth_new(d.options.auth_token_file, &d.auth);
        if (r < 0)
                return r == -ENOMEM ? 1 : 2;
        if (d.options.tls_cert_file) {
                r = http_tls_new(d.options.tls_cert_file, d.options.tls_key_file,
                                 d.options.tls_client_ca_file, http_auth_count_handshake, d.auth, &d.tls);
                if (r < 0)
                        return r == -ENOMEM ? 1 : 2;
        }

        /* One clear line and exit 1 before anything is loaded; STATUS= repeats it for systemctl
         * status even when the journal is not there. */
        const CapabilityNeed *missing = NULL;
        if (kernel_check_supported() < 0)
                return (void)notifier_status(NULL, EOPNOTSUPP, "Unsupported kernel (see the log)"), 1;
        if (capabilities_check(&missing) < 0)
                return (void)notifier_status(NULL, EPERM, "Missing capability %s",
                                             missing ? missing->name : "?"),
                       1;

        r = sd_event_default(&d.event);
        if (r < 0)
                return log_error_errno(r, "Cannot create the event loop: %m"), 1;

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Cannot block signals: %m"), 1;
        signal(SIGPIPE, SIG_IGN);
        r = sd_event_add_signal(d.event, NULL, SIGTERM, on_signal, &d);
        if (r >= 0)
                r = sd_event_add_signal(d.event, NULL, SIGINT, on_signal, &d);
        if (r >= 0)
                r = sd_event_add_signal(d.event, NULL, SIGHUP, on_sighup, &d);
        if (r < 0)
                return log_error_errno(r, "Cannot watch SIGTERM/SIGINT/SIGHUP: %m"), 1;

        /* WATCHDOG=1 comes from the loop itself when systemd asked for it, and only while HTTP
         * answers (daemon_healthy()). */
        r = notifier_new(d.event, notify_stats, &d, &d.notifier);
        if (r < 0)
                return log_error_errno(r, "Cannot set up service notifications: %m"), 1;

        uint64_t history_ns = (uint64_t)d.options.max_seconds * NSEC_PER_SEC + EXIT_GRACE_EXTRA_NS;
        r = aggregator_new(history_ns, d.options.frequency_hz, &d.aggregator);
        if (r < 0)
                return log_error_errno(r, "Cannot create the aggregator: %m"), 1;
        r = process_table_new(history_ns, &d.processes);
        if (r < 0)
                return log_error_errno(r, "Cannot create the process table: %m"), 1;
        process_table_set_memory_budget(d.processes, d.options.process_table_memory);
        r = cgroup_resolver_new(NULL, CGROUP_CACHE_MAX, history_ns, &d.cgroups);
        if (r < 0) {
                if (d.options.filter.n_units > 0 || d.options.filter.n_cgroups > 0)
                        return log_error_errno(r, "--unit/--cgroup need a cgroup v2 hierarchy: %m"), 1;
                log_warning_errno(r, "No cgroup v2 hierarchy, samples get no unit/container_id labels: %m");
        }
        r = symbolizer_new(&d.symbolizer);
        if (r < 0)
                return log_error_errno(r, "Cannot create the symbolizer: %m"), 1;
        symbolizer_set_kernel_addresses(d.symbolizer, d.options.kernel_addresses);
        if (d.options.debuginfod_urls && d.options.debuginfod_urls[0]) {
                DebuginfodOptions dopt = {.urls = d.options.debuginfod_urls,
                                          .cache_dir = d.options.debuginfod_cache,
                                          .cache_max_bytes = d.options.debuginfod_cache_size,
                                          .timeout_ns =
                                                  (uint64_t)d.options.debuginfod_timeout_s * NSEC_PER_SEC};
                r = symbolizer_enable_debuginfod(d.symbolizer, d.event, &dopt);
                if (r < 0)
                        log_warning_errno(r,
                                          "Cannot fetch debug files from debuginfod, stripped binaries stay "
                                          "unnamed: %m");
                else
                        log_info("Debug files missing on the host are fetched from: %s",
                                 d.options.debuginfod_urls);
        }
        r = symbolizer_enable_inflater(d.symbolizer, d.event);
        if (r < 0)
                log_warning_errno(r, "Cannot inflate compressed debug files off the event loop, libdw "
                                     "inflates them as it opens them: %m");
        r = symbol_warmer_new(d.event, d.aggregator, d.symbolizer, d.processes, &d.warmer);
        if (r < 0)
                return log_error_errno(r, "Cannot create the symbol warmer: %m"), 1;

        SamplerOptions so = {.frequency_hz = d.options.frequency_hz, .drain_interval_ns = DRAIN_INTERVAL_NS};
        sample_filter_to_bpf(&d.options.filter, &so.filter);
        so.off_cpu = d.options.off_cpu;
        so.off_cpu_threshold_ns = (uint64_t)d.options.off_cpu_threshold_us * 1000;
        r = sampler_new(d.event, &so, on_interval, &d, &d.sampler);
        if (r < 0)
                return log_error_errno(r, "Cannot create the sampler: %m"), 1;

        /* Listen before loading BPF so a port conflict fails fast; /healthz says 503 until live. */
        r = http_server_new(&d, metrics_render, &d.http);
        if (r < 0)
                return 1; /* logged */
        notifier_set_health_check(d.notifier, daemon_healthy, &d);

        r = sampler_prepare(d.sampler);
        if (r < 0)
                return log_error_errno(r, "Cannot load the sampler: %m"), 1;

        r = cgroup_filter_new(d.event, &d.options.filter, d.cgroups, sampler_bpf_object(d.sampler),
                              &d.cgroup_filter);
        if (r < 0)
                return 1; /* logged */
        if (!sample_filter_is_empty(&d.options.filter)) {
                char desc[1024];
                sample_filter_describe(&d.options.filter, desc, sizeof(desc));
                log_info("Sampling only: %s", desc);
        }

        /* DWARF unwinding: the pool lives in the sampler's BPF maps, the tracker keeps it current.
         * Without them profd still runs, with frame-pointer stacks. */
        r = table_pool_new(sampler_bpf_object(d.sampler), d.options.unwind_table_memory, &d.pool);
        if (r < 0)
                log_warning_errno(r, "Cannot create the unwind table pool, DWARF unwinding disabled: %m");
        else {
                table_pool_set_exit_hook(d.pool, sampler_exit_hook_attached(d.sampler));
                ProcTrackerOptions to = {};

                /* CPython frames: BPF walks them in the processes this describes to it.
                 * --no-python-frames (benchmarks: the native-only cost) leaves them out. */
                if (!d.options.python_frames)
                        log_info("--no-python-frames: no Python frames");
                else if ((r = python_procs_new(sampler_python_procs_fd(d.sampler), &d.python)) < 0 ||
                         (r = python_frame_ids_new(0, &d.python_ids)) < 0 ||
                         (r = python_symbols_new(d.python, d.python_ids, &d.python_symbols)) < 0)
                        log_warning_errno(r, "Cannot track CPython processes, no Python frames: %m");
                else {
                        symbolizer_set_python(d.symbolizer, python_symbols_name, d.python_symbols);
                        r = sampler_set_python_frame_ids(d.sampler, d.python_ids);
                        if (r < 0)
                                log_warning_errno(r, "Cannot name Python frames at the drain: %m");
                        /* Code objects are read as soon as a new stack shows them; without, at
                         * the drain only (import-time frames and processes that exit soon after
                         * stay unnamed). */
                        r = sampler_watch_python_stacks(d.sampler, python_symbols_note_stack,
                                                        d.python_symbols);
                        if (r < 0)
                                log_warning_errno(r,
                                                  "Cannot watch new Python stacks, their code objects are "
                                                  "read at the drain only: %m");
                }
                /* HotSpot JVMs: BPF walks the Java frames of the JVMs this finds and describes to it.
                 * --no-java-frames (benchmarks: the native-only cost) leaves them out. */
                if (!d.options.java_frames)
                        log_info("--no-java-frames: no Java frames from the HotSpot walk");
                else if ((r = hotspot_procs_new(sampler_hotspot_procs_fd(d.sampler), &d.hotspot)) < 0 ||
                         (r = hotspot_symbols_new(d.hotspot, &d.hotspot_symbols)) < 0)
                        log_warning_errno(r, "Cannot track HotSpot JVMs: %m");
                else {
                        /* Names no stored sample carries any more are forgotten. */
                        hotspot_symbols_set_history(d.hotspot_symbols, history_ns);
                        symbolizer_set_runtime(d.symbolizer, SYM_RUNTIME_HOTSPOT, hotspot_symbols_name,
                                               d.hotspot_symbols);
                        symbolizer_set_runtime_inlined(d.symbolizer, SYM_RUNTIME_HOTSPOT,
                                                       hotspot_symbols_inlined);
                        symbolizer_set_anon(d.symbolizer, hotspot_symbols_anon, d.hotspot_symbols);
                        r = sampler_add_namer(d.sampler, &(SamplerNamer){.entry_bit = PROFD_FRAME_HOTSPOT,
                                                                         .name = hotspot_symbols_name_stack,
                                                                         .cut = hotspot_symbols_cut,
                                                                         .userdata = d.hotspot_symbols});
                        if (r < 0)
                                log_warning_errno(r, "Cannot name Java frames at the drain: %m");
                }
                /* V8 (Node.js) frames: BPF reads them in the processes this describes to it.
                 * --no-v8-frames (tests of perf maps, benchmarks) leaves them out. */
                if (!d.options.v8_frames)
                        log_info("--no-v8-frames: no JavaScript frames from the V8 walk");
                else if ((r = v8_procs_new(sampler_v8_procs_fd(d.sampler), &d.v8)) < 0 ||
                         (r = v8_symbols_new(d.v8, &d.v8_symbols)) < 0)
                        log_warning_errno(r, "Cannot track Node.js processes, no JavaScript frames: %m");
                else {
                        r = sampler_add_namer(d.sampler, &(SamplerNamer){.entry_bit = PROFD_FRAME_V8,
                                                                         .name = v8_symbols_namer,
                                                                         .userdata = d.v8_symbols});
                        if (r < 0)
                                log_warning_errno(r, "Cannot name JavaScript frames at the drain: %m");
                        symbolizer_set_runtime(d.symbolizer, SYM_RUNTIME_V8, v8_symbols_name, d.v8_symbols);
                        symbolizer_set_runtime_inlined(d.symbolizer, SYM_RUNTIME_V8, v8_symbols_inlined);
                }
                if (d.python || d.hotspot || d.v8)
                        to.observer = (ProcTrackerObserver){
                                .mapped = runtimes_mapped, .forgotten = runtimes_forgotten, .userdata = &d};
                r = proc_tracker_new(d.event, d.processes, d.pool, &to, &d.tracker);
                if (r < 0)
                        log_warning_errno(r, "Cannot track processes, DWARF unwinding disabled: %m");
                else {
                        r = sampler_unwinder_events_fd(d.sampler);
                        if (r >= 0)
                                r = proc_tracker_add_unwinder_events(d.tracker, r);
                        if (r < 0)
                                log_warning_errno(r, "No unknown-pid/pc reports from the unwinder: %m");
                }
        }

        /* Sampling starts once the processes found at start are known (mappings in the pool, their
         * interpreters described), so that none of their samples is walked blind; their unwind
         * tables are built in the background. */
        if (d.tracker && proc_tracker_settle(d.tracker, START_SETTLE_NS) > 0)
                log_warning("Not every process found at start was read within %.1f s: the rest are read "
                            "while sampling",
                            (double)START_SETTLE_NS / NSEC_PER_SEC);
        /* One memory budget over the owners' own bounds (service/memory-budget-owners.h).
         * PROFD_MEMORY_TARGET (MiB): benchmarks and tests squeeze it (docs/performance.md). */
        const char *target = getenv("PROFD_MEMORY_TARGET");
        if ((r = memory_budget_new(target ? strtoull(target, NULL, 10) << 20 : 0, &d.budget)) < 0 ||
            (r = memory_budget_add_owners(d.budget, d.symbolizer, d.python_symbols, d.hotspot_symbols)) <
                    0) {
                log_warning_errno(r,
                                  "Cannot set up the memory budget, owners keep their own bounds only: %m");
                d.budget = memory_budget_free(d.budget);
        }
        r = sampler_start(d.sampler);
        if (r < 0)
                return log_error_errno(r, "Cannot start sampling: %m"), 1;

        r = sd_event_add_time_relative(d.event, NULL, CLOCK_MONOTONIC, PROCESS_GC_INTERVAL_USEC,
                                       USEC_PER_SEC, on_process_gc, &d);
        if (r < 0)
                return log_error_errno(r, "Cannot add the process table timer: %m"), 1;

        log_ready_line(&d);
        /* BPF attached on every CPU and HTTP listening: ready. */
        r = notifier_ready(d.notifier);
        if (r < 0)
                log_warning_errno(r, "Cannot notify the service manager: %m");

        /* Started last: startup itself (BPF load, first /proc scan) is not loop latency. */
        r = loop_monitor_new(d.event, &d.loop_monitor);
        if (r < 0)
                return log_error_errno(r, "Cannot watch the event loop's latency: %m"), 1;

        r = sd_event_loop(d.event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m"), 1;
        return 0;
}

int main(int argc, char **argv)
{
        return run(argc, argv);
}
