/* SPDX-License-Identifier: GPL-2.0-only */
/* Startup checks: the kernel can run profd, and the process holds every capability profd needs.
 * Each failure is one log line naming what is missing; the daemon then exits 1. */
#pragma once

#include <stdint.h>

/* Oldest kernel profd supports: 5.10 (BPF ring buffer 5.8, CAP_BPF/CAP_PERFMON 5.8, tail calls from
 * subprograms, BTF-typed tracepoints). Newer features are probed, not inferred from this number
 * (kernel-features.h). Kept in step with README.md, docs/kernels.md and profd(8). */
#define PROFD_MIN_KERNEL_MAJOR 5
#define PROFD_MIN_KERNEL_MINOR 10

typedef struct CapabilityNeed {
        int cap;          /* CAP_* */
        int alt_cap;      /* also sufficient (the pre-split CAP_SYS_ADMIN), or -1 */
        const char *name; /* "CAP_BPF" */
        const char *why;  /* what profd does with it */
} CapabilityNeed;

/* The needed capabilities, in check order. */
const CapabilityNeed *capabilities_needed(size_t *ret_n);

/* 0, or -EPERM after logging "missing capability CAP_X (needed to ...)" for the first missing one.
 * *ret_missing (optional) gets the missing entry. */
int capabilities_check(const CapabilityNeed **ret_missing);
/* 0, or -EOPNOTSUPP after logging one line naming what the kernel lacks. */
int kernel_check_supported(void);
/* The release-number part of it: below the minimum, or a release with a known profiling bug
 * (refused unless PROFD_ALLOW_UNSAFE_KERNEL=1). -EOPNOTSUPP after logging why. */
int kernel_check_release(const char *release);
/* Bit mask of the effective set (bit n = capability n). */
int capabilities_effective(uint64_t *ret);
