/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table's /metrics. */
#include <inttypes.h>
#include <stdio.h>

#include "tracker/process-table-internal.h"
#include "util/metrics-writer.h"

void process_table_write_metrics(const ProcessTable *t, FILE *f)
{
        size_t exited = 0, mappings = 0;

        for (size_t i = 0; i < pid_table_size(&t->procs); i++) {
                exited += process_at(t, i)->exited_ns != 0;
                mappings += process_at(t, i)->n_mappings;
        }
        metric_gauge(f, "profd_process_table_processes",
                     "Processes whose mappings are known (incl. exited, kept for symbolization).",
                     pid_table_size(&t->procs));
        metric_gauge(f, "profd_process_table_exited_processes",
                     "Exited processes kept for the grace period.", exited);
        metric_gauge(f, "profd_process_table_mappings", "Executable mappings known.", mappings);
        metric_gauge(f, "profd_process_table_files", "Distinct mapped files known.", t->files.n);
        metric_gauge(f, "profd_process_table_open_files", "Mapped files held open for later symbolization.",
                     t->n_open_fds);
        metric_gauge(f, "profd_process_table_open_files_limit",
                     "Most mapped files held open (half the fd limit, <= 256).", t->max_open_fds);
        metric_counter(f, "profd_process_table_reads_total", "Reads of /proc/PID/maps.", t->n_reads);
        metric_counter(f, "profd_process_table_quick_reads_total",
                       "Reads of /proc/PID/maps within 100 ms of the last one of the same image, which "
                       "take its stat and mount namespace from that one.",
                       t->n_quick_reads);
        metric_counter(f, "profd_process_table_exec_event_reads_total",
                       "First reads of a new image that take its start time, name and mount namespace "
                       "from its exec event instead of /proc/PID/stat.",
                       t->n_exec_event_reads);
        metric_labelled(f, "profd_process_table_errors_total", "counter",
                        "Problems reading processes, by reason.", "reason",
                        (const char *const[]){"read_failed", "malformed_maps_line", "mappings_truncated",
                                              "file_unopenable", "not_elf", "table_full"},
                        (const uint64_t[]){t->n_read_errors, t->n_bad_lines, t->n_truncated, t->n_no_file,
                                           t->n_not_elf, t->n_table_full},
                        6);
        metric_labelled(f, "profd_process_table_events_total", "counter",
                        "Process lifecycle events seen by the table.", "event",
                        (const char *const[]){"exited", "forgotten", "evicted", "pid_reused",
                                              "evicted_memory", "open_file_closed"},
                        (const uint64_t[]){t->n_exited_total, t->n_forgotten, t->n_evicted, t->n_pid_reuse,
                                           t->n_evicted_memory, t->n_fd_evicted},
                        6);
        metric_gauge(f, "profd_process_table_memory_bytes",
                     "Heap held by the table: snapshots, mappings, files, interned paths.",
                     process_table_memory(t));
        metric_gauge(f, "profd_process_table_memory_limit_bytes",
                     "The table's budget (--process-table-memory).", t->max_bytes);
        metric_gauge(f, "profd_process_table_paths", "Distinct mapping paths (interned).",
                     string_pool_count(t->paths));
        metric_labelled(f, "profd_process_table_mappings_dropped_total", "counter",
                        "Executable mappings not kept when a process was read, by reason.", "reason",
                        (const char *const[]){"over_memory_budget"},
                        (const uint64_t[]){t->n_truncated_memory}, 1);
        metric_labelled(f, "profd_process_table_fork_copies_total", "counter",
                        "New processes given a copy of their parent's snapshot at fork, by outcome.",
                        "outcome",
                        (const char *const[]){"copied", "parent_unknown", "over_bounds", "dropped_at_exec"},
                        (const uint64_t[]){t->n_forks_copied, t->n_fork_no_parent, t->n_fork_skipped,
                                           t->n_fork_copies_dropped},
                        4);
}
