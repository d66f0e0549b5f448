/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output/frame-names.h"
#include "output/symbol-warmer.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* One step holds the event loop at most this long (a drain or a request waits that much). */
#define WARM_STEP_NS (3 * 1000 * 1000ULL)
/* Caught up: look for newly drained intervals this often (the sampler drains every second). */
#define WARM_POLL_USEC (250 * 1000ULL)
/* (pid, stack) pairs warmed recently, direct-mapped: a pair seen again costs nothing. A collision
 * only means warming a stack twice, which the symbolizer's own cache makes cheap. */
#define WARM_SEEN_SLOTS 16384

struct SymbolWarmer {
        sd_event *event;
        Aggregator *aggregator;
        Symbolizer *sym;
        ProcessTable *procs;
        sd_event_source *step, *poll;
        unsigned holds;
        AggCursor cursor;
        uint64_t seen[WARM_SEEN_SLOTS];

        uint64_t samples_total, frames_total, steps_total;
        double step_max_seconds;
};

static void warmer_arm(SymbolWarmer *w, bool backlog)
{
        int r;
        if (w->holds == 0) {
                (void)sd_event_source_set_enabled(w->step, SD_EVENT_OFF);
                (void)sd_event_source_set_enabled(w->poll, SD_EVENT_OFF);
                return;
        }
        if (backlog) {
                (void)sd_event_source_set_enabled(w->poll, SD_EVENT_OFF);
                r = sd_event_source_set_enabled(w->step, SD_EVENT_ON);
        } else {
                (void)sd_event_source_set_enabled(w->step, SD_EVENT_OFF);
                r = sd_event_source_set_time_relative(w->poll, WARM_POLL_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(w->poll, SD_EVENT_ONESHOT);
        }
        if (r < 0)
                log_warning_errno_ratelimited(r, "Cannot schedule symbol warming: %m");
}

/* True the first time (pid, stack) is seen since its slot was last taken. */
static bool first_sight(SymbolWarmer *w, const AggSample *s)
{
        uint64_t key = hash_mix64(((uint64_t)s->pid << 32) ^ (uintptr_t)s->user) | 1;
        uint64_t *slot = &w->seen[key % WARM_SEEN_SLOTS];
        if (*slot == key)
                return false;
        *slot = key;
        return true;
}

/* What the profile build will ask the symbolizer about this sample, asked now, the same way
 * (frame-names.h). */
static void warm_sample(SymbolWarmer *w, const AggSample *s)
{
        const Process *p;
        FrameName f;

        w->samples_total++;
        /* The first kernel frame loads kallsyms once; later lookups are a binary search. */
        if (s->kernel && s->kernel->n > 0)
                (void)frame_name_kernel(w->sym, s->kernel, 0, &f);
        if (!s->user || s->user->n == 0 || !first_sight(w, s))
                return;
        p = frame_names_process(w->procs, (pid_t)s->pid);
        if (!p)
                return; /* gone before it was read: the build will say so too */
        for (uint32_t i = 0; i < s->user->n; i++) {
                frame_locate_user(p, s->user, i, &f);
                if (f.kind != FRAME_USER)
                        continue; /* Python names come from their own cache; unmapped stay so */
                w->frames_total++;
                if (frame_name_resolve(w->sym, p, &f) == -ENOMEM)
                        return;
        }
}

static int on_step(sd_event_source *es, void *userdata)
{
        SymbolWarmer *w = userdata;
        uint64_t start = now_ns(CLOCK_MONOTONIC), now = start;
        const AggSample *s = NULL;

        w->steps_total++;
        symbolizer_set_background(w->sym, true);
        while (now - start < WARM_STEP_NS && (s = aggregator_cursor_next(w->aggregator, &w->cursor))) {
                warm_sample(w, s);
                now = now_ns(CLOCK_MONOTONIC);
        }
        symbolizer_set_background(w->sym, false);
        double secs = (double)(now - start) / 1e9;
        if (secs > w->step_max_seconds)
                w->step_max_seconds = secs;
        warmer_arm(w, s != NULL);
        return 0;
}

static int on_poll(sd_event_source *es, uint64_t usec, void *userdata)
{
        SymbolWarmer *w = userdata;
        warmer_arm(w, true);
        return 0;
}

int symbol_warmer_new(sd_event *e, Aggregator *a, Symbolizer *sym, ProcessTable *procs, SymbolWarmer **ret)
{
        _cleanup_(symbol_warmer_freep) SymbolWarmer *w = calloc(1, sizeof(SymbolWarmer));
        int r;

        if (!w)
                return -ENOMEM;
        *w = (SymbolWarmer){.event = sd_event_ref(e), .aggregator = a, .sym = sym, .procs = procs};
        r = sd_event_add_defer(e, &w->step, on_step, w);
        if (r < 0)
                return r;
        /* Idle priority, like profile builds: drains, cuts and requests always go first. */
        r = sd_event_source_set_priority(w->step, SD_EVENT_PRIORITY_IDLE);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(w->step, "symbol-warmer");
        r = sd_event_add_time_relative(e, &w->poll, CLOCK_MONOTONIC, WARM_POLL_USEC, 10 * 1000, on_poll, w);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(w->poll, "symbol-warmer-poll");
        warmer_arm(w, false);
        *ret = TAKE_PTR(w);
        return 0;
}

SymbolWarmer *symbol_warmer_free(SymbolWarmer *w)
{
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->step);
        sd_event_source_disable_unref(w->poll);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}

void symbol_warmer_hold(SymbolWarmer *w)
{
        if (!w)
                return;
        if (w->holds++ == 0) {
                /* What was drained before the window is not in it: start from here. And forget
                 * what earlier windows warmed: the symbolizer may have closed those executables
                 * since (it keeps SYMBOLIZER_MAX_EXES open), and a stack it still has is a cache
                 * hit anyway. */
                w->cursor = aggregator_cursor_end(w->aggregator);
                memset(w->seen, 0, sizeof(w->seen));
                warmer_arm(w, false);
        }
}

void symbol_warmer_release(SymbolWarmer *w)
{
        if (!w || w->holds == 0)
                return;
        if (--w->holds == 0)
                warmer_arm(w, false);
}

void symbol_warmer_write_metrics(const SymbolWarmer *w, FILE *f)
{
        metric_counter(f, "profd_symbol_warmer_samples_total",
                       "Aggregated samples whose stacks were symbolized ahead of a profile build, while its "
                       "window was open.",
                       w->samples_total);
        metric_counter(f, "profd_symbol_warmer_frames_total",
                       "User frames looked up ahead of a profile build.", w->frames_total);
        metric_counter(f, "profd_symbol_warmer_steps_total",
                       "Bounded warming steps run from the event loop.", w->steps_total);
        metric_family(f, "profd_symbol_warmer_step_max_seconds", "gauge",
                      "Longest warming step (the loop is held meanwhile).");
        metric_sample_double(f, "profd_symbol_warmer_step_max_seconds", NULL, w->step_max_seconds);
}
