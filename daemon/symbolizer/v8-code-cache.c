/* SPDX-License-Identifier: GPL-2.0-only */
#include "symbolizer/v8-code-cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/macro.h"
#include "util/metrics-writer.h"

typedef struct Slot {
        pid_t pid; /* 0: empty */
        uint64_t start_time, shared, pc;
        V8CodeCached v;
} Slot;

enum { LOOKUP_HIT, LOOKUP_MISS, LOOKUP_STALE, _LOOKUP_MAX };
static const char *const lookup_names[_LOOKUP_MAX] = {"hit", "miss", "stale"};

struct V8CodeCache {
        Slot *slots; /* NULL until the first put */
        uint64_t lookups[_LOOKUP_MAX], evictions;
};

int v8_code_cache_new(V8CodeCache **ret)
{
        V8CodeCache *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

V8CodeCache *v8_code_cache_free(V8CodeCache *c)
{
        if (!c)
                return NULL;
        free(c->slots);
        return mfree(c);
}

static Slot *slot_of(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc)
{
        uint64_t k[4] = {(uint64_t)pid, start_time, shared, pc};

        return &c->slots[hash_fnv1a(0xcbf29ce484222325ULL, k, sizeof(k)) & (V8_CODE_CACHE_SLOTS - 1)];
}

static bool same(const Slot *s, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc)
{
        return s->pid == pid && s->start_time == start_time && s->shared == shared && s->pc == pc;
}

const V8CodeCached *v8_code_cache_get(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared,
                                      uint64_t pc)
{
        Slot *s;

        if (!c->slots || !same(s = slot_of(c, pid, start_time, shared, pc), pid, start_time, shared, pc)) {
                c->lookups[LOOKUP_MISS]++;
                return NULL;
        }
        return &s->v;
}

void v8_code_cache_hit(V8CodeCache *c)
{
        c->lookups[LOOKUP_HIT]++;
}

void v8_code_cache_stale(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc)
{
        Slot *s;

        c->lookups[LOOKUP_STALE]++;
        if (c->slots && same(s = slot_of(c, pid, start_time, shared, pc), pid, start_time, shared, pc))
                *s = (Slot){};
}

void v8_code_cache_put(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc,
                       const V8CodeCached *v)
{
        Slot *s;

        if (!c->slots && !(c->slots = calloc(V8_CODE_CACHE_SLOTS, sizeof(Slot))))
                return;
        s = slot_of(c, pid, start_time, shared, pc);
        if (s->pid && !same(s, pid, start_time, shared, pc))
                c->evictions++;
        *s = (Slot){.pid = pid, .start_time = start_time, .shared = shared, .pc = pc, .v = *v};
}

void v8_code_cache_write_metrics(const V8CodeCache *c, FILE *f)
{
        metric_labelled(f, "profd_v8_code_cache_lookups_total", "counter",
                        "Optimized JavaScript frames looked up in the cache of named pcs: hit (the Code "
                        "still holds the pc), miss, stale (the Code is gone or changed: named afresh).",
                        "result", lookup_names, c->lookups, _LOOKUP_MAX);
        metric_counter(f, "profd_v8_code_cache_evictions_total",
                       "Named optimized-frame pcs replaced in their cache slot by another.", c->evictions);
}

size_t v8_code_cache_memory(const V8CodeCache *c)
{
        return c && c->slots ? V8_CODE_CACHE_SLOTS * sizeof(Slot) : 0;
}
