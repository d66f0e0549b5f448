/* SPDX-License-Identifier: GPL-2.0-only */
/* Ids for entries that outlive their owner's index: a stack entry of the history carries an id,
 * and whoever names the frame later gets the entry back by it. Bounded, first in first out: the
 * ring keeps at most max entries (and fewer when its owner forgets some early); pushing onto a full
 * ring forgets the oldest. Ids are never reused, so an id names its own entry or, once forgotten,
 * nothing, never another's: a frame whose entry went stays unnamed (counted by the owner). The
 * ring holds pointers and owns none of them: what it forgets it hands back to be freed. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

typedef struct IdRing IdRing;

/* max: entries kept, at least 1; max_id: the largest id the owner's stack entries hold (ids past
 * it are not given). -ENOMEM, -EINVAL. */
int id_ring_new(size_t max, uint64_t max_id, IdRing **ret);
/* Frees the ring, not the entries (id_ring_pop_oldest() them first). */
IdRing *id_ring_free(IdRing *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(IdRing *, id_ring_free);

/* Gives p (not NULL) the next id; 0 when none is left (counted). When the ring was full the oldest
 * entry is forgotten: *ret_forgotten is it (else NULL), for the caller to free. */
uint64_t id_ring_push(IdRing *r, void *p, void **ret_forgotten);
/* The entry of id; NULL when never given or forgotten since. */
void *id_ring_get(const IdRing *r, uint64_t id);
/* Forgets id's entry now (its slot stays unused until the ring comes round); returns it, or NULL. */
void *id_ring_forget(IdRing *r, uint64_t id);
/* Forgets the oldest entry still kept and returns it (*ret_id its id); NULL when empty. */
void *id_ring_pop_oldest(IdRing *r, uint64_t *ret_id);
/* Calls f on each entry kept, oldest first; f may id_ring_forget() the one it is given. */
void id_ring_foreach(IdRing *r, void (*f)(void *p, uint64_t id, void *userdata), void *userdata);

size_t id_ring_count(const IdRing *r);
/* What the ring itself holds (its slots as used so far), not its entries. */
size_t id_ring_bytes(const IdRing *r);
/* Entries forgotten (pushed out, popped, or forgotten early) and pushes refused for ids used up. */
uint64_t id_ring_forgotten(const IdRing *r);
uint64_t id_ring_used_up(const IdRing *r);
