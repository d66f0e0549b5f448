/* SPDX-License-Identifier: GPL-2.0-only */
/* The per-CPU count cache (profd-sample.h, bpf/stack-store.bpf.h) at the drain: the retired
 * generation's pending samples are added to the counts drained from its map, and its slots are
 * emptied before that generation takes samples again. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sampler-count-cache.h"
#include "sampler/sampler-drain.h"
#include "util/macro.h"

#include "profile.skel.h"

typedef struct Pending {
        struct profd_count_key key;
        uint64_t count;
        bool matched;
} Pending;

static uint64_t key_slot(const struct profd_count_key *k, size_t mask)
{
        return ((k->user_hash ^ k->kernel_hash ^ k->tid) * 0x9e3779b97f4a7c15ULL >> 32) & mask;
}

/* Index of k in the open-addressing table t (entries index p, -1 empty), or of the empty entry
 * where it would go. */
static size_t probe(const int32_t *t, size_t mask, const Pending *p, const struct profd_count_key *k)
{
        size_t j = key_slot(k, mask);

        while (t[j] >= 0 && memcmp(&p[t[j]].key, k, sizeof(*k)) != 0)
                j = (j + 1) & mask;
        return j;
}

int sampler_count_cache_clear(Sampler *s, unsigned g)
{
        _cleanup_free_ struct profd_count_cache_slot *zero = NULL;
        int fd = bpf_map__fd(s->skel->maps.count_cache);

        zero = calloc(s->n_possible_cpus, sizeof(*zero));
        if (!zero)
                return -ENOMEM;
        for (uint32_t way = 0; way < PROFD_COUNT_CACHE_WAYS; way++) {
                uint32_t idx = g * PROFD_COUNT_CACHE_WAYS + way;

                if (bpf_map_update_elem(fd, &idx, zero, BPF_ANY) < 0)
                        return -errno;
        }
        return 0;
}

int sampler_count_cache_merge(Sampler *s, unsigned g)
{
        _cleanup_free_ struct profd_count_cache_slot *v = NULL;
        _cleanup_free_ Pending *p = NULL;
        _cleanup_free_ int32_t *t = NULL;
        int fd = bpf_map__fd(s->skel->maps.count_cache);
        size_t ncpu = s->n_possible_cpus, n_p = 0, size = 1, mask;
        Drain *d = &s->drain;
        int r;

        v = calloc(ncpu, sizeof(*v));
        p = calloc(ncpu * PROFD_COUNT_CACHE_WAYS, sizeof(*p));
        if (!v || !p)
                return -ENOMEM;
        while (size < 2 * ncpu * PROFD_COUNT_CACHE_WAYS)
                size <<= 1;
        mask = size - 1;
        t = malloc(size * sizeof(*t));
        if (!t)
                return -ENOMEM;
        memset(t, 0xff, size * sizeof(*t));

        /* The same key may wait in several CPUs' slots: one entry each key. */
        for (uint32_t way = 0; way < PROFD_COUNT_CACHE_WAYS; way++) {
                uint32_t idx = g * PROFD_COUNT_CACHE_WAYS + way;

                if (bpf_map_lookup_elem(fd, &idx, v) < 0)
                        return -errno;
                for (size_t c = 0; c < ncpu; c++) {
                        size_t j;

                        if (!v[c].valid || !v[c].pending)
                                continue;
                        j = probe(t, mask, p, &v[c].key);
                        if (t[j] < 0) {
                                p[n_p].key = v[c].key;
                                t[j] = (int32_t)n_p++;
                        }
                        p[t[j]].count += v[c].pending;
                }
        }
        r = sampler_count_cache_clear(s, g);
        if (r < 0)
                return r;
        if (n_p == 0)
                return 0;

        /* The drained keys are unique: each pending key matches one of them at most. */
        for (size_t i = 0; i < d->n_counts; i++) {
                size_t j = probe(t, mask, p, &d->keys[i]);

                if (t[j] < 0)
                        continue;
                d->counts[i] += p[t[j]].count;
                p[t[j]].matched = true;
                s->count_cache_samples += p[t[j]].count;
        }
        /* Not expected (a key takes a slot after the map has it, and nothing deletes from a live
         * generation), but its samples stay: a record of their own. */
        for (size_t i = 0; i < n_p; i++) {
                if (p[i].matched)
                        continue;
                r = sampler_drain_reserve_counts(d, d->n_counts + 1);
                if (r < 0)
                        return r;
                d->keys[d->n_counts] = p[i].key;
                d->counts[d->n_counts++] = p[i].count;
                s->count_cache_samples += p[i].count;
                s->count_cache_unmatched++;
        }
        return 0;
}
