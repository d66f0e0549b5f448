/* SPDX-License-Identifier: GPL-2.0-only */
/* The tracked processes (by pid) and the queue of those to re-read or push: events' processes
 * ahead of those a /proc scan found, re-reads held back by the spacing, rechecks of a mapping not
 * visible yet, and the end of tracking a process. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracker/proc-tracker-queue.h"
#include "util/log.h"
#include "util/time-util.h"

Tracked *tracked_find(ProcTracker *t, pid_t pid)
{
        return pid_table_find(&t->tracked, pid, NULL);
}

Tracked *tracked_get(ProcTracker *t, pid_t pid)
{
        Tracked *p = tracked_find(t, pid);

        if (p)
                return p;
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->pid = pid;
        if (pid_table_add(&t->tracked, p) < 0)
                return mfree(p);
        return p;
}

void tracked_maps_release(ProcTracker *t, TrackedMapping *m, size_t n)
{
        for (size_t i = 0; i < n; i++)
                exe_cache_unuse(t->cache, m[i].exe);
        free(m);
}

void tracker_record_ready(ProcTracker *t, Tracked *p)
{
        uint64_t ns, ms;
        size_t b = 0;

        if (!p->exec_ns)
                goto out;
        if (!p->ready_ns) {
                /* Exited (or exec'd again) before all its tables were in the pool, often before
                 * we read it at all: a process that lives a millisecond. */
                t->n_never_ready++;
                goto out;
        }
        ns = p->ready_ns - p->exec_ns;
        ms = ns / (NSEC_PER_SEC / 1000);
        while (b < ELEMENTSOF(tracker_ready_buckets_ms) && ms >= tracker_ready_buckets_ms[b])
                b++;
        t->ready_hist[b]++;
        t->ready_count++;
        t->ready_sum_ns += ns;
out:
        p->exec_ns = p->ready_ns = 0;
}

static void queue_unlink(ProcTracker *t, Tracked *p)
{
        Tracked *prev = NULL;

        if (!p->queued)
                return;
        /* One walk: the tail, if p was it, becomes the one before it. */
        for (Tracked **pp = &t->q_head; *pp; prev = *pp, pp = &(*pp)->queue_next)
                if (*pp == p) {
                        *pp = p->queue_next;
                        if (t->q_tail == p)
                                t->q_tail = prev;
                        break;
                }
        p->queued = false;
        p->queue_next = NULL;
}

/* Stops tracking pid: its pool entries go now (its symbolization snapshot stays in the process
 * table for the grace period). */
void tracked_drop(ProcTracker *t, Tracked *p)
{
        int r;

        tracker_record_ready(t, p);
        queue_unlink(t, p);
        if (p->recheck)
                t->n_recheck--;
        if (p->deferred_until_ns)
                t->n_deferred--;
        if (t->opts.observer.forgotten)
                t->opts.observer.forgotten(t->opts.observer.userdata, p->pid);
        if (p->pushed_ns) {
                r = p->exit_ns ? table_pool_remove_exited(t->pool, p->pid, p->exit_ns)
                               : table_pool_remove_process(t->pool, p->pid);
                if (r < 0 && r != -ENOENT)
                        log_debug_errno(r, "Removing pid %d from the unwind table pool failed: %m",
                                        (int)p->pid);
        }
        tracked_maps_release(t, p->maps, p->n_maps);
        (void)pid_table_remove(&t->tracked, p->pid);
        free(p);
}

/* Processes named by events go ahead of those found by a /proc scan (hundreds at start-up). */
static void enqueue(ProcTracker *t, Tracked *p)
{
        if (p->queued && p->queued_back && !p->background)
                queue_unlink(t, p);
        if (!p->queued) {
                p->queued = true;
                p->queue_next = NULL;
                p->queued_back = p->background;
                if (!p->background) {
                        p->queue_next = t->q_head;
                        t->q_head = p;
                        if (!t->q_tail)
                                t->q_tail = p;
                } else {
                        if (t->q_tail)
                                t->q_tail->queue_next = p;
                        else
                                t->q_head = p;
                        t->q_tail = p;
                }
        }
        if (t->worker)
                (void)sd_event_source_set_enabled(t->worker, SD_EVENT_ON);
}

void tracker_mark_dirty(ProcTracker *t, Tracked *p)
{
        if (p->dirty && (p->queued || p->deferred_until_ns))
                t->n_refresh_coalesced++;
        p->dirty = true;
        if (p->deferred_until_ns && !p->urgent && !p->exec_reads)
                return; /* the deferred timer queues it */
        enqueue(t, p);
}

static void arm_deferred_timer(ProcTracker *t, uint64_t when_ns)
{
        uint64_t cur = 0;

        if (!t->deferred_timer)
                return;
        if (sd_event_source_get_enabled(t->deferred_timer, NULL) > 0 &&
            sd_event_source_get_time(t->deferred_timer, &cur) >= 0 && cur <= when_ns / NSEC_PER_USEC)
                return;
        (void)sd_event_source_set_time(t->deferred_timer, when_ns / NSEC_PER_USEC);
        (void)sd_event_source_set_enabled(t->deferred_timer, SD_EVENT_ONESHOT);
}

void tracker_defer_refresh(ProcTracker *t, Tracked *p, uint64_t due)
{
        p->dirty = true;
        if (!p->deferred_until_ns)
                t->n_deferred++;
        p->deferred_until_ns = due;
        arm_deferred_timer(t, due);
}

/* The worker is about to re-read p: false (and p held back, counted) when p was read too
 * recently for a non-urgent read. */
bool tracker_refresh_allowed(ProcTracker *t, Tracked *p, uint64_t now)
{
        uint64_t due;

        if (p->urgent || p->exec_reads > 0 || !p->refreshed_ns || !p->refresh_interval_ns)
                return true;
        due = p->refreshed_ns + p->refresh_interval_ns;
        if (now >= due)
                return true;
        t->n_refresh_deferred++;
        tracker_defer_refresh(t, p, due);
        return false;
}

int tracker_on_deferred(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;
        uint64_t now = now_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
        size_t left = 0;

        /* One pass: queue the processes whose time has come, count the rest. */
        for (size_t k = 0; k < pid_table_size(&t->tracked); k++) {
                Tracked *p = pid_table_at(&t->tracked, k);

                if (!p->deferred_until_ns)
                        continue;
                if (p->deferred_until_ns <= now) {
                        p->deferred_until_ns = 0;
                        enqueue(t, p);
                        continue;
                }
                left++;
                if (p->deferred_until_ns < next)
                        next = p->deferred_until_ns;
        }
        t->n_deferred = left;
        if (next != UINT64_MAX)
                arm_deferred_timer(t, next);
        return 0;
}

void tracker_mark_push(ProcTracker *t, Tracked *p)
{
        p->push = true;
        enqueue(t, p);
}

void tracker_schedule_recheck(ProcTracker *t, Tracked *p, uint64_t addr)
{
        if (p->recheck_tries >= RECHECK_TRIES)
                return;
        p->recheck_tries++;
        p->recheck_addr = addr;
        if (!p->recheck) {
                p->recheck = true;
                t->n_recheck++;
        }
        if (t->recheck_timer) {
                uint64_t usec = (now_ns(CLOCK_MONOTONIC) + RECHECK_DELAY_NS) / NSEC_PER_USEC;
                (void)sd_event_source_set_time(t->recheck_timer, usec);
                (void)sd_event_source_set_enabled(t->recheck_timer, SD_EVENT_ONESHOT);
        }
}

int tracker_on_recheck(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;

        for (size_t k = 0; k < pid_table_size(&t->tracked) && t->n_recheck > 0; k++) {
                Tracked *p = pid_table_at(&t->tracked, k);

                if (p->recheck) {
                        p->recheck_fired = true;
                        t->n_rechecks++;
                        tracker_mark_dirty(t, p);
                }
        }
        return 0;
}
