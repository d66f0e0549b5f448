/* SPDX-License-Identifier: GPL-2.0-only */
#include "symbolizer/v8-chains.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/macro.h"
#include "util/metrics-writer.h"

/* Id i lives in slot (i - 1) % max (as v8-pairs.c). */
typedef struct Slot {
        uint32_t id;   /* 0: empty */
        uint32_t next; /* slot + 1 of the next in its bucket; 0: end */
        uint64_t hash;
        uint32_t n;
        V8ChainLink links[V8_CHAIN_LEN_MAX];
} Slot;

struct V8Chains {
        Slot *slots;
        uint32_t *buckets;
        size_t max, n_buckets, n_kept;
        uint32_t next_id, max_id;
        uint64_t n_forgotten, n_used_up;
};

int v8_chains_new(size_t max, uint32_t max_id, V8Chains **ret)
{
        V8Chains *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->max = max ?: V8_CHAINS_MAX;
        if (c->max > max_id)
                c->max = max_id;
        for (c->n_buckets = 64; c->n_buckets < c->max; c->n_buckets *= 2)
                ;
        /* calloc: pages are touched only as slots are used. */
        c->slots = calloc(c->max, sizeof(Slot));
        c->buckets = calloc(c->n_buckets, sizeof(uint32_t));
        if (!c->slots || !c->buckets) {
                v8_chains_free(c);
                return -ENOMEM;
        }
        c->next_id = 1;
        c->max_id = max_id;
        *ret = c;
        return 0;
}

V8Chains *v8_chains_free(V8Chains *c)
{
        if (!c)
                return NULL;
        free(c->slots);
        free(c->buckets);
        return mfree(c);
}

static void forget_slot(V8Chains *c, uint32_t slot)
{
        Slot *s = &c->slots[slot];
        uint32_t *at = &c->buckets[s->hash & (c->n_buckets - 1)];

        while (*at && *at != slot + 1) /* bounded by the bucket's length */
                at = &c->slots[*at - 1].next;
        if (*at)
                *at = s->next;
        *s = (Slot){};
        c->n_kept--;
        c->n_forgotten++;
}

uint32_t v8_chains_intern(V8Chains *c, const V8ChainLink *links, size_t n)
{
        uint64_t h;
        size_t b;
        uint32_t slot;

        if (n < 1 || n > V8_CHAIN_LEN_MAX)
                return 0;
        h = hash_fnv1a(0xcbf29ce484222325ULL, links, n * sizeof(*links));
        b = h & (c->n_buckets - 1);
        for (uint32_t i = c->buckets[b]; i; i = c->slots[i - 1].next) {
                const Slot *s = &c->slots[i - 1];

                if (s->hash == h && s->n == n && memcmp(s->links, links, n * sizeof(*links)) == 0)
                        return s->id;
        }
        if (c->next_id > c->max_id) {
                c->n_used_up++;
                return 0;
        }
        slot = (c->next_id - 1) % c->max;
        if (c->slots[slot].id)
                forget_slot(c, slot);
        c->slots[slot] = (Slot){.id = c->next_id++, .next = c->buckets[b], .hash = h, .n = (uint32_t)n};
        memcpy(c->slots[slot].links, links, n * sizeof(*links));
        c->buckets[b] = slot + 1;
        c->n_kept++;
        return c->slots[slot].id;
}

size_t v8_chains_get(const V8Chains *c, uint32_t id, const V8ChainLink **ret)
{
        const Slot *s;

        if (!c || id == 0)
                return 0;
        s = &c->slots[(id - 1) % c->max];
        if (s->id != id)
                return 0;
        *ret = s->links;
        return s->n;
}

size_t v8_chains_bytes(const V8Chains *c)
{
        size_t used;

        if (!c)
                return 0;
        used = c->next_id - 1 < c->max ? c->next_id - 1 : c->max;
        return used * sizeof(Slot) + c->n_buckets * sizeof(uint32_t);
}

void v8_chains_write_metrics(const V8Chains *c, FILE *f)
{
        metric_gauge(f, "profd_v8_inline_chains",
                     "Chains of JavaScript functions inlined at an optimized frame's pc kept (with lines).",
                     c ? c->n_kept : 0);
        metric_counter(f, "profd_v8_inline_chains_forgotten_total",
                       "Inlining chains forgotten, oldest first, to stay within the table's bound, or not "
                       "given an id (ids used up): frames that carry their id show as [javascript].",
                       c ? c->n_forgotten + c->n_used_up : 0);
}
