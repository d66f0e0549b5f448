/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>

#include "symbolizer/v8-name-cache.h"
#include "util/hash.h"
#include "util/metrics-writer.h"

_Static_assert((V8_NAME_CACHE_SLOTS & (V8_NAME_CACHE_SLOTS - 1)) == 0, "slots: a power of two");
_Static_assert(V8_NAME_CACHE_SLOTS % V8_NAME_CACHE_WAYS == 0, "whole sets");

typedef enum V8CacheResult {
        V8_CACHE_HIT,
        V8_CACHE_MISS,  /* no entry */
        V8_CACHE_STALE, /* an entry whose words changed: another function at the address now */
        _V8_CACHE_MAX,
} V8CacheResult;

static const char *const result_names[_V8_CACHE_MAX] = {
        [V8_CACHE_HIT] = "hit",
        [V8_CACHE_MISS] = "miss",
        [V8_CACHE_STALE] = "stale",
};

typedef struct V8CacheEntry {
        uint64_t fn; /* 0: free */
        uint64_t start_time;
        V8FunctionIdentity identity;
        uint32_t pid, id;
        uint64_t used; /* lookup clock of its last use */
} V8CacheEntry;

struct V8NameCache {
        V8CacheEntry *slots; /* V8_NAME_CACHE_SLOTS, allocated on the first insert */
        size_t n_entries;
        uint64_t clock;
        uint64_t results[_V8_CACHE_MAX], evictions;
};

int v8_name_cache_new(V8NameCache **ret)
{
        V8NameCache *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

V8NameCache *v8_name_cache_free(V8NameCache *c)
{
        if (!c)
                return NULL;
        free(c->slots);
        free(c);
        return NULL;
}

static V8CacheEntry *set_of(const V8NameCache *c, pid_t pid, uint64_t fn)
{
        uint64_t key[2] = {(uint64_t)pid, fn};
        uint64_t h = hash_fnv1a(0xcbf29ce484222325ULL, key, sizeof(key));

        return c->slots + (h & (V8_NAME_CACHE_SLOTS / V8_NAME_CACHE_WAYS - 1)) * V8_NAME_CACHE_WAYS;
}

static V8CacheEntry *find(const V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn)
{
        V8CacheEntry *set;

        if (!c->slots || fn == 0)
                return NULL;
        set = set_of(c, pid, fn);
        for (size_t i = 0; i < V8_NAME_CACHE_WAYS; i++)
                if (set[i].fn == fn && set[i].pid == (uint32_t)pid && set[i].start_time == start_time)
                        return &set[i];
        return NULL;
}

int v8_name_cache_get(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn,
                      V8FunctionIdentity *ret_identity, uint32_t *ret_id)
{
        V8CacheEntry *e = find(c, pid, start_time, fn);

        if (!e) {
                c->results[V8_CACHE_MISS]++;
                return -ENOENT;
        }
        /* Counted a hit here; v8_name_cache_stale() moves it when the check fails. */
        c->results[V8_CACHE_HIT]++;
        e->used = ++c->clock;
        *ret_identity = e->identity;
        *ret_id = e->id;
        return 0;
}

void v8_name_cache_stale(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn)
{
        V8CacheEntry *e = find(c, pid, start_time, fn);

        if (!e)
                return;
        c->results[V8_CACHE_HIT]--;
        c->results[V8_CACHE_STALE]++;
        *e = (V8CacheEntry){};
        c->n_entries--;
}

int v8_name_cache_put(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn,
                      const V8FunctionIdentity *identity, uint32_t id)
{
        V8CacheEntry *set, *victim;

        if (fn == 0)
                return -EINVAL;
        if (!c->slots) {
                c->slots = calloc(V8_NAME_CACHE_SLOTS, sizeof(*c->slots));
                if (!c->slots)
                        return -ENOMEM;
        }
        victim = find(c, pid, start_time, fn);
        if (!victim) {
                set = set_of(c, pid, fn);
                victim = &set[0];
                for (size_t i = 0; i < V8_NAME_CACHE_WAYS && victim->fn; i++)
                        if (!set[i].fn || set[i].used < victim->used)
                                victim = &set[i];
                if (victim->fn)
                        c->evictions++;
                else
                        c->n_entries++;
        }
        *victim = (V8CacheEntry){.fn = fn,
                                 .start_time = start_time,
                                 .identity = *identity,
                                 .pid = (uint32_t)pid,
                                 .id = id,
                                 .used = ++c->clock};
        return 0;
}

void v8_name_cache_write_metrics(const V8NameCache *c, FILE *f)
{
        static const uint64_t none[_V8_CACHE_MAX];

        metric_labelled(f, "profd_v8_name_cache_lookups_total", "counter",
                        "JavaScript function names looked up across drains, by result (stale: another "
                        "function at the address now, named again).",
                        "result", result_names, c ? c->results : none, _V8_CACHE_MAX);
        metric_counter(f, "profd_v8_name_cache_evictions_total",
                       "JavaScript function names dropped from the full cache for newer ones.",
                       c ? c->evictions : 0);
        metric_gauge(f, "profd_v8_name_cache_entries",
                     "JavaScript function addresses whose names are cached.", c ? c->n_entries : 0);
}

size_t v8_name_cache_memory(const V8NameCache *c)
{
        return c && c->slots ? V8_NAME_CACHE_SLOTS * sizeof(*c->slots) : 0;
}
