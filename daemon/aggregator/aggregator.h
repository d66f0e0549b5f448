/* SPDX-License-Identifier: GPL-2.0-only */
/* Per-interval buckets of samples with bounded history, and a store of interned stacks
 * (refcounted, freed when no bucket references them). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sampler/sampler.h"
#include "util/macro.h"

typedef struct Aggregator Aggregator;

typedef struct Stack {
        uint64_t hash;
        unsigned refs;
        uint32_t n;
        uint32_t flags; /* user stacks: PROFD_STACK_* | stop reason; 0 for kernel */
        /* User stacks: per frame 1 = exact pc (symbolize as is), 0 = return address (pc - 1).
         * NULL: frame 0 exact, the others not (SampleRecord.user_exact). */
        const uint8_t *exact;
        uint64_t frames[]; /* leaf first */
} Stack;

typedef struct AggSample {
        uint32_t pid, tid;
        uint64_t cgroup_id;
        char comm[PROFD_COMM_LEN + 1];
        char thread_comm[PROFD_COMM_LEN + 1];
        Stack *user;   /* may be NULL */
        Stack *kernel; /* may be NULL */
        uint64_t count;
        /* Off-CPU waits (SampleRecord.off_cpu): count waits weighing off_cpu_ns in state
         * off_cpu_state. CPU and off-CPU samples never merge and never share a window. */
        bool off_cpu;
        uint8_t off_cpu_state;
        uint64_t off_cpu_ns;
} AggSample;

/* Samples of [start_ns, end_ns), identical keys summed. Holds stack references. */
typedef struct ProfileWindow {
        uint64_t start_ns, end_ns;
        unsigned frequency_hz;
        AggSample *samples;
        size_t n_samples;
        uint64_t total;
        bool off_cpu;        /* the off-CPU samples of the window, not the CPU ones */
        uint64_t off_cpu_ns; /* off-CPU: sum of off_cpu_ns */
} ProfileWindow;

int aggregator_new(uint64_t history_ns, unsigned frequency_hz, Aggregator **ret);
Aggregator *aggregator_free(Aggregator *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Aggregator *, aggregator_free);

/* The sampler's interval callback feeds this. */
void aggregator_add_interval(Aggregator *a, uint64_t start_ns, uint64_t end_ns, const SampleRecord *r,
                             size_t n);
/* Latest interval end received so far (0 if none). */
uint64_t aggregator_latest_end(const Aggregator *a);

typedef void (*aggregator_wait_cb_t)(void *userdata);
/* Calls cb once an interval ending at or after t_ns has been added; the handle (for cancel) is
 * invalid once cb has run. If that interval is already there, cb runs before this returns and
 * *ret_handle is NULL. */
int aggregator_wait_for(Aggregator *a, uint64_t t_ns, aggregator_wait_cb_t cb, void *userdata,
                        void **ret_handle);
void aggregator_cancel_wait(Aggregator *a, void *handle);

/* Merge intervals with start >= t0 && end <= t1. -ENODATA if t0 is older than the history. */
int aggregator_window(Aggregator *a, uint64_t t0, uint64_t t1, ProfileWindow **ret);
/* The same for the off-CPU samples (off_cpu) or the CPU ones. */
int aggregator_window_kind(Aggregator *a, uint64_t t0, uint64_t t1, bool off_cpu, ProfileWindow **ret);
/* The history held, [*ret_oldest, *ret_latest): the start of the oldest interval and the end of
 * the latest (both 0 while nothing is held). */
void aggregator_span(const Aggregator *a, uint64_t *ret_oldest, uint64_t *ret_latest);
/* A past window [want_t0, want_t1) moved to the interval boundaries nearest to its ends (the
 * earlier on a tie), never empty: what aggregator_window() can serve. Two windows whose asked ends
 * meet get the same boundary there, so consecutive windows tile without gap or overlap.
 * -ENODATA if nothing is held, -ERANGE if want_t0 lies before the oldest interval held. */
int aggregator_snap_window(const Aggregator *a, uint64_t want_t0, uint64_t want_t1, uint64_t *ret_t0,
                           uint64_t *ret_t1);
ProfileWindow *profile_window_free(ProfileWindow *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProfileWindow *, profile_window_free);

/* Walks the samples of the history in arrival order, each once, picking up intervals added since
 * the last call: for work done ahead of a profile build (symbol-warmer.c). Intervals evicted
 * meanwhile are skipped. */
typedef struct AggCursor {
        uint64_t seq; /* interval, counted from the first ever added */
        size_t index; /* sample within it */
} AggCursor;
/* A cursor at the end of the history: it sees only intervals added from now on. */
AggCursor aggregator_cursor_end(const Aggregator *a);
/* The next sample, or NULL when the cursor has seen everything held. Valid until the next
 * aggregator_add_interval(). */
const AggSample *aggregator_cursor_next(const Aggregator *a, AggCursor *c);

/* Pids seen in intervals added since the last call (for the process table), unique; the caller
 * frees *ret_pids. */
size_t aggregator_take_pids(Aggregator *a, uint32_t **ret_pids);
void aggregator_write_metrics(const Aggregator *a, FILE *f);
/* Memory of the history (sample records, interned stacks), for profd_memory_bytes. */
uint64_t aggregator_memory_bytes(const Aggregator *a);
