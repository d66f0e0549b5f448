/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "aggregator/aggregator.h"

/* The root-side frame that says why a user stack did not reach the entry point
 * ("[truncated: N+ frames]", "[unwind stopped: reason]"). One wording for every output
 * (pprof, folded, flame graph) so they read alike. Returns false when the stack is complete
 * and needs no marker; otherwise writes the marker into buf (always NUL-terminated). */
bool stack_marker(const Stack *user, char *buf, size_t size);
