/* SPDX-License-Identifier: GPL-2.0-only */
/* The process tracker's /metrics, and the names its counters are reported under. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "tracker/proc-tracker-internal.h"
#include "util/metrics-writer.h"

static const char *const map_err_names[_MAP_ERR_MAX] = {
        [MAP_ERR_NO_FILE] = "file_unopenable",
        [MAP_ERR_NO_LOAD_SEGMENT] = "no_load_segment",
        [MAP_ERR_IDENTITY] = "identity_failed",
        [MAP_ERR_NO_MEMORY] = "no_memory",
};

const char *const tracker_refresh_err_names[_REFRESH_ERR_MAX] = {
        [REFRESH_ERR_VANISHED] = "vanished",
        [REFRESH_ERR_PERMISSION] = "permission",
        [REFRESH_ERR_OTHER] = "read_failed",
        [REFRESH_ERR_POOL] = "pool_update_failed",
};

/* exec -> ready histogram bucket bounds (ms); the last bucket is +Inf. */
const unsigned tracker_ready_buckets_ms[ELEMENTSOF(tracker_ready_buckets_ms)] = {1,  2,   5,   10,  20,
                                                                                 50, 100, 200, 500, 1000};

void proc_tracker_write_metrics(const ProcTracker *t, FILE *f)
{
        uint64_t cum = 0;

        if (!t)
                return;
        proc_events_write_metrics(t->events, f);
        exe_cache_write_metrics(t->cache, f);
        metric_gauge(f, "profd_proc_tracker_processes", "Processes whose mappings the unwinder has.",
                     pid_table_size(&t->tracked));
        metric_gauge_seconds(f, "profd_proc_tracker_initial_scan_seconds",
                             "Time to read every process present at start.", t->scan_ns);
        metric_counter(f, "profd_proc_tracker_refreshes_total", "Reads of a process' mappings.",
                       t->n_refreshes);
        metric_counter(f, "profd_proc_tracker_unchanged_total",
                       "Refreshes that found the same mappings (pool left alone).", t->n_unchanged);
        metric_counter(f, "profd_proc_tracker_pushes_total",
                       "Updates of a process' entries in the unwind table pool.", t->n_pushes);
        metric_counter(f, "profd_proc_tracker_forks_copied_total",
                       "New processes given their parent's entries without reading /proc.",
                       t->n_forks_copied);
        metric_counter(f, "profd_proc_tracker_forks_shared_total",
                       "New processes sharing their parent's memory (vfork, posix_spawn): unwound with "
                       "the parent's entries until they exec, nothing written.",
                       t->n_forks_shared);
        metric_counter(f, "profd_proc_tracker_exits_total", "Process exits handled.", t->n_exits);
        metric_counter(f, "profd_proc_tracker_rechecks_total",
                       "Re-reads of maps for a mapping not yet visible.", t->n_rechecks);
        metric_counter(f, "profd_proc_tracker_unknown_ignored_total",
                       "Unknown pid/pc reports not acted on (refreshed recently, or a known mapping).",
                       t->n_unknown_ratelimited);
        metric_labelled(f, "profd_proc_tracker_reconciled_total", "counter",
                        "Processes the /proc sweep found that events missed.", "what",
                        (const char *const[]){"new", "gone"},
                        (const uint64_t[]){t->n_reconcile_new, t->n_reconcile_gone}, 2);
        metric_counter(f, "profd_proc_tracker_refreshes_deferred_total",
                       "Re-reads of a process's maps held back because it was read moments ago (mapping "
                       "churn; spacing 10 ms doubling to 1 s).",
                       t->n_refresh_deferred);
        metric_counter(f, "profd_proc_tracker_events_coalesced_total",
                       "Mapping events folded into a re-read already pending.", t->n_refresh_coalesced);
        metric_labelled(
                f, "profd_proc_tracker_anon_exec_total", "counter",
                "Anonymous executable ranges (JIT code) reported by the kernel, by what the tracker "
                "did.",
                "outcome", (const char *const[]){"added", "known", "reread", "dropped"},
                (const uint64_t[]){t->n_anon_added, t->n_anon_known, t->n_anon_reread, t->n_anon_dropped},
                4);
        metric_labelled(f, "profd_proc_tracker_exec_reads_total", "counter",
                        "Reads of a process's maps right after its exec: not held back by the spacing "
                        "(fast), found mid-exec without an image (looked at again).",
                        "kind", (const char *const[]){"fast", "mid_exec"},
                        (const uint64_t[]){t->n_exec_fast, t->n_mid_exec}, 2);
        metric_counter(f, "profd_proc_tracker_loader_start_skipped_total",
                       "glibc loader start-up reports made before it maps the libraries (the exec's read "
                       "already has those mappings): not read again.",
                       t->n_loader_start_skipped);
        metric_labelled(f, "profd_proc_tracker_errors_total", "counter",
                        "Processes or mappings left without unwind entries, by reason.", "reason",
                        tracker_refresh_err_names, t->refresh_errors, _REFRESH_ERR_MAX);
        for (unsigned i = 0; i < _MAP_ERR_MAX; i++) {
                char labels[64];

                snprintf(labels, sizeof(labels), "reason=\"mapping_%s\"", map_err_names[i]);
                metric_sample(f, "profd_proc_tracker_errors_total", labels, t->map_errors[i]);
        }
        metric_family(f, "profd_proc_tracker_exec_ready_seconds", "histogram",
                      "From exec to every mapping of the new image having its unwind table in the pool.");
        for (size_t b = 0; b < N_READY_BUCKETS; b++) {
                char labels[32];

                cum += t->ready_hist[b];
                if (b < ELEMENTSOF(tracker_ready_buckets_ms))
                        snprintf(labels, sizeof(labels), "le=\"%.3f\"",
                                 tracker_ready_buckets_ms[b] / 1000.0);
                else
                        snprintf(labels, sizeof(labels), "le=\"+Inf\"");
                metric_sample(f, "profd_proc_tracker_exec_ready_seconds_bucket", labels, cum);
        }
        metric_sample_double(f, "profd_proc_tracker_exec_ready_seconds_sum", NULL,
                             (double)t->ready_sum_ns / 1e9);
        metric_sample(f, "profd_proc_tracker_exec_ready_seconds_count", NULL, t->ready_count);
        metric_counter(
                f, "profd_proc_tracker_exec_never_ready_total",
                "Execs whose process ended (or exec'd again) before all its mappings had tables in the "
                "pool.",
                t->n_never_ready);
}
