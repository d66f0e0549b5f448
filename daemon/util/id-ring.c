/* SPDX-License-Identifier: GPL-2.0-only */
#include "util/id-ring.h"

#include <errno.h>
#include <stdlib.h>

/* Id i lives in slot (i - 1) % max: a new id takes the slot of the one given max ids before. The
 * ids kept are within [oldest, next): those before were pushed out, popped or forgotten; a slot
 * whose id is not the one asked for (0: forgotten early) names nothing. */
typedef struct Slot {
        uint64_t id; /* 0: empty */
        void *p;
} Slot;

struct IdRing {
        Slot *slots;
        size_t max, n;
        uint64_t next_id, oldest, max_id;
        uint64_t n_forgotten, n_used_up;
};

int id_ring_new(size_t max, uint64_t max_id, IdRing **ret)
{
        IdRing *r;

        if (max == 0 || max_id == 0)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->max = max > max_id ? max_id : max;
        /* calloc: pages are touched only as slots are used. */
        r->slots = calloc(r->max, sizeof(Slot));
        if (!r->slots) {
                free(r);
                return -ENOMEM;
        }
        r->next_id = r->oldest = 1;
        r->max_id = max_id;
        *ret = r;
        return 0;
}

IdRing *id_ring_free(IdRing *r)
{
        if (!r)
                return NULL;
        free(r->slots);
        return mfree(r);
}

static Slot *slot_of(const IdRing *r, uint64_t id)
{
        return &r->slots[(id - 1) % r->max];
}

static void *take(IdRing *r, Slot *s)
{
        void *p = s->p;

        *s = (Slot){};
        r->n--;
        r->n_forgotten++;
        return p;
}

uint64_t id_ring_push(IdRing *r, void *p, void **ret_forgotten)
{
        uint64_t id;
        Slot *s;

        *ret_forgotten = NULL;
        if (r->next_id > r->max_id) {
                r->n_used_up++;
                return 0;
        }
        id = r->next_id++;
        s = slot_of(r, id);
        if (s->id)
                *ret_forgotten = take(r, s);
        *s = (Slot){.id = id, .p = p};
        r->n++;
        if (id - r->oldest >= r->max)
                r->oldest = id - r->max + 1;
        return id;
}

void *id_ring_get(const IdRing *r, uint64_t id)
{
        const Slot *s;

        if (!r || id < r->oldest || id >= r->next_id)
                return NULL;
        s = slot_of(r, id);
        return s->id == id ? s->p : NULL;
}

void *id_ring_forget(IdRing *r, uint64_t id)
{
        Slot *s;

        if (!r || id < r->oldest || id >= r->next_id)
                return NULL;
        s = slot_of(r, id);
        return s->id == id ? take(r, s) : NULL;
}

void *id_ring_pop_oldest(IdRing *r, uint64_t *ret_id)
{
        /* Bounded by max: the ids kept are within max of the newest. */
        for (; r->n > 0 && r->oldest < r->next_id; r->oldest++) {
                Slot *s = slot_of(r, r->oldest);

                if (s->id == r->oldest) {
                        if (ret_id)
                                *ret_id = r->oldest;
                        r->oldest++;
                        return take(r, s);
                }
        }
        return NULL;
}

void id_ring_foreach(IdRing *r, void (*f)(void *p, uint64_t id, void *userdata), void *userdata)
{
        /* At most max ids: the ones within max of the newest. */
        for (uint64_t id = r->oldest; id < r->next_id; id++) {
                Slot *s = slot_of(r, id);

                if (s->id == id)
                        f(s->p, id, userdata);
        }
}

size_t id_ring_count(const IdRing *r)
{
        return r ? r->n : 0;
}

size_t id_ring_bytes(const IdRing *r)
{
        uint64_t used;

        if (!r)
                return 0;
        used = r->next_id - 1 < r->max ? r->next_id - 1 : r->max;
        return sizeof(*r) + used * sizeof(Slot);
}

uint64_t id_ring_forgotten(const IdRing *r)
{
        return r ? r->n_forgotten : 0;
}

uint64_t id_ring_used_up(const IdRing *r)
{
        return r ? r->n_used_up : 0;
}
