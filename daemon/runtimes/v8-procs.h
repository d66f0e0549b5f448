/* SPDX-License-Identifier: GPL-2.0-only */
/* Which processes run V8 (Node.js), and how BPF reads their JavaScript frames. After the tracker
 * reads a process's mappings, v8_procs_note() looks among its executable mapped files named like
 * Node.js (node, nodejs, libnode.so.*) for V8's post-mortem metadata (v8-offsets.h) and writes the
 * frame layout it gives to the BPF map v8_procs (bpf/profd-v8.h). A V8 build without the metadata,
 * or with a layout profd does not read, is counted and left to native unwinding (and perf maps). */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtimes/v8-offsets.h"
#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct V8Procs V8Procs;

/* What naming a V8 frame of the process needs. */
typedef struct V8Process {
        pid_t pid;
        uint64_t start_time;
        V8Offsets offsets;
} V8Process;

/* map_fd: the BPF map v8_procs; -1 for none (tests of detection alone). */
int v8_procs_new(int map_fd, V8Procs **ret);
V8Procs *v8_procs_free(V8Procs *vp);
DEFINE_TRIVIAL_CLEANUP_FUNC(V8Procs *, v8_procs_free);

/* p's mappings were (re)read: describe its V8 to BPF, or forget it if it has none. */
void v8_procs_note(V8Procs *vp, const Process *p);
/* pid exited or is no longer tracked. */
void v8_procs_forget(V8Procs *vp, pid_t pid);
/* The live process pid whose JavaScript frames BPF reads, or NULL. */
const V8Process *v8_procs_get(const V8Procs *vp, pid_t pid);

/* profd_v8_processes, profd_v8_detections_total{outcome}, profd_v8_file_probes_total{result}. */
void v8_procs_write_metrics(const V8Procs *vp, FILE *f);
