/* SPDX-License-Identifier: GPL-2.0-only */
/* Draining a retired map generation into per-interval records (sampler-drain.c). */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "sampler/sampler-internal.h"

/* Timer, SAMPLER_DRAIN_DELAY_NS after a cut: drains the retired generation and calls the
 * interval callback; on failure empties what is left so the generation can be reused. */
int sampler_on_drain_timer(sd_event_source *src, uint64_t usec, void *userdata);
/* Frees a drain's buffers. */
void sampler_drain_done(Drain *d);
