/* SPDX-License-Identifier: GPL-2.0-only */
/* The per-CPU count cache at the drain (sampler-count-cache.c). */
#pragma once

#include "sampler/sampler-internal.h"

/* Adds the pending samples of generation g's slots to s->drain's counts (records of their own
 * for keys not among them) and empties the slots. */
int sampler_count_cache_merge(Sampler *s, unsigned g);
/* Empties generation g's slots (their samples are lost: a failed drain). */
int sampler_count_cache_clear(Sampler *s, unsigned g);
