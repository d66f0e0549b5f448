/* SPDX-License-Identifier: GPL-2.0-only */
/* One memory budget for the owners of profd_memory_bytes. Each owner has its own bound, but the
 * bounds add up to more than profd may hold (the symbolizer's 48 MiB, Python code 8 MiB, the
 * process table 32 MiB, Java names ~13 MiB, profd's code ~12 MiB, ...): over an hour of a busy
 * host the steady owners grew together past 128 MiB. The budget watches the resident total, and
 * while it is over its target it lowers the bounds of the owners that can give memory back, in
 * the order they were added (the one that loses least first: an executable closed is opened again
 * on demand, a code object of a running process read again), each down to its floor; when the
 * total is back under the target less a margin, their bounds go back up towards their own. Nothing
 * is forgotten without being counted: what the owners release at the budget's request is counted
 * by owner on /metrics. Knows nothing of the owners: main.c adds them with callbacks. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/macro.h"

/* What profd aims to stay under (RSS), with room for the peaks of a profile build to the 128 MiB
 * that profd promises (docs/performance.md, "Memory on a busy host"). */
#define MEMORY_BUDGET_TARGET (100ULL << 20)
/* Bounds go back up only once RSS is this far under the target: no raise-lower cycle each check. */
#define MEMORY_BUDGET_SLACK (8ULL << 20)
/* Owners that can be asked; a fixed few (main.c adds them). */
#define MEMORY_BUDGET_MAX_OWNERS 8

typedef struct MemoryBudgetOwner {
        const char *name; /* static; as in profd_memory_bytes{owner} */
        /* Bytes the owner holds now, as its bound counts them. */
        uint64_t (*bytes)(void *userdata);
        /* Sets the owner's bound to max_bytes: it releases what is over it now (least recently used
         * first) and keeps under it from then on. Returns how many entries it released. */
        uint64_t (*set_limit)(void *userdata, uint64_t max_bytes);
        uint64_t floor;   /* never asked to go under this */
        uint64_t ceiling; /* its own bound: never raised above this */
        void *userdata;
        /* Hysteresis for owners whose entries are dear to lose (an exited process's are not read
         * again): asked only after this many checks in a row over the target (0: at the first), so
         * a peak of a second or two is left to the owners before it; and lowered at most step
         * bytes a check (0: as far as the excess goes), so a longer one does not drop it to its
         * floor at once. */
        uint32_t patience;
        uint64_t step;
} MemoryBudgetOwner;

typedef struct MemoryBudget MemoryBudget;

int memory_budget_new(uint64_t target, MemoryBudget **ret);
MemoryBudget *memory_budget_free(MemoryBudget *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(MemoryBudget *, memory_budget_free);
/* -E2BIG past MEMORY_BUDGET_MAX_OWNERS, -EINVAL if floor > ceiling. */
int memory_budget_add(MemoryBudget *b, const MemoryBudgetOwner *o);
/* One check against rss (profd's resident bytes now): lowers or raises the owners' bounds.
 * Returns the entries released. */
uint64_t memory_budget_check(MemoryBudget *b, uint64_t rss);
/* The same with profd's own RSS (/proc/self/statm); gives freed heap back when anything was
 * released. */
uint64_t memory_budget_check_self(MemoryBudget *b);
/* The RSS the budget keeps profd under. */
uint64_t memory_budget_target(const MemoryBudget *b);
/* The bound the budget gives owner name now (its ceiling if not lowered); UINT64_MAX if unknown. */
uint64_t memory_budget_limit(const MemoryBudget *b, const char *name);
/* profd_memory_target_bytes, profd_memory_budget_limit_bytes{owner},
 * profd_memory_budget_evictions_total{owner}, profd_memory_budget_over_total. */
void memory_budget_write_metrics(const MemoryBudget *b, FILE *f);
