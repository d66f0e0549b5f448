/* SPDX-License-Identifier: GPL-2.0-only */
/* Anonymous executable memory (JIT code) seen through the kernel's perf mmap records, for kernels
 * where no BPF hook on mmap/mprotect can be attached (no trampolines, no kprobes). One dummy
 * software event per CPU with mmap tracking: the kernel writes a PERF_RECORD_MMAP2 for every
 * executable mapping created by mmap(2) and for every mprotect(2) that leaves a range executable,
 * into that CPU's ring, read in the sd-event loop. Delivered as PROFD_EV_ANON_EXEC events. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "bpf/profd-events.h"
#include "util/macro.h"

typedef struct PerfMmapEvents PerfMmapEvents;
typedef void (*perf_mmap_event_fn)(const struct profd_event *ev, void *userdata);

/* -EOPNOTSUPP etc. when perf events cannot be opened (the caller goes without). drained (may be
 * NULL) is called after each wake-up's records were delivered. */
int perf_mmap_events_new(sd_event *e, perf_mmap_event_fn fn, void (*drained)(void *userdata), void *userdata,
                         PerfMmapEvents **ret);
PerfMmapEvents *perf_mmap_events_free(PerfMmapEvents *pm);
DEFINE_TRIVIAL_CLEANUP_FUNC(PerfMmapEvents *, perf_mmap_events_free);
/* Reads what the rings hold now (tests, and right after the BPF rings are drained). */
void perf_mmap_events_consume(PerfMmapEvents *pm);
void perf_mmap_events_write_metrics(const PerfMmapEvents *pm, FILE *f);
