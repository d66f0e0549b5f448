/* SPDX-License-Identifier: GPL-2.0-only */
/* Per-process limits on reports to the daemon, keyed by pid in an LRU hash the caller defines
 * (an LRU forgets the oldest processes, which then start afresh). Racing CPUs may both pass: the
 * limits are approximate, never stricter. Defines no maps; included by events.bpf.c and
 * unwinder-events.bpf.h. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* Value of a token-bucket map: burst events at once, then one per refill interval. */
struct profd_token_bucket {
        __u64 last_ns; /* tokens were last topped up at this time */
        __u64 tokens;
};

/* Takes a token from key's bucket in map (LRU hash __u32 -> struct profd_token_bucket); false when it
 * is empty. A key seen for the first time gets a full bucket. */
static __always_inline bool token_bucket_take(void *map, __u32 key, __u64 now, __u64 burst, __u64 refill_ns)
{
        struct profd_token_bucket *b = bpf_map_lookup_elem(map, &key);
        __u64 refill;

        if (!b) {
                struct profd_token_bucket fresh = {.last_ns = now, .tokens = burst - 1};
                bpf_map_update_elem(map, &key, &fresh, BPF_ANY);
                return true;
        }
        refill = (now - b->last_ns) / refill_ns;
        if (refill > 0) {
                b->tokens = b->tokens + refill > burst ? burst : b->tokens + refill;
                b->last_ns = now;
        }
        if (b->tokens == 0)
                return false;
        b->tokens--;
        return true;
}

/* At most one event per interval_ns for key: true, and now remembered in map (LRU hash __u32 ->
 * __u64, the time of the key's last event), when the previous one is older. */
static __always_inline bool once_per_interval(void *map, __u32 key, __u64 now, __u64 interval_ns)
{
        __u64 *last = bpf_map_lookup_elem(map, &key);

        if (last && now - *last < interval_ns)
                return false;
        bpf_map_update_elem(map, &key, &now, BPF_ANY);
        return true;
}
