/* SPDX-License-Identifier: GPL-2.0-only */
/* The per-request filter (?pid=, ?comm=, ?unit=): cuts a profile window after the fact. */
#pragma once

#include <stdint.h>

#include "aggregator/aggregator.h"
#include "sampler/sample-filter.h"
#include "tracker/cgroup-resolver.h"

/* Drops the samples of w that f does not match (their stack references released). */
int profile_window_filter(ProfileWindow *w, const SampleFilter *f, CgroupResolver *cg, uint64_t now_ns);
