/* SPDX-License-Identifier: GPL-2.0-only */
/* Which samples profd records. Configured before load through const volatile rodata, so an
 * empty filter costs one predictable branch per sample. Include only from profile.bpf.c. */
#pragma once

/* Upper bound of --pid values; the match loop is bounded by it. */
#define PROFD_FILTER_MAX_PIDS 64

const volatile __u32 profd_filter_n_pids = 0;
const volatile __u32 profd_filter_pids[PROFD_FILTER_MAX_PIDS] = {};

static __always_inline bool profd_sample_wanted(struct task_struct *task)
{
        __u32 tgid;

        if (profd_filter_n_pids == 0)
                return true;

        tgid = BPF_CORE_READ(task, tgid);
        for (__u32 i = 0; i < PROFD_FILTER_MAX_PIDS; i++) {
                if (i >= profd_filter_n_pids)
                        break;
                if (profd_filter_pids[i] == tgid)
                        return true;
        }
        return false;
}
