/* SPDX-License-Identifier: GPL-2.0-only */
/* Re-reading queued processes and pushing their mappings to the pool (proc-tracker-refresh.c). */
#pragma once

#include <systemd/sd-event.h>

#include "unwind/exe-cache.h"

/* After each drain of the event ring buffers: the first few processes events named. */
void tracker_on_drained(void *userdata);
/* Deferred event source: a batch of the queue per loop iteration; off once it is empty. */
int tracker_on_worker(sd_event_source *s, void *userdata);
/* An executable's table is ready (or failed): its processes are pushed again. */
void tracker_on_exe_ready(ExeEntry *e, void *userdata);
