/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/window-filter.h"

static bool match(const SampleFilter *f, const AggSample *s, CgroupResolver *cg, uint64_t now_ns)
{
        bool ok;

        if (f->n_pids) {
                ok = false;
                for (unsigned i = 0; i < f->n_pids && !ok; i++)
                        ok = f->pids[i] == s->pid;
                if (!ok)
                        return false;
        }
        if (f->n_comms) {
                ok = false;
                for (unsigned i = 0; i < f->n_comms && !ok; i++)
                        ok = strncmp(s->comm, f->comms[i], PROFD_FILTER_COMM_LEN - 1) == 0 ||
                             strncmp(s->thread_comm, f->comms[i], PROFD_FILTER_COMM_LEN - 1) == 0;
                if (!ok)
                        return false;
        }
        if (f->n_units) {
                const CgroupInfo *ci =
                        cg && s->cgroup_id ? cgroup_resolver_get(cg, s->cgroup_id, now_ns) : NULL;
                ok = false;
                for (unsigned i = 0; ci && ci->unit && i < f->n_units && !ok; i++)
                        ok = strcmp(ci->unit, f->units[i]) == 0;
                if (!ok)
                        return false;
        }
        return true;
}

int profile_window_filter(ProfileWindow *w, const SampleFilter *f, CgroupResolver *cg, uint64_t now_ns)
{
        size_t keep = 0, n_drop = 0;
        AggSample *drop;

        if (sample_filter_is_empty(f) || w->n_samples == 0)
                return 0;
        drop = malloc(w->n_samples * sizeof(AggSample));
        if (!drop)
                return -ENOMEM;
        w->total = 0;
        w->off_cpu_ns = 0;
        for (size_t i = 0; i < w->n_samples; i++) {
                if (match(f, &w->samples[i], cg, now_ns)) {
                        w->samples[keep++] = w->samples[i];
                        w->total += w->samples[i].count;
                        w->off_cpu_ns += w->samples[i].off_cpu_ns;
                } else
                        drop[n_drop++] = w->samples[i];
        }
        w->n_samples = keep;
        /* The dropped samples' stack references go the way every window's do. */
        ProfileWindow *dw = calloc(1, sizeof(*dw));
        if (!dw) {
                /* Cannot release them: keep them referenced (leaked until exit) rather than crash. */
                free(drop);
                return -ENOMEM;
        }
        dw->samples = drop;
        dw->n_samples = n_drop;
        profile_window_free(dw);
        return 0;
}
