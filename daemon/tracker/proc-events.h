/* SPDX-License-Identifier: GPL-2.0-only */
/* Process events from the kernel (bpf/events.bpf.c: exec, exit, fork, new executable mappings)
 * and from the unwinder (unknown pid / pc), read from BPF ring buffers in the sd-event loop. */
#pragma once

#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "bpf/profd-events.h"
#include "util/macro.h"

typedef struct ProcEvents ProcEvents;
typedef void (*proc_event_fn)(const struct profd_event *ev, void *userdata);

/* Loads and attaches bpf/events.bpf.c (each hook falls back from tp_btf/fentry to raw_tp/kprobe
 * when the trampoline cannot be attached) and watches its ring buffer from e. mmap_via (tests;
 * NULL: the best that works) restricts the mmap/mprotect hooks to one way: "fexit"/"fentry",
 * "kprobe", "loader_uprobe", "sys_exit", "raw_sys_exit". */
int proc_events_new(sd_event *e, proc_event_fn fn, void *userdata, const char *mmap_via, ProcEvents **ret);
ProcEvents *proc_events_free(ProcEvents *pe);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcEvents *, proc_events_free);

/* Called after each wake-up's events were delivered (the tracker handles the processes they named
 * there, before other sources run). */
void proc_events_set_drained(ProcEvents *pe, void (*fn)(void *userdata));
/* Also deliver events from another ring buffer of struct profd_event (the unwinder's). */
int proc_events_add_ringbuf(ProcEvents *pe, int map_fd);
/* Where no mmap hook can be attached, dlopen is seen through a uprobe on the dynamic loader's
 * _dl_debug_state(); the tracker names each loader file it meets (path openable by us, e.g.
 * /proc/PID/root/lib64/ld-linux-x86-64.so.2). start_reports: how many times the loader calls the
 * hook at a program's start, the last once the libraries are mapped (glibc 2, musl 1; 0: not
 * known): execs of its programs then wake the daemon only with that last report. Returns 1 if a
 * new uprobe was attached, 0 if not needed or already watched. */
int proc_events_watch_loader(ProcEvents *pe, const char *path, uint64_t dev, uint64_t inode,
                             unsigned start_reports);
/* Whether proc_events_watch_loader() would attach anything for this file (loader uprobes in use,
 * the file not watched yet): callers open the file only then. */
bool proc_events_loader_unwatched(const ProcEvents *pe, uint64_t dev, uint64_t inode);
/* Drains what is queued now (tests, and before a reconcile sweep). */
int proc_events_consume(ProcEvents *pe);
/* Events lost so far because a ring buffer was full (kernel side). */
uint64_t proc_events_dropped(const ProcEvents *pe);
void proc_events_write_metrics(const ProcEvents *pe, FILE *f);
