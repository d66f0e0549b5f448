/* SPDX-License-Identifier: GPL-2.0-only */
/* ProfileWindow -> gzipped pprof (Go CPU-profile conventions), incrementally: a build is a job
 * that does bounded work per step so the event loop keeps draining and serving meanwhile. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "aggregator/aggregator.h"
#include "symbolizer/symbolizer.h"
#include "tracker/labels.h"
#include "tracker/process-table.h"

typedef struct PprofJob PprofJob;

/* Value of a cgroup-derived label (LABEL_UNIT, LABEL_CONTAINER_ID) for a sample's cgroup, or
 * NULL to omit it. The string only needs to live until the call returns. */
typedef const char *(*pprof_cgroup_label_t)(void *userdata, Label label, uint64_t cgroup_id);

typedef struct PprofOptions {
        LabelSet labels; /* which labels each sample carries */
        pprof_cgroup_label_t cgroup_label; /* NULL: unit/container_id labels are left out */
        void *cgroup_userdata;
} PprofOptions;

/* Takes ownership of w (also on failure). Symbolizer and process table must outlive the job;
 * the process table may change between steps (gc, refresh): the job keeps no pointers into it
 * across steps. */
int pprof_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const PprofOptions *o, PprofJob **ret);
/* Does a bounded amount of work. Returns 0 when more remains, 1 when done, <0 on error. */
int pprof_job_step(PprofJob *j);
/* After step returned 1: the gzipped bytes (ownership passes to the caller). */
int pprof_job_take_result(PprofJob *j, void **ret_data, size_t *ret_size);
PprofJob *pprof_job_free(PprofJob *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(PprofJob *, pprof_job_free);

/* Convenience for tests and tools: runs all steps at once. */
int pprof_encode_window(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const PprofOptions *o,
                        void **ret_data, size_t *ret_size);
