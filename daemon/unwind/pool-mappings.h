/* SPDX-License-Identifier: GPL-2.0-only */
/* The pool's per-process mapping entries (pool-mappings.c), for lifecycle and compaction. */
#pragma once

#include "unwind/table-pool-internal.h"

void pool_proc_free(Proc *pr);
/* Writes pr's entries for m (new ones first, then deletes the keys no longer used, so a pc
 * never goes missing during the update). */
int pool_proc_write_entries(TablePool *p, Proc *pr, const PoolMapping *m, size_t n);
