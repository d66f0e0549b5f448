/* SPDX-License-Identifier: GPL-2.0-only */
/* Which processes a profile covers. The daemon-wide filter (--pid, --comm, --unit, --cgroup) is
 * applied in BPF, so filtered-out samples cost next to nothing; the per-request one (?pid=,
 * ?comm=, ?unit=) cuts a window after the fact (aggregator/window-filter.h). Within a kind values are alternatives; kinds
 * combine with AND. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h> /* for bpf/profd-filter.h */
#include <systemd/sd-event.h>

#include "bpf/profd-filter.h"
#include "tracker/cgroup-resolver.h"
#include "util/macro.h"

/* Values per kind in one filter. */
#define SAMPLE_FILTER_MAX 16
#define SAMPLE_FILTER_VALUE_MAX 512

typedef struct SampleFilter {
        uint32_t pids[SAMPLE_FILTER_MAX];
        unsigned n_pids;
        char comms[SAMPLE_FILTER_MAX][PROFD_FILTER_COMM_LEN];
        unsigned n_comms;
        char units[SAMPLE_FILTER_MAX][SAMPLE_FILTER_VALUE_MAX];
        unsigned n_units;
        char cgroups[SAMPLE_FILTER_MAX][SAMPLE_FILTER_VALUE_MAX]; /* paths; daemon-wide only */
        unsigned n_cgroups;
} SampleFilter;

/* kind: "pid", "comm", "unit", "cgroup". On failure writes a one-line reason into err. */
int sample_filter_add(SampleFilter *f, const char *kind, const char *value, char *err, size_t errlen);
bool sample_filter_is_empty(const SampleFilter *f);
/* "pid=1,2 comm=x unit=y" for logs and page subtitles; "" when empty. */
void sample_filter_describe(const SampleFilter *f, char *buf, size_t size);

/* The rodata part for SamplerOptions.filter. */
void sample_filter_to_bpf(const SampleFilter *f, struct profd_filter_config *ret);

/* Keeps the BPF map "profd_filter_cgroups" in step with the cgroups of --unit/--cgroup: resolves
 * them now and re-resolves every few seconds (a restarted unit gets a new cgroup id). */
struct bpf_object;
typedef struct CgroupFilter CgroupFilter;
int cgroup_filter_new(sd_event *e, const SampleFilter *f, CgroupResolver *cg, struct bpf_object *obj,
                      CgroupFilter **ret);
CgroupFilter *cgroup_filter_free(CgroupFilter *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CgroupFilter *, cgroup_filter_free);
