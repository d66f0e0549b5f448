/* SPDX-License-Identifier: GPL-2.0-only */
/* The process tracker's life: start (hooks, then the /proc scan), housekeeping and the /proc
 * sweep, end. Tracked processes and their queue are in proc-tracker-queue.c, re-reads and pushes
 * in proc-tracker-refresh.c, events in proc-tracker-events.c. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracker/proc-tracker-events.h"
#include "tracker/proc-tracker-queue.h"
#include "tracker/proc-tracker-refresh.h"
#include "util/log.h"
#include "util/time-util.h"

/* Executables no process maps are forgotten after this (the pool may keep their rows longer). */
#define DEFAULT_EXE_GRACE_NS (30 * NSEC_PER_SEC)
#define DEFAULT_SWEEP_INTERVAL_NS (60 * NSEC_PER_SEC)
/* Housekeeping (cache grace) runs this often; the /proc reconcile every sweep_interval. */
#define GC_INTERVAL_NS (10 * NSEC_PER_SEC)

static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

/* Every process in /proc gets tracked (and refreshed from the worker); tracked processes that are
 * no longer there missed their exit event. */
static int scan_proc(ProcTracker *t, bool reconcile)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;

        d = opendir("/proc");
        if (!d)
                return log_error_errno_ratelimited(-errno, "Cannot read /proc: %m");
        for (size_t k = 0; k < pid_table_size(&t->tracked); k++)
                ((Tracked *)pid_table_at(&t->tracked, k))->seen = false;
        while ((de = readdir(d))) {
                char *end;
                long pid;
                Tracked *p;

                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX)
                        continue;
                p = tracked_find(t, (pid_t)pid);
                if (!p) {
                        p = tracked_get(t, (pid_t)pid);
                        if (!p)
                                return -ENOMEM;
                        p->background = true;
                        tracker_mark_dirty(t, p);
                        if (reconcile)
                                t->n_reconcile_new++;
                }
                p->seen = true;
                n++;
        }
        /* Backwards: a drop moves the last process, looked at already, into the hole. */
        for (size_t k = pid_table_size(&t->tracked); k-- > 0;) {
                Tracked *p = pid_table_at(&t->tracked, k);

                if (!p->seen) {
                        t->n_reconcile_gone += reconcile;
                        process_table_mark_exited(t->procs, p->pid, now_ns(CLOCK_REALTIME));
                        tracked_drop(t, p);
                }
        }
        t->scan_processes = n;
        return 0;
}

static int on_gc(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;
        uint64_t now = now_ns(CLOCK_MONOTONIC), dropped;

        exe_cache_gc(t->cache, now);
        for (size_t k = 0; k < pid_table_size(&t->tracked); k++) {
                Tracked *p = pid_table_at(&t->tracked, k);

                /* Long-running processes: their start-up is over, observe it now, not at exit. */
                if (p->exec_ns && now > p->exec_ns + EXEC_READY_WINDOW_NS)
                        tracker_record_ready(t, p);
                /* A mapping whose executable has neither a table nor a queued build: the refresh
                 * gives the cache a file to build from. */
                for (size_t i = 0; i < p->n_maps; i++)
                        if (p->maps[i].exe && p->maps[i].exe->state == EXE_NEW) {
                                tracker_mark_dirty(t, p);
                                break;
                        }
        }
        /* Lost events (ring buffer full in a burst) mean missed execs/exits: reconcile now
         * rather than at the next sweep. */
        dropped = proc_events_dropped(t->events);
        if (dropped != t->events_dropped) {
                t->events_dropped = dropped;
                t->last_sweep_ns = 0;
        }
        if (now - t->last_sweep_ns >= t->opts.sweep_interval_ns) {
                t->last_sweep_ns = now;
                /* Events already queued are not "missed": handle them first. */
                (void)proc_events_consume(t->events);
                if (!t->opts.no_initial_scan)
                        (void)scan_proc(t, true);
        }
        (void)sd_event_source_set_time(s, (now + GC_INTERVAL_NS) / NSEC_PER_USEC);
        return 0;
}

int proc_tracker_new(sd_event *e, ProcessTable *procs, TablePool *pool, const ProcTrackerOptions *opts,
                     ProcTracker **ret)
{
        _cleanup_(proc_tracker_freep) ProcTracker *t = NULL;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->event = sd_event_ref(e);
        t->tracked = PID_TABLE_INIT(Tracked, pid);
        t->procs = procs;
        t->pool = pool;
        if (opts)
                t->opts = *opts;
        if (!t->opts.exe_grace_ns)
                t->opts.exe_grace_ns = DEFAULT_EXE_GRACE_NS;
        if (!t->opts.sweep_interval_ns)
                t->opts.sweep_interval_ns = DEFAULT_SWEEP_INTERVAL_NS;

        r = exe_cache_new(e, pool, t->opts.exe_grace_ns, tracker_on_exe_ready, t, &t->cache);
        if (r < 0)
                return r;

        /* Below the sample drains and HTTP (priority 0), above table builds (idle). */
        r = sd_event_add_defer(e, &t->worker, tracker_on_worker, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_priority(t->worker, SD_EVENT_PRIORITY_NORMAL + 10);
        (void)sd_event_source_set_enabled(t->worker, SD_EVENT_OFF);
        (void)sd_event_source_set_description(t->worker, "process-tracker");

        r = sd_event_add_time(e, &t->recheck_timer, CLOCK_MONOTONIC, 0, 1000, tracker_on_recheck, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->recheck_timer, SD_EVENT_OFF);

        r = sd_event_add_time(e, &t->deferred_timer, CLOCK_MONOTONIC, 0, 1000, tracker_on_deferred, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->deferred_timer, SD_EVENT_OFF);
        (void)sd_event_source_set_description(t->deferred_timer, "process-tracker-deferred");

        t->last_sweep_ns = now_ns(CLOCK_MONOTONIC);
        r = sd_event_add_time(e, &t->gc_timer, CLOCK_MONOTONIC,
                              (t->last_sweep_ns + GC_INTERVAL_NS) / NSEC_PER_USEC,
                              NSEC_PER_SEC / NSEC_PER_USEC, on_gc, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->gc_timer, SD_EVENT_ON);
        (void)sd_event_source_set_priority(t->gc_timer, SD_EVENT_PRIORITY_IDLE);

        /* Hooks first, then the scan: a process that starts in between is seen by one of them. */
        r = proc_events_new(e, tracker_on_event, t, t->opts.mmap_via, &t->events);
        if (r < 0)
                return r;
        proc_events_set_drained(t->events, tracker_on_drained);

        if (!t->opts.no_initial_scan) {
                t->scan_start_ns = now_ns(CLOCK_MONOTONIC);
                t->scan_pending = true;
                r = scan_proc(t, false);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

ProcTracker *proc_tracker_free(ProcTracker *t)
{
        if (!t)
                return NULL;
        proc_events_free(t->events);
        sd_event_source_disable_unref(t->worker);
        sd_event_source_disable_unref(t->gc_timer);
        sd_event_source_disable_unref(t->recheck_timer);
        sd_event_source_disable_unref(t->deferred_timer);
        while (pid_table_size(&t->tracked) > 0)
                tracked_drop(t, pid_table_at(&t->tracked, pid_table_size(&t->tracked) - 1));
        pid_table_done(&t->tracked);
        exe_cache_free(t->cache);
        sd_event_unref(t->event);
        return mfree(t);
}

int proc_tracker_add_unwinder_events(ProcTracker *t, int ringbuf_map_fd)
{
        return proc_events_add_ringbuf(t->events, ringbuf_map_fd);
}

int proc_tracker_refresh_pid(ProcTracker *t, pid_t pid)
{
        Tracked *p;

        if (pid <= 0)
                return -EINVAL;
        p = tracked_get(t, pid);
        if (!p)
                return -ENOMEM;
        p->background = false;
        tracker_mark_dirty(t, p);
        return 0;
}

size_t proc_tracker_n_processes(const ProcTracker *t)
{
        return t ? pid_table_size(&t->tracked) : 0;
}

bool proc_tracker_busy(const ProcTracker *t)
{
        return t->q_head || exe_cache_queued(t->cache) > 0 || t->n_recheck > 0;
}
