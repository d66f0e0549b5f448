/* SPDX-License-Identifier: GPL-2.0-only */
/* Reports from the unwinder to the daemon's process tracker: a pid whose mappings are not in the
 * pool yet, a pc outside every mapping it knows. Defines the maps "unwinder_events" and
 * "unwind_reported": include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-events.h"
#include "profd-sample.h"
#include "rate-limit.bpf.h"
#include "sample-state.bpf.h"

/* At most one unknown-pid/unknown-pc report per pid per second. */
#define PROFD_REPORT_INTERVAL_NS 1000000000ULL

/* Unknown pid / pc reports for the process tracker (struct profd_event). */
struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 64 * 1024);
} unwinder_events SEC(".maps");

/* pid -> time of its last report (once_per_interval). */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, __u64);
} unwind_reported SEC(".maps");

static __always_inline void report(struct sample_state *st, __u32 type, __u64 addr)
{
        __u32 pid = st->map_pid; /* whose mappings are missing */
        __u64 now = bpf_ktime_get_ns();
        struct profd_event *ev;

        if (!once_per_interval(&unwind_reported, pid, now, PROFD_REPORT_INTERVAL_NS))
                return;

        ev = bpf_ringbuf_reserve(&unwinder_events, sizeof(*ev), 0);
        if (!ev) {
                count(PROFD_DROP_EVENTS_RINGBUF_FULL);
                return;
        }
        ev->type = type;
        ev->pid = pid;
        ev->ppid = 0;
        ev->mnt_ns = 0;
        ev->addr = addr;
        ev->len = 0;
        ev->ktime_ns = now;
        bpf_ringbuf_submit(ev, 0);
}
