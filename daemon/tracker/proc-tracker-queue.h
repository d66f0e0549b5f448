/* SPDX-License-Identifier: GPL-2.0-only */
/* The tracked processes and the queue of those to re-read or push (proc-tracker-queue.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "tracker/proc-tracker-internal.h"

Tracked *tracked_find(ProcTracker *t, pid_t pid);
/* The tracked process pid, tracking it now if it is not; NULL on ENOMEM. */
Tracked *tracked_get(ProcTracker *t, pid_t pid);
/* Stops tracking p (freed): its pool entries go, the observer is told. */
void tracked_drop(ProcTracker *t, Tracked *p);
/* Drops the cache references of n mappings and frees them. */
void tracked_maps_release(ProcTracker *t, TrackedMapping *m, size_t n);
/* Counts p's exec -> ready (or never ready) in the histogram and forgets its exec. */
void tracker_record_ready(ProcTracker *t, Tracked *p);

/* p's mappings must be read again: queued, or left to the deferred timer while the spacing holds
 * it back. */
void tracker_mark_dirty(ProcTracker *t, Tracked *p);
/* p's mappings must be pushed to the pool again (a table got ready). */
void tracker_mark_push(ProcTracker *t, Tracked *p);
/* Holds p's next read back until due (CLOCK_MONOTONIC ns). */
void tracker_defer_refresh(ProcTracker *t, Tracked *p, uint64_t due);
/* The worker is about to re-read p: false (and p held back, counted) when it was read too
 * recently for a non-urgent read. */
bool tracker_refresh_allowed(ProcTracker *t, Tracked *p, uint64_t now);
/* Looks for the mapping at addr (PROFD_EV_ADDR_UNKNOWN: any change) again shortly. */
void tracker_schedule_recheck(ProcTracker *t, Tracked *p, uint64_t addr);

/* Timers: processes whose spacing ran out, processes due for a recheck. */
int tracker_on_deferred(sd_event_source *s, uint64_t usec, void *userdata);
int tracker_on_recheck(sd_event_source *s, uint64_t usec, void *userdata);
