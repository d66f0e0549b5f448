/* SPDX-License-Identifier: GPL-2.0-only */
/* The process tracker's state, shared by the files that implement proc-tracker.h: the tracked
 * processes, their mappings as last pushed to the pool, the refresh queue and the counters. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "tracker/proc-events.h"
#include "tracker/proc-tracker.h"
#include "unwind/exe-cache.h"
#include "util/macro.h"
#include "util/pid-table.h"

/* A new mapping reported before it exists (kprobe fallback), or racing with our read of
 * /proc/PID/maps, is looked for again this much later, this many times. */
#define RECHECK_DELAY_NS (10 * 1000 * 1000ULL)
#define RECHECK_TRIES 3
/* exec -> all mappings in the pool is recorded for this long after an exec: the dynamic loader
 * maps libraries during the first milliseconds, a later dlopen is not part of start-up. */
#define EXEC_READY_WINDOW_NS (2 * NSEC_PER_SEC)
/* The exec event and the pool's exec time are taken by two programs on the same tracepoint, a few
 * microseconds apart; two execs of one process are never this close (an exec alone takes longer). */
#define SAME_EXEC_SLACK_NS (50 * 1000ULL)

typedef struct TrackedMapping {
        uint64_t start, end, offset, dev, inode;
        uint64_t load_bias;
        ExeEntry *exe;     /* NULL: anonymous, or no usable file: frame-pointer steps there */
        bool pushed_table; /* the last push gave the pool this mapping's table */
} TrackedMapping;

typedef struct Tracked {
        pid_t pid;
        TrackedMapping *maps;
        size_t n_maps;
        uint64_t refreshed_ns;
        uint64_t maps_ns; /* when maps were read (a fork copy: when the parent's were) */
        uint64_t exec_ns, ready_ns, pushed_ns;
        uint64_t exit_ns; /* its exit event's time (CLOCK_MONOTONIC); 0: not exited */
        uint64_t recheck_addr;
        uint64_t refresh_interval_ns; /* current spacing of mmap-driven re-reads */
        uint64_t deferred_until_ns;   /* held back by the spacing until then; 0: not held */
        uint8_t recheck_tries;
        uint8_t exec_reads; /* re-reads left that the spacing does not hold back (after exec) */
        bool dirty, push, queued, recheck, recheck_fired, seen;
        bool urgent;                /* exec: refresh at once whatever the spacing */
        bool exec_adopted;          /* exec_ns came from the pool, before its exec event */
        bool background;            /* found by a /proc scan, not by an event: its builds wait */
        bool queued_back;           /* queued behind the others (background) */
        bool loader_start_expected; /* exec'd: glibc's loader reports its start-up next */
        bool reported;              /* the unwinder reported it unknown since the last push */
        struct Tracked *queue_next;
} Tracked;

enum {
        MAP_ERR_NO_FILE,
        MAP_ERR_NO_LOAD_SEGMENT,
        MAP_ERR_IDENTITY,
        MAP_ERR_NO_MEMORY,
        _MAP_ERR_MAX,
};

enum {
        REFRESH_ERR_VANISHED,
        REFRESH_ERR_PERMISSION,
        REFRESH_ERR_OTHER,
        REFRESH_ERR_POOL,
        _REFRESH_ERR_MAX,
};

/* exec -> ready histogram bucket bounds (ms); the last bucket is +Inf. */
extern const unsigned tracker_ready_buckets_ms[10];
/* Names of the refresh errors (proc-tracker-metrics.c). */
extern const char *const tracker_refresh_err_names[_REFRESH_ERR_MAX];
#define N_READY_BUCKETS (ELEMENTSOF(tracker_ready_buckets_ms) + 1)

struct ProcTracker {
        sd_event *event;
        ProcessTable *procs;
        TablePool *pool;
        ExeCache *cache;
        ProcEvents *events;
        ProcTrackerOptions opts;

        /* The tracked processes, in no order (every event looks one up). */
        PidTable tracked;
        Tracked *q_head, *q_tail; /* refresh/push queue */
        size_t n_recheck;

        sd_event_source *worker, *gc_timer, *recheck_timer, *deferred_timer;
        size_t n_deferred;
        uint64_t last_sweep_ns;
        uint64_t events_dropped; /* as of the last housekeeping */
        uint64_t scan_start_ns, scan_ns;
        bool scan_pending;
        size_t scan_processes;

        uint64_t n_refresh_deferred, n_refresh_coalesced;
        uint64_t n_anon_added, n_anon_known, n_anon_reread, n_anon_dropped;
        uint64_t n_mid_exec, n_exec_fast;
        uint64_t n_loader_start_skipped;
        uint64_t loader_watch_ns; /* last time a loader uprobe was attached */
        uint64_t n_refreshes, n_unchanged, n_pushes, n_forks_copied, n_forks_shared, n_unknown_ratelimited,
                n_reconcile_new, n_reconcile_gone, n_rechecks, n_exits;
        uint64_t map_errors[_MAP_ERR_MAX];
        uint64_t refresh_errors[_REFRESH_ERR_MAX];
        uint64_t ready_hist[N_READY_BUCKETS];
        uint64_t ready_count, ready_sum_ns, n_never_ready;
};
