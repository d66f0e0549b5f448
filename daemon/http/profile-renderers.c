/* SPDX-License-Identifier: GPL-2.0-only */
/* The renderer trampolines: pprof, folded stacks and the flame graph page, started on a window,
 * stepped from the event loop and taken as a malloc()ed body. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "http/profile-query.h"
#include "http/profile-renderers.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/pprof-encode.h"

static int pprof_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        PprofOptions o = {
                .labels = q->labels,
                .cgroup_label = cgroup_resolver_label, /* unit, container_id */
                .cgroup_userdata = d->cgroups,
        };
        return pprof_job_new(w, d->symbolizer, d->processes, &o, (PprofJob **)ret_job);
}
static int pprof_step(void *job)
{
        return pprof_job_step(job);
}
static int pprof_take(void *job, void **ret_data, size_t *ret_size)
{
        return pprof_job_take_result(job, ret_data, ret_size);
}
static void pprof_free(void *job)
{
        pprof_job_free(job);
}

const ProfileRenderer profile_renderer_pprof = {
        .format = "pprof",
        .content_type = "application/octet-stream",
        .content_disposition = "attachment; filename=\"profile\"",
        .start = pprof_start,
        .step = pprof_step,
        .take_result = pprof_take,
        .free = pprof_free,
};

static int folded_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        return folded_job_new(w, d->symbolizer, d->processes, (FoldedJob **)ret_job);
}
static int folded_step(void *job)
{
        return folded_job_step(job);
}
static int folded_take(void *job, void **ret_data, size_t *ret_size)
{
        return folded_job_take_text(job, ret_data, ret_size);
}
static void folded_free(void *job)
{
        folded_job_free(job);
}

static const ProfileRenderer profile_renderer_folded = {
        .format = "folded",
        .content_type = "text/plain; charset=utf-8",
        .start = folded_start,
        .step = folded_step,
        .take_result = folded_take,
        .free = folded_free,
};

static int flamegraph_start(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job)
{
        char host[256] = "", filters[1024], title[400], subtitle[1400], when[64];
        time_t t0 = (time_t)(w->start_ns / NSEC_PER_SEC);
        struct tm tm;

        (void)gethostname(host, sizeof(host) - 1);
        sample_filter_describe(&q->filter, filters, sizeof(filters));
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&t0, &tm));
        snprintf(title, sizeof(title), "%s flame graph of %s", w->off_cpu ? "Off-CPU" : "CPU",
                 host[0] ? host : "this host");
        if (w->off_cpu)
                snprintf(subtitle, sizeof(subtitle),
                         "%u s from %s, %" PRIu64
                         " waits recorded, %.3f s off CPU (widths: nanoseconds)%s%s",
                         q->seconds, when, w->total, (double)w->off_cpu_ns / NSEC_PER_SEC,
                         filters[0] ? "; filters: " : "", filters);
        else
                snprintf(subtitle, sizeof(subtitle),
                         "%u s from %s at %u Hz per CPU, %" PRIu64 " samples%s%s", q->seconds, when,
                         w->frequency_hz, w->total, filters[0] ? "; filters: " : "", filters);
        FlamegraphInfo info = {.title = title, .subtitle = subtitle};
        return flamegraph_job_new(w, d->symbolizer, d->processes, &info, (FlamegraphJob **)ret_job);
}
static int flamegraph_step(void *job)
{
        return flamegraph_job_step(job);
}
static int flamegraph_take(void *job, void **ret_data, size_t *ret_size)
{
        return flamegraph_job_take_result(job, ret_data, ret_size);
}
static void flamegraph_free(void *job)
{
        flamegraph_job_free(job);
}

const ProfileRenderer profile_renderer_flamegraph = {
        .format = "flamegraph",
        .content_type = "text/html; charset=utf-8",
        .start = flamegraph_start,
        .step = flamegraph_step,
        .take_result = flamegraph_take,
        .free = flamegraph_free,
};

/* ?format= values. */
static const ProfileRenderer *const renderers[] = {
        &profile_renderer_pprof,
        &profile_renderer_folded,
        &profile_renderer_flamegraph,
};

const ProfileRenderer *profile_renderer_find(const char *format)
{
        for (size_t i = 0; i < ELEMENTSOF(renderers); i++)
                if (strcmp(format, renderers[i]->format) == 0)
                        return renderers[i];
        return NULL;
}
