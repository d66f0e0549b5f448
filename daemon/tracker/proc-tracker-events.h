/* SPDX-License-Identifier: GPL-2.0-only */
/* Process events applied to the tracked processes (proc-tracker-events.c). */
#pragma once

#include "tracker/proc-events.h"

/* proc_events callback: userdata is the ProcTracker. */
void tracker_on_event(const struct profd_event *ev, void *userdata);
