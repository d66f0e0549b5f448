/* SPDX-License-Identifier: GPL-2.0-only */
/* An index from 64-bit hashes to ids, for tables that intern their entries (the pprof encoder's
 * strings, mappings, locations, functions, labels). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* hash -> id (1-based; 0 = empty slot), linear probing. Equality is checked by the caller
 * against its own tables, so the index stores nothing else; hash and id share a slot so a probe
 * touches one cache line. */
typedef struct IndexSlot {
        uint64_t hash;
        uint32_t id;
} IndexSlot;

typedef struct IdIndex {
        IndexSlot *slots;
        size_t cap, n;
} IdIndex;

/* Adds id under hash h (the caller checked it is not there yet). */
int id_index_insert(IdIndex *ix, uint64_t h, uint32_t id);
/* Candidate ids for hash h, one per call, starting with *slot = h; 0 when there are no more. */
uint32_t id_index_next(const IdIndex *ix, uint64_t h, size_t *slot);
void id_index_done(IdIndex *ix);

/* A hash of n 64-bit words (keys made of several fields). */
uint64_t hash_u64s(const uint64_t *v, size_t n);
