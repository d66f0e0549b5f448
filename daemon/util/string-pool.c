/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/string-pool.h"

typedef struct PoolString {
        struct PoolString *next;
        uint64_t hash;
        unsigned refs;
        char s[];
} PoolString;

struct StringPool {
        PoolString **buckets;
        size_t n_buckets; /* power of two */
        size_t n, bytes;
};

#define POOL_MIN_BUCKETS 256

int string_pool_new(StringPool **ret)
{
        StringPool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->buckets = calloc(POOL_MIN_BUCKETS, sizeof(*p->buckets));
        if (!p->buckets) {
                free(p);
                return -ENOMEM;
        }
        p->n_buckets = POOL_MIN_BUCKETS;
        *ret = p;
        return 0;
}

StringPool *string_pool_free(StringPool *p)
{
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_buckets; i++)
                for (PoolString *e = p->buckets[i], *next; e; e = next) {
                        next = e->next;
                        free(e);
                }
        free(p->buckets);
        return mfree(p);
}

static void grow(StringPool *p)
{
        size_t n = p->n_buckets * 2;
        PoolString **b = calloc(n, sizeof(*b));

        if (!b)
                return; /* longer chains, still correct */
        for (size_t i = 0; i < p->n_buckets; i++)
                for (PoolString *e = p->buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (n - 1)];
                        b[e->hash & (n - 1)] = e;
                }
        free(p->buckets);
        p->buckets = b;
        p->n_buckets = n;
}

const char *string_pool_ref(StringPool *p, const char *s)
{
        size_t len = strlen(s);
        uint64_t h = hash_mix64(hash_fnv1a(HASH_FNV1A_INIT, s, len));
        PoolString *e;

        for (e = p->buckets[h & (p->n_buckets - 1)]; e; e = e->next)
                if (e->hash == h && strcmp(e->s, s) == 0) {
                        e->refs++;
                        return e->s;
                }
        e = malloc(sizeof(*e) + len + 1);
        if (!e)
                return NULL;
        e->hash = h;
        e->refs = 1;
        memcpy(e->s, s, len + 1);
        e->next = p->buckets[h & (p->n_buckets - 1)];
        p->buckets[h & (p->n_buckets - 1)] = e;
        p->n++;
        p->bytes += sizeof(*e) + len + 1;
        if (p->n > p->n_buckets)
                grow(p);
        return e->s;
}

void string_pool_unref(StringPool *p, const char *s)
{
        PoolString *e, **link;

        if (!s)
                return;
        e = (PoolString *)(s - offsetof(PoolString, s));
        if (--e->refs > 0)
                return;
        for (link = &p->buckets[e->hash & (p->n_buckets - 1)]; *link; link = &(*link)->next)
                if (*link == e) {
                        *link = e->next;
                        break;
                }
        p->n--;
        p->bytes -= sizeof(*e) + strlen(e->s) + 1;
        free(e);
}

size_t string_pool_count(const StringPool *p)
{
        return p->n;
}

size_t string_pool_bytes(const StringPool *p)
{
        return p->bytes + p->n_buckets * sizeof(*p->buckets);
}
