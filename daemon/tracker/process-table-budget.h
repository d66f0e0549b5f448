/* SPDX-License-Identifier: GPL-2.0-only */
/* What a process costs the table, and forgetting processes to stay within its bounds
 * (process-table-budget.c). */
#pragma once

#include <stddef.h>

#include "tracker/process-table-internal.h"

size_t process_bytes(const Process *p);
/* Frees p and its mappings, and takes them off the table's memory. */
void process_free(ProcessTable *t, Process *p);
/* Forgets the process at index i of t->procs. */
void process_table_remove_at(ProcessTable *t, size_t i);
/* Makes room by forgetting the process that exited longest ago (never keep); -ENOSPC: none. */
int process_table_evict_one(ProcessTable *t, const Process *keep);
/* Over the memory budget, forgets exited processes oldest first (never keep). */
void process_table_enforce_budget(ProcessTable *t, const Process *keep);
