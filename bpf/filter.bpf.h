/* SPDX-License-Identifier: GPL-2.0-only */
/* Which samples profd records (--pid, --comm, --unit, --cgroup). pids and names are const volatile
 * rodata set before load, so with no filter the verifier prunes all of this and a sample pays one
 * predictable branch per kind. cgroups live in a one-entry array map because a unit's cgroup id
 * changes when it restarts; the daemon rewrites it. Include only from profile.bpf.c. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "profd-filter.h"

const volatile struct profd_filter_config profd_filter = {};

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct profd_filter_cgroups);
} profd_filter_cgroups SEC(".maps");

static __always_inline bool profd_comm_eq(const char *comm, __u32 i)
{
        /* Bounded by the comm size; names are NUL-terminated within it. */
        for (__u32 k = 0; k < PROFD_FILTER_COMM_LEN; k++) {
                char c = profd_filter.comms[i][k];
                if (comm[k] != c)
                        return false;
                if (c == 0)
                        return true;
        }
        return true;
}

static __always_inline bool profd_sample_wanted(struct task_struct *task)
{
        if (profd_filter.n_pids) {
                __u32 tgid = BPF_CORE_READ(task, tgid);
                bool found = false;
                for (__u32 i = 0; i < PROFD_FILTER_MAX_PIDS; i++) {
                        if (i >= profd_filter.n_pids)
                                break;
                        if (profd_filter.pids[i] == tgid) {
                                found = true;
                                break;
                        }
                }
                if (!found)
                        return false;
        }

        if (profd_filter.n_comms) {
                char comm[PROFD_FILTER_COMM_LEN] = {}, pcomm[PROFD_FILTER_COMM_LEN] = {};
                bool found = false;
                bpf_get_current_comm(comm, sizeof(comm));
                BPF_CORE_READ_STR_INTO(&pcomm, task, group_leader, comm);
                for (__u32 i = 0; i < PROFD_FILTER_MAX_COMMS; i++) {
                        if (i >= profd_filter.n_comms)
                                break;
                        if (profd_comm_eq(pcomm, i) || profd_comm_eq(comm, i)) {
                                found = true;
                                break;
                        }
                }
                if (!found)
                        return false;
        }

        if (profd_filter.cgroups) {
                __u32 zero = 0;
                struct profd_filter_cgroups *cg = bpf_map_lookup_elem(&profd_filter_cgroups, &zero);
                if (!cg)
                        return false;
                /* The sampled task is current; its ancestor at a filter cgroup's depth is that
                 * cgroup exactly when the task runs in it or below it. */
                for (__u32 i = 0; i < PROFD_FILTER_MAX_CGROUPS; i++) {
                        if (i >= cg->n)
                                break;
                        if (bpf_get_current_ancestor_cgroup_id((int)cg->levels[i]) == cg->ids[i])
                                return true;
                }
                return false;
        }
        return true;
}
