/* SPDX-License-Identifier: GPL-2.0-only */
/* Loads bpf/profile.bpf.c, samples every online CPU, and turns the in-kernel counts into
 * per-interval records. See sampler.h for the generation protocol. This file: the sampler's life
 * (new, start, free) and its cuts; loading and attaching are in sampler-bpf.c, drains in
 * sampler-drain.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sampler-bpf.h"
#include "sampler/sampler-drain.h"
#include "sampler/sampler-internal.h"
#include "sampler/sampler-offcpu.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

#include "profile.skel.h"

int sampler_new(sd_event *e, const SamplerOptions *o, sampler_interval_cb_t cb, void *userdata,
                Sampler **ret)
{
        Sampler *s;

        if (!e || !o || !cb || !ret)
                return -EINVAL;
        if (o->frequency_hz == 0 || o->drain_interval_ns < 2 * SAMPLER_DRAIN_DELAY_NS)
                return -EINVAL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(e);
        s->opts = *o;
        s->cb = cb;
        s->userdata = userdata;
        *ret = s;
        return 0;
}

Sampler *sampler_free(Sampler *s)
{
        if (!s)
                return NULL;
        sampler_detach(s);
        sampler_python_done(s);
        sd_event_source_disable_unref(s->cut_timer);
        sd_event_source_disable_unref(s->drain_timer);
        sd_event_source_disable_unref(s->hotplug_timer);
        profile_bpf__destroy(s->skel);
        sampler_drain_done(&s->drain);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

int sampler_cut(Sampler *s, uint64_t *ret_cut_ns)
{
        uint64_t t;
        int r;

        if (!s || !s->live)
                return -ESTALE;

        if (s->drain_pending) {
                /* The retired generation is not empty yet, so it cannot take samples again. The
                 * previous cut, at most SAMPLER_DRAIN_DELAY_NS ago, is an exact boundary too. */
                s->cuts_coalesced++;
                if (ret_cut_ns)
                        *ret_cut_ns = s->pending_end_ns;
                return 0;
        }

        r = sd_event_source_set_time_relative(s->drain_timer, SAMPLER_DRAIN_DELAY_NS / NSEC_PER_USEC);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(s->drain_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                return r;

        for (size_t i = 0; i < s->drain.n_namers; i++)
                if (s->drain.namers[i].cut)
                        s->drain.namers[i].cut(s->drain.namers[i].userdata);
        s->pending_gen = s->active_gen;
        s->active_gen ^= 1;
        __atomic_store_n(&s->skel->bss->profd_gen, s->active_gen, __ATOMIC_SEQ_CST);
        t = now_ns(CLOCK_REALTIME);
        r = sampler_offcpu_cut(s);
        if (r < 0)
                log_warning_errno_ratelimited(r,
                                              "Off-CPU cut failed (waits in progress count in the interval "
                                              "they end in): %m");

        s->pending_start_ns = s->interval_start_ns;
        s->pending_end_ns = t;
        s->interval_start_ns = t;
        s->drain_pending = true;
        if (ret_cut_ns)
                *ret_cut_ns = t;
        return 0;
}

static int on_cut_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
        Sampler *s = userdata;
        int r;

        r = sampler_cut(s, NULL);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Periodic cut failed: %m");

        r = sd_event_source_set_time_relative(src, s->opts.drain_interval_ns / NSEC_PER_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Failed to re-arm the cut timer: %m");
        return 0;
}

int sampler_prepare(Sampler *s)
{
        int r;

        if (!s)
                return -EINVAL;
        if (s->skel)
                return 0;
        r = sampler_load(s);
        if (r < 0)
                return r;
        /* From now on an exec drops the pid's mappings from the pool (bpf/profile.bpf.c), so that
         * what the tracker pushes before sampling starts is never an exec'd image's. */
        s->exec_link = bpf_program__attach(s->skel->progs.profd_exec);
        if (!s->exec_link)
                return log_error_errno(-errno, "Failed to attach the BPF exec hook: %m");
        /* Optional: without it the tracker deletes an exited pid's entries itself. */
        s->exit_link = bpf_program__attach(s->skel->progs.profd_exit);
        if (!s->exit_link)
                log_debug_errno(-errno, "BPF exit hook not attached, exits cost two bpf() calls more: %m");
        return 0;
}

bool sampler_exit_hook_attached(const Sampler *s)
{
        return s && s->exit_link;
}

int sampler_start(Sampler *s)
{
        int r;

        if (!s)
                return -EINVAL;
        if (s->live)
                return -EBUSY;

        r = sampler_prepare(s);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(s->event, &s->drain_timer, CLOCK_MONOTONIC,
                                       SAMPLER_DRAIN_DELAY_NS / NSEC_PER_USEC, 1000, sampler_on_drain_timer,
                                       s);
        if (r < 0)
                return log_error_errno(r, "Failed to add drain timer: %m");
        r = sd_event_source_set_enabled(s->drain_timer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(s->drain_timer, "sampler-drain");

        r = sd_event_add_time_relative(s->event, &s->cut_timer, CLOCK_MONOTONIC,
                                       s->opts.drain_interval_ns / NSEC_PER_USEC, 1000, on_cut_timer, s);
        if (r < 0)
                return log_error_errno(r, "Failed to add cut timer: %m");
        (void)sd_event_source_set_description(s->cut_timer, "sampler-cut");

        s->active_gen = 0;
        s->skel->bss->profd_gen = 0;
        s->interval_start_ns = now_ns(CLOCK_REALTIME);

        r = sampler_attach(s);
        if (r < 0) {
                sampler_detach(s);
                (void)sd_event_source_set_enabled(s->cut_timer, SD_EVENT_OFF);
                return r;
        }
        r = sd_event_add_time_relative(s->event, &s->hotplug_timer, CLOCK_MONOTONIC,
                                       SAMPLER_HOTPLUG_CHECK_NS / NSEC_PER_USEC, 100 * 1000,
                                       sampler_on_hotplug_timer, s);
        if (r < 0) {
                sampler_detach(s);
                (void)sd_event_source_set_enabled(s->cut_timer, SD_EVENT_OFF);
                return log_error_errno(r, "Failed to add the CPU hotplug check: %m");
        }
        (void)sd_event_source_set_description(s->hotplug_timer, "sampler-hotplug");
        s->live = true;
        log_info("Sampling %zu CPUs at %u Hz", s->n_links, s->opts.frequency_hz);
        return 0;
}

bool sampler_is_live(const Sampler *s)
{
        return s && s->live;
}

size_t sampler_n_cpus(const Sampler *s)
{
        return s ? s->n_links : 0;
}

double sampler_rate(const Sampler *s)
{
        return s ? s->rate : 0;
}

struct bpf_object *sampler_bpf_object(Sampler *s)
{
        return s && s->skel ? s->skel->obj : NULL;
}

int sampler_hotspot_procs_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.hotspot_procs) : -EBADF;
}

int sampler_python_procs_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.python_procs) : -EBADF;
}

int sampler_v8_procs_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.v8_procs) : -EBADF;
}

int sampler_unwinder_events_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.unwinder_events) : -EBADF;
}
