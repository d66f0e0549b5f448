/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/chain-hash.h"
#include "util/hash.h"
#include "util/string-pool.h"

typedef struct PoolString {
        HashLink link; /* by the hash of s */
        unsigned refs;
        char s[];
} PoolString;

struct StringPool {
        ChainHash by_hash;
        size_t bytes;
};

int string_pool_new(StringPool **ret)
{
        StringPool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

StringPool *string_pool_free(StringPool *p)
{
        if (!p)
                return NULL;
        CHAIN_HASH_FOREACH (l, &p->by_hash) {
                free(CHAIN_HASH_ENTRY(l, PoolString, link));
        }
        chain_hash_done(&p->by_hash);
        return mfree(p);
}

const char *string_pool_ref(StringPool *p, const char *s)
{
        size_t len = strlen(s);
        uint64_t h = hash_mix64(hash_fnv1a(HASH_FNV1A_INIT, s, len));
        PoolString *e;

        for (HashLink *l = chain_hash_first(&p->by_hash, h); l; l = l->next) {
                e = CHAIN_HASH_ENTRY(l, PoolString, link);
                if (l->hash == h && strcmp(e->s, s) == 0) {
                        e->refs++;
                        return e->s;
                }
        }
        e = malloc(sizeof(*e) + len + 1);
        if (!e)
                return NULL;
        e->refs = 1;
        memcpy(e->s, s, len + 1);
        if (chain_hash_add(&p->by_hash, &e->link, h) < 0)
                return mfree(e);
        p->bytes += sizeof(*e) + len + 1;
        return e->s;
}

void string_pool_unref(StringPool *p, const char *s)
{
        PoolString *e;

        if (!s)
                return;
        e = (PoolString *)(s - offsetof(PoolString, s));
        if (--e->refs > 0)
                return;
        chain_hash_remove(&p->by_hash, &e->link);
        p->bytes -= sizeof(*e) + strlen(e->s) + 1;
        free(e);
}

size_t string_pool_count(const StringPool *p)
{
        return p->by_hash.n;
}

size_t string_pool_bytes(const StringPool *p)
{
        return p->bytes + chain_hash_bytes(&p->by_hash);
}
