/* SPDX-License-Identifier: GPL-2.0-only */
/* Internal: sorted CFI intervals in, the compact table out (layout: bpf/profd-unwind-table.h). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cfi-error.h"
#include "unwind-table.h"

typedef struct TableBuilder TableBuilder;

/* Why an interval has no usable rule (counted into the stats). */
enum {
        UNSUP_NONE = 0,
        UNSUP_CFA,
        UNSUP_RA,
        UNSUP_RBP,
};

/* Fails with -E2BIG once the table would exceed max_bytes. */
TableBuilder *builder_new(UnwindTableStats *stats, CfiError *err, size_t rows_hint, size_t max_bytes);
TableBuilder *builder_free(TableBuilder *b);
/* Rule r applies to [a, e). Intervals arrive sorted by a; parts below what is already covered
 * are dropped (first FDE wins on overlap). */
int builder_interval(TableBuilder *b, uint64_t a, uint64_t e, const struct profd_unwind_rule *r, int unsup);
/* The ELF entry point: if no interval covers it, the gap from it to the next interval becomes an
 * outermost-frame row (PROFD_CFA_UNDEF). Call before the first interval. */
void builder_set_entry(TableBuilder *b, uint64_t entry);
/* Moves the finished table into t. */
int builder_finish(TableBuilder *b, UnwindTable *t);
size_t builder_peak_bytes(const TableBuilder *b);
