/* SPDX-License-Identifier: GPL-2.0-only */
/* Process tracker: keeps the BPF unwinder's per-process mapping entries (table pool) in step with
 * the processes on the host. Learns of exec, exit, fork and new executable mappings from BPF
 * hooks (proc-events.h), of processes the unwinder met but does not know from its unknown-pid /
 * unknown-pc events, and of processes that predate the daemon from a scan of /proc at start; a
 * slow sweep reconciles anything missed. Unwind tables come from the executable cache
 * (exe-cache.h), built off the hot path. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "tracker/process-table.h"
#include "unwind/table-pool.h"
#include "util/macro.h"

typedef struct ProcTracker ProcTracker;

/* Told of every process whose mappings were (re)read and pushed to the pool, and of every process
 * the tracker stops tracking: the runtime walkers (runtimes/) describe their processes to BPF from
 * the same mappings. The tracker knows nothing of runtimes; main.c wires them in. */
typedef struct ProcTrackerObserver {
        void (*mapped)(void *userdata, const Process *p);
        void (*forgotten)(void *userdata, pid_t pid);
        void *userdata;
} ProcTrackerObserver;

typedef struct ProcTrackerOptions {
        uint64_t exe_grace_ns;      /* unused executables are forgotten after this; 0: 30 s */
        uint64_t sweep_interval_ns; /* reconcile with /proc this often; 0: 60 s */
        bool no_initial_scan;       /* tests: track only processes that events name */
        const char *mmap_via;       /* tests: force one way of seeing new mappings (proc-events.h) */
        ProcTrackerObserver observer; /* all NULL: none */
} ProcTrackerOptions;

/* Loads and attaches the process event hooks, scans /proc and starts tracking. opts may be NULL. */
int proc_tracker_new(sd_event *e, ProcessTable *procs, TablePool *pool, const ProcTrackerOptions *opts,
                     ProcTracker **ret);
ProcTracker *proc_tracker_free(ProcTracker *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcTracker *, proc_tracker_free);

/* Also read the unwinder's ring buffer of struct profd_event (UNKNOWN_PID / UNKNOWN_PC). */
int proc_tracker_add_unwinder_events(ProcTracker *t, int ringbuf_map_fd);

/* Re-read pid's mappings soon (from the loop), as an event would. */
int proc_tracker_refresh_pid(ProcTracker *t, pid_t pid);

typedef struct ProcTrackerProcess {
        size_t n_mappings;   /* executable mappings pushed to the pool */
        size_t n_with_table; /* ... whose unwind table is in the pool */
        size_t n_pending;    /* ... whose table is still being built */
        uint64_t pushed_ns;  /* CLOCK_MONOTONIC of the last push to the pool */
        uint64_t exec_ns;    /* CLOCK_MONOTONIC of the last exec (0: none seen) */
} ProcTrackerProcess;

/* What the tracker has pushed to the pool for pid; -ENOENT when it does not track it. */
int proc_tracker_get_process(ProcTracker *t, pid_t pid, ProcTrackerProcess *ret);
/* Whether pid has a mapping of a file whose path ends in suffix, and whether it was pushed to the
 * pool with its table (tests). */
int proc_tracker_find_mapping(ProcTracker *t, pid_t pid, const char *path_suffix, bool *ret_has_table);
/* pid's unwinding state as text, one "key value" per line: state ready|pending|reading, counts, and
 * one "mapping START-END table|pending|none PATH" line per executable mapping. -ENOENT: untracked. */
int proc_tracker_write_process(ProcTracker *t, pid_t pid, FILE *f);
size_t proc_tracker_n_processes(const ProcTracker *t);
/* Reads the queued processes (those the start-up scan found) now, for at most budget_ns, outside
 * the event loop: at start, before sampling. Returns how many are still queued. */
size_t proc_tracker_settle(ProcTracker *t, uint64_t budget_ns);
/* True while processing is queued (events, refreshes, builds): tests run the loop until idle. */
bool proc_tracker_busy(const ProcTracker *t);

void proc_tracker_write_metrics(const ProcTracker *t, FILE *f);
