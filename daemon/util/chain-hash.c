/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>

#include "util/chain-hash.h"

/* The first buckets: small tables (a few dozen executables) stay small. */
#define CHAIN_HASH_MIN_BUCKETS 64

static int rehash(ChainHash *h, size_t n)
{
        HashLink **b = calloc(n, sizeof(*b));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_buckets; i++)
                for (HashLink *l = h->buckets[i], *next; l; l = next) {
                        next = l->next;
                        l->next = b[l->hash & (n - 1)];
                        b[l->hash & (n - 1)] = l;
                }
        free(h->buckets);
        h->buckets = b;
        h->n_buckets = n;
        return 0;
}

int chain_hash_add(ChainHash *h, HashLink *link, uint64_t hash)
{
        HashLink **head;

        if (h->n_buckets == 0) {
                if (rehash(h, CHAIN_HASH_MIN_BUCKETS) < 0)
                        return -ENOMEM;
        } else if (h->n >= h->n_buckets)
                (void)rehash(h, h->n_buckets * 2); /* or longer chains: still correct */
        head = &h->buckets[hash & (h->n_buckets - 1)];
        link->hash = hash;
        link->next = *head;
        *head = link;
        h->n++;
        return 0;
}

void chain_hash_remove(ChainHash *h, HashLink *link)
{
        for (HashLink **pp = &h->buckets[link->hash & (h->n_buckets - 1)]; *pp; pp = &(*pp)->next)
                if (*pp == link) {
                        *pp = link->next;
                        h->n--;
                        return;
                }
}

size_t chain_hash_bytes(const ChainHash *h)
{
        return h->n_buckets * sizeof(*h->buckets);
}

void chain_hash_done(ChainHash *h)
{
        free(h->buckets);
        *h = (ChainHash){};
}
