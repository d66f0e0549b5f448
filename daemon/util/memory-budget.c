/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/memory-budget.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"

typedef struct Owner {
        MemoryBudgetOwner o;
        uint64_t limit;   /* the bound given now; o.ceiling while not lowered */
        uint64_t evicted; /* entries released at the budget's request */
} Owner;

struct MemoryBudget {
        uint64_t target;
        Owner owners[MEMORY_BUDGET_MAX_OWNERS];
        size_t n_owners;
        uint64_t n_checks, n_over;
        uint32_t over_in_a_row; /* checks over the target since the last one under it */
};

int memory_budget_new(uint64_t target, MemoryBudget **ret)
{
        MemoryBudget *b = calloc(1, sizeof(*b));

        if (!b)
                return -ENOMEM;
        b->target = target ?: MEMORY_BUDGET_TARGET;
        *ret = b;
        return 0;
}

MemoryBudget *memory_budget_free(MemoryBudget *b)
{
        free(b);
        return NULL;
}

int memory_budget_add(MemoryBudget *b, const MemoryBudgetOwner *o)
{
        if (o->floor > o->ceiling || !o->bytes || !o->set_limit)
                return -EINVAL;
        if (b->n_owners >= MEMORY_BUDGET_MAX_OWNERS)
                return -E2BIG;
        b->owners[b->n_owners++] = (Owner){.o = *o, .limit = o->ceiling};
        return 0;
}

static uint64_t set_limit(Owner *w, uint64_t limit)
{
        uint64_t n;

        w->limit = limit;
        n = w->o.set_limit(w->o.userdata, limit);
        w->evicted += n;
        return n;
}

uint64_t memory_budget_check(MemoryBudget *b, uint64_t rss)
{
        uint64_t released = 0;

        b->n_checks++;
        if (rss > b->target) {
                uint64_t excess = rss - b->target;
                bool held_back = false; /* an owner not asked yet, or lowered by its step only */

                b->over_in_a_row++;
                /* In the order added: the owner whose entries cost least to lose gives first. */
                for (size_t i = 0; i < b->n_owners && excess > 0; i++) {
                        Owner *w = &b->owners[i];
                        uint64_t bytes, give;

                        if (b->over_in_a_row <= w->o.patience) {
                                held_back = true;
                                continue;
                        }
                        bytes = w->o.bytes(w->o.userdata);
                        if (bytes <= w->o.floor)
                                continue;
                        give = bytes - w->o.floor < excess ? bytes - w->o.floor : excess;
                        if (w->o.step > 0 && give > w->o.step) {
                                give = w->o.step;
                                held_back = true;
                        }
                        if (bytes - give < w->limit)
                                released += set_limit(w, bytes - give);
                        excess -= give;
                }
                /* Counted only with every owner at its floor: one held back by its hysteresis
                 * would have given. */
                b->n_over += excess > 0 && !held_back;
                return released;
        }
        b->over_in_a_row = 0;
        if (rss + MEMORY_BUDGET_SLACK < b->target) {
                uint64_t room = b->target - MEMORY_BUDGET_SLACK - rss;

                /* Back up in the same order, as far as the room goes. */
                for (size_t i = 0; i < b->n_owners && room > 0; i++) {
                        Owner *w = &b->owners[i];
                        uint64_t up = w->o.ceiling - w->limit < room ? w->o.ceiling - w->limit : room;

                        if (up == 0)
                                continue;
                        released += set_limit(w, w->limit + up);
                        room -= up;
                }
        }
        return released;
}

uint64_t memory_budget_check_self(MemoryBudget *b)
{
        uint64_t rss, n;

        if (memory_self_rss(&rss) < 0)
                return 0;
        n = memory_budget_check(b, rss);
        /* What the owners freed is heap: resident until given back. */
        if (n > 0)
                memory_release_free();
        return n;
}

uint64_t memory_budget_target(const MemoryBudget *b)
{
        return b->target;
}

uint64_t memory_budget_limit(const MemoryBudget *b, const char *name)
{
        for (size_t i = 0; i < b->n_owners; i++)
                if (strcmp(b->owners[i].o.name, name) == 0)
                        return b->owners[i].limit;
        return UINT64_MAX;
}

void memory_budget_write_metrics(const MemoryBudget *b, FILE *f)
{
        const char *names[MEMORY_BUDGET_MAX_OWNERS];
        uint64_t limits[MEMORY_BUDGET_MAX_OWNERS], evicted[MEMORY_BUDGET_MAX_OWNERS];

        for (size_t i = 0; i < b->n_owners; i++) {
                names[i] = b->owners[i].o.name;
                limits[i] = b->owners[i].limit;
                evicted[i] = b->owners[i].evicted;
        }
        metric_gauge(f, "profd_memory_target_bytes",
                     "Resident memory profd keeps under by lowering the bounds of the owners that can "
                     "give memory back.",
                     b->target);
        metric_labelled(f, "profd_memory_budget_limit_bytes", "gauge",
                        "The bound the memory budget gives each owner now (its own while RSS is under "
                        "the target).",
                        "owner", names, limits, b->n_owners);
        metric_labelled(f, "profd_memory_budget_evictions_total", "counter",
                        "Entries owners released at the memory budget's request (executables closed, "
                        "code objects and processes forgotten).",
                        "owner", names, evicted, b->n_owners);
        metric_counter(f, "profd_memory_budget_over_total",
                       "Checks (one a second) that found RSS over the target with every owner at its "
                       "floor.",
                       b->n_over);
}
