/* SPDX-License-Identifier: GPL-2.0-only */
/* Symbolizes, while profile windows are being collected, the stacks already aggregated, so that
 * the build at a window's end finds processes read, executables open and addresses resolved in the
 * symbolizer's caches. Without it the first scrape after start (or after new processes appeared)
 * pays for all of it between the window's end and the answer, where collectors leave about a
 * second. The work runs in bounded steps at idle priority on the event loop, and only while at
 * least one window is open: an idle profd does none of it. */
#pragma once

#include <stdio.h>
#include <systemd/sd-event.h>

#include "aggregator/aggregator.h"
#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct SymbolWarmer SymbolWarmer;

int symbol_warmer_new(sd_event *e, Aggregator *a, Symbolizer *sym, ProcessTable *procs, SymbolWarmer **ret);
SymbolWarmer *symbol_warmer_free(SymbolWarmer *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(SymbolWarmer *, symbol_warmer_free);

/* A window opened: warm (from the intervals added from now on, if it was idle) until as many
 * symbol_warmer_release() calls came. NULL-safe. */
void symbol_warmer_hold(SymbolWarmer *w);
void symbol_warmer_release(SymbolWarmer *w);

void symbol_warmer_write_metrics(const SymbolWarmer *w, FILE *f);
