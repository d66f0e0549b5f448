/* SPDX-License-Identifier: GPL-2.0-only */
/* ProfileWindow -> Brendan Gregg's folded stacks: one line per distinct stack, frames root first
 * separated by ';', then a space and the sample count:
 *     myprog;_start;__libc_start_main;main;work;entry_SYSCALL_64_[k];do_syscall_64_[k] 12
 * The first frame is the process name; kernel frames carry the "_[k]" suffix (as
 * stackcollapse-perf.pl --kernel writes them, so flamegraph.pl --color=java colors them apart).
 * Built as a job with bounded steps, like the pprof encoder, so the event loop keeps running. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregator/aggregator.h"
#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"
#include "util/macro.h"

#define FOLDED_KERNEL_SUFFIX "_[k]"

typedef struct FoldedJob FoldedJob;

typedef struct FoldedStack {
        char *line; /* frames root first, ';'-separated, no count */
        uint64_t count;
} FoldedStack;

/* Takes ownership of w (also on failure). */
int folded_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, FoldedJob **ret);
/* Bounded work: 0 while more remains, 1 when done, <0 on error. */
int folded_job_step(FoldedJob *j);
/* After step returned 1: the distinct stacks sorted by line; owned by the job. */
size_t folded_job_stacks(FoldedJob *j, const FoldedStack **ret);
uint64_t folded_job_total(const FoldedJob *j);
/* After step returned 1: the text, ownership passes to the caller. */
int folded_job_take_text(FoldedJob *j, void **ret_data, size_t *ret_size);
FoldedJob *folded_job_free(FoldedJob *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(FoldedJob *, folded_job_free);
