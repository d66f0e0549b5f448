/* SPDX-License-Identifier: GPL-2.0-only */
/* Sample filters (--pid, --comm, --unit, --cgroup) shared by bpf/filter.bpf.h and the daemon.
 * Includes nothing: BPF code gets __u32/__u64 from vmlinux.h, userspace from <linux/types.h>.
 * Within one kind the values are alternatives; kinds combine with AND ("--unit a --comm w": the
 * w threads of unit a). */
#pragma once

/* Upper bounds of values per kind; the BPF match loops are bounded by them. */
#define PROFD_FILTER_MAX_PIDS 64
#define PROFD_FILTER_MAX_COMMS 16
/* --unit and --cgroup together (a unit is one cgroup subtree). */
#define PROFD_FILTER_MAX_CGROUPS 32
#define PROFD_FILTER_COMM_LEN 16

/* rodata, set before load: an empty filter costs one branch per kind per sample. */
struct profd_filter_config {
        __u32 n_pids;
        __u32 n_comms;
        __u32 cgroups; /* 1: the task's cgroup must be in or below one of profd_filter_cgroups */
        __u32 _pad;
        __u32 pids[PROFD_FILTER_MAX_PIDS]; /* process ids (tgid) */
        char comms[PROFD_FILTER_MAX_COMMS][PROFD_FILTER_COMM_LEN]; /* process or thread name */
};
_Static_assert(sizeof(struct profd_filter_config) == 16 + 4 * PROFD_FILTER_MAX_PIDS +
                                                             PROFD_FILTER_MAX_COMMS * PROFD_FILTER_COMM_LEN,
               "profd_filter_config layout");

/* Value of the one-entry array map "profd_filter_cgroups": cgroup v2 ids and their depth (root 0),
 * rewritten by the daemon when a unit restarts and gets a new cgroup. n == 0 with cgroups set:
 * nothing matches (the unit is not running). */
struct profd_filter_cgroups {
        __u32 n;
        __u32 _pad;
        __u64 ids[PROFD_FILTER_MAX_CGROUPS];
        __u32 levels[PROFD_FILTER_MAX_CGROUPS];
};
_Static_assert(sizeof(struct profd_filter_cgroups) == 8 + 12 * PROFD_FILTER_MAX_CGROUPS,
               "profd_filter_cgroups layout");
