/* SPDX-License-Identifier: GPL-2.0-only */
#include "symbolizer/v8-pairs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/metrics-writer.h"

/* Id i lives in slot (i - 1) % max. */
typedef struct Slot {
        uint32_t id;   /* 0: empty */
        uint32_t next; /* slot + 1 of the next in its bucket; 0: end */
        uint64_t hash;
        char *function, *script; /* script "" when none */
} Slot;

struct V8Pairs {
        Slot *slots;
        uint32_t *buckets; /* slot + 1 of the bucket's first; 0: empty */
        size_t max, n_buckets, n_kept, bytes;
        uint32_t next_id, max_id;
        uint64_t n_forgotten, n_used_up;
};

int v8_pairs_new(size_t max, uint32_t max_id, V8Pairs **ret)
{
        V8Pairs *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->max = max ?: V8_PAIRS_MAX;
        if (p->max > max_id)
                p->max = max_id;
        for (p->n_buckets = 64; p->n_buckets < p->max; p->n_buckets *= 2)
                ;
        /* calloc: pages are touched only as slots are used. */
        p->slots = calloc(p->max, sizeof(Slot));
        p->buckets = calloc(p->n_buckets, sizeof(uint32_t));
        if (!p->slots || !p->buckets) {
                v8_pairs_free(p);
                return -ENOMEM;
        }
        p->next_id = 1;
        p->max_id = max_id;
        *ret = p;
        return 0;
}

V8Pairs *v8_pairs_free(V8Pairs *p)
{
        if (!p)
                return NULL;
        for (size_t i = 0; p->slots && i < p->max; i++) {
                free(p->slots[i].function);
                free(p->slots[i].script);
        }
        free(p->slots);
        free(p->buckets);
        return mfree(p);
}

static uint64_t pair_hash(const char *function, const char *script)
{
        return hash_fnv1a(hash_fnv1a(0xcbf29ce484222325ULL, function, strlen(function) + 1), script,
                          strlen(script));
}

static void forget_slot(V8Pairs *p, uint32_t slot)
{
        Slot *s = &p->slots[slot];
        uint32_t *at = &p->buckets[s->hash & (p->n_buckets - 1)];

        while (*at && *at != slot + 1) /* bounded by the bucket's length */
                at = &p->slots[*at - 1].next;
        if (*at)
                *at = s->next;
        p->bytes -= strlen(s->function) + strlen(s->script) + 2;
        free(s->function);
        free(s->script);
        *s = (Slot){};
        p->n_kept--;
        p->n_forgotten++;
}

uint32_t v8_pairs_intern(V8Pairs *p, const char *function, const char *script)
{
        uint64_t h = pair_hash(function, script);
        size_t b = h & (p->n_buckets - 1);
        char *fn, *sc;
        uint32_t slot;

        for (uint32_t i = p->buckets[b]; i; i = p->slots[i - 1].next) {
                const Slot *s = &p->slots[i - 1];

                if (s->hash == h && strcmp(s->function, function) == 0 && strcmp(s->script, script) == 0)
                        return s->id;
        }
        if (p->next_id > p->max_id) {
                p->n_used_up++;
                return 0;
        }
        fn = strdup(function);
        sc = strdup(script);
        if (!fn || !sc) {
                free(fn);
                free(sc);
                return 0;
        }
        slot = (p->next_id - 1) % p->max;
        if (p->slots[slot].id)
                forget_slot(p, slot);
        p->slots[slot] =
                (Slot){.id = p->next_id++, .next = p->buckets[b], .hash = h, .function = fn, .script = sc};
        p->buckets[b] = slot + 1;
        p->n_kept++;
        p->bytes += strlen(fn) + strlen(sc) + 2;
        return p->slots[slot].id;
}

int v8_pairs_get(const V8Pairs *p, uint32_t id, const char **ret_function, const char **ret_script)
{
        const Slot *s;

        if (!p || id == 0)
                return -ENOENT;
        s = &p->slots[(id - 1) % p->max];
        if (s->id != id)
                return -ENOENT;
        *ret_function = s->function;
        *ret_script = s->script;
        return 0;
}

size_t v8_pairs_count(const V8Pairs *p)
{
        return p ? p->n_kept : 0;
}

size_t v8_pairs_bytes(const V8Pairs *p)
{
        size_t used;

        if (!p)
                return 0;
        used = p->next_id - 1 < p->max ? p->next_id - 1 : p->max;
        return p->bytes + used * sizeof(Slot) + p->n_buckets * sizeof(uint32_t);
}

void v8_pairs_write_metrics(const V8Pairs *p, FILE *f)
{
        metric_gauge(f, "profd_v8_names", "(function, script) name pairs kept for JavaScript frames.",
                     p ? p->n_kept : 0);
        metric_counter(f, "profd_v8_names_forgotten_total",
                       "JavaScript name pairs forgotten, oldest first, to stay within the table's bound; "
                       "frames that still carry their id show as [javascript].",
                       p ? p->n_forgotten : 0);
        metric_counter(f, "profd_v8_names_ids_used_up_total",
                       "JavaScript name pairs not given an id because every id a stack entry can hold was "
                       "given already (ids are never reused): their frames stay unnamed.",
                       p ? p->n_used_up : 0);
}
