/* SPDX-License-Identifier: GPL-2.0-only */
/* Records chained by a hash of their key through a HashLink they embed: the buckets are a
 * power-of-two array grown to one per record, a record is added at the head of its chain and
 * unlinked in place. The interned strings, the process table's mapped files and the executable
 * cache are each one. The records are the caller's: the hash neither allocates nor frees them,
 * and the caller compares keys (a chain holds other hashes too). */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct HashLink {
        struct HashLink *next;
        uint64_t hash;
} HashLink;

typedef struct ChainHash {
        HashLink **buckets;
        size_t n_buckets; /* a power of two; 0 before the first add */
        size_t n;
} ChainHash;

/* The record of type T whose HashLink member is link. */
#define CHAIN_HASH_ENTRY(link, T, member) ((T *)((char *)(link)-offsetof(T, member)))

/* The first link of hash's chain (NULL if none): follow ->next, compare ->hash, then the key. */
static inline HashLink *chain_hash_first(const ChainHash *h, uint64_t hash)
{
        return h->n_buckets ? h->buckets[hash & (h->n_buckets - 1)] : NULL;
}

/* Adds link under hash. Past one record per bucket the buckets double; when they cannot, chains
 * grow longer instead. -ENOMEM (nothing added) only when not even the first buckets could be had. */
int chain_hash_add(ChainHash *h, HashLink *link, uint64_t hash);
/* Unlinks link, which must be in h. */
void chain_hash_remove(ChainHash *h, HashLink *link);
/* The buckets' memory (not the records'). */
size_t chain_hash_bytes(const ChainHash *h);
/* Frees the buckets (not the records) and leaves h empty. */
void chain_hash_done(ChainHash *h);

/* Every record's link, with the next one taken before the body runs: the body may free link (not
 * unlink others). */
#define CHAIN_HASH_FOREACH(link, h)                                                                         \
        for (size_t _b = 0; _b < (h)->n_buckets; _b++)                                                      \
                for (HashLink *link = (h)->buckets[_b], *_next = link ? link->next : NULL; link;            \
                     link = _next, _next = link ? link->next : NULL)
