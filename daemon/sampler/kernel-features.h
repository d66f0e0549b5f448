/* SPDX-License-Identifier: GPL-2.0-only */
/* What the running kernel's BPF can do, probed once (tiny programs and maps, never the version
 * number). Each missing feature has a fallback the sampler picks; docs/kernels.md lists them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum KernelFeature {
        /* bpf_get_current_task_btf() (5.11). Fallback: bpf_get_current_task() + BPF_CORE_READ. */
        KERNEL_FEATURE_TASK_BTF,
        /* bpf_task_pt_regs() (5.15). Fallback: the pt_regs at the top of task->stack. */
        KERNEL_FEATURE_TASK_PT_REGS,
        /* Hash maps without preallocation in perf_event programs (6.1). Fallback: preallocated
         * stack and count maps, sized to the sample rate. */
        KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS,
        _KERNEL_FEATURE_MAX,
} KernelFeature;

typedef struct KernelFeatures {
        bool have[_KERNEL_FEATURE_MAX];
        bool forced_off[_KERNEL_FEATURE_MAX]; /* PROFD_KERNEL_FEATURES_OFF (benchmarks, tests) */
        uint32_t thread_size;                 /* x86-64 THREAD_SIZE: 16 KiB, 32 KiB with KASAN */
} KernelFeatures;

/* Probes once per process (later calls return the same answers). Logs each missing feature and
 * its fallback once. Never fails: a probe that cannot run counts as "missing". */
const KernelFeatures *kernel_features_get(void);
void kernel_features_write_metrics(const KernelFeatures *k, FILE *f);
