/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/id-index.h"

uint64_t hash_u64s(const uint64_t *v, size_t n)
{
        uint64_t h = 0x9e3779b97f4a7c15ULL;
        for (size_t i = 0; i < n; i++)
                h = hash_mix64(h ^ v[i]) + i;
        return h;
}

void id_index_done(IdIndex *ix)
{
        free(ix->slots);
        *ix = (IdIndex){};
}

static int id_index_grow(IdIndex *ix)
{
        IdIndex n = {};
        n.cap = ix->cap ? ix->cap * 2 : 1024;
        n.slots = calloc(n.cap, sizeof(*n.slots));
        if (!n.slots)
                return -ENOMEM;
        for (size_t i = 0; i < ix->cap; i++)
                if (ix->slots[i].id)
                        (void)id_index_insert(&n, ix->slots[i].hash, ix->slots[i].id);
        id_index_done(ix);
        *ix = n;
        return 0;
}

int id_index_insert(IdIndex *ix, uint64_t h, uint32_t id)
{
        size_t i;
        int r;

        if ((ix->n + 1) * 2 > ix->cap) {
                r = id_index_grow(ix);
                if (r < 0)
                        return r;
        }
        for (i = h & (ix->cap - 1); ix->slots[i].id; i = (i + 1) & (ix->cap - 1))
                ;
        ix->slots[i] = (IndexSlot){.hash = h, .id = id};
        ix->n++;
        return 0;
}

/* Candidate ids for hash h, one per call, starting with *slot = h; 0 when there are no more. */
uint32_t id_index_next(const IdIndex *ix, uint64_t h, size_t *slot)
{
        if (ix->cap == 0)
                return 0;
        for (;;) {
                const IndexSlot *e = &ix->slots[*slot & (ix->cap - 1)];
                (*slot)++;
                if (!e->id)
                        return 0;
                if (e->hash == h)
                        return e->id;
        }
}
