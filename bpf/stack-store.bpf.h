/* SPDX-License-Identifier: GPL-2.0-only */
/* Where finished samples go: each stack once under its hash, counts[key] += 1. Stacks and counts
 * live in two generations of maps; .bss profd_gen says which one samples go to. The daemon flips
 * it, waits until every program that read the old value has finished, then reads and empties the
 * retired generation (daemon/sampler/sampler.c). Defines the maps counts_*, stacks_*, kstacks_*
 * and profd_gen: include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-sample.h"
#include "python.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"

#ifndef EEXIST
#define EEXIST 17
#endif

/* Generation samples are counted in; written by the daemon. */
volatile __u32 profd_gen = 0;

/* Sizes are set by the daemon before load (frequency x CPUs x drain interval). Stack values are
 * 4 KiB: run-time allocation keeps an idle host from pinning max_entries x 4 KiB. */
#define PROFD_COUNTS_MAP(name)                                                                              \
        struct {                                                                                            \
                __uint(type, BPF_MAP_TYPE_HASH);                                                            \
                __uint(max_entries, 4096);                                                                  \
                __uint(map_flags, BPF_F_NO_PREALLOC);                                                       \
                __type(key, struct profd_count_key);                                                        \
                __type(value, __u64);                                                                       \
        } name SEC(".maps")
#define PROFD_STACKS_MAP(name, value_type)                                                                  \
        struct {                                                                                            \
                __uint(type, BPF_MAP_TYPE_HASH);                                                            \
                __uint(max_entries, 4096);                                                                  \
                __uint(map_flags, BPF_F_NO_PREALLOC);                                                       \
                __type(key, __u64);                                                                         \
                __type(value, value_type);                                                                  \
        } name SEC(".maps")

PROFD_COUNTS_MAP(counts_0);
PROFD_COUNTS_MAP(counts_1);
PROFD_STACKS_MAP(stacks_0, struct profd_stack);
PROFD_STACKS_MAP(stacks_1, struct profd_stack);
PROFD_STACKS_MAP(kstacks_0, struct profd_kstack);
PROFD_STACKS_MAP(kstacks_1, struct profd_kstack);

/* Stores value under hash unless present: 1 when stored now, 0 when it was there (or a concurrent
 * insert of the same stack won), < 0 when the map is full. */
static __always_inline int store_stack(void *map, __u64 *hash, void *value)
{
        long r;

        if (bpf_map_lookup_elem(map, hash))
                return 0;
        r = bpf_map_update_elem(map, hash, value, BPF_NOEXIST);
        return r == -EEXIST ? 0 : r == 0 ? 1 : r;
}

/* First sample of key in this interval (the caller looked it up). -EEXIST: another CPU inserted
 * it meanwhile. */
static __always_inline int insert_key(void *map, struct profd_count_key *key)
{
        __u64 one = 1, *v;
        long r;

        r = bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
        if (r == -EEXIST) {
                v = bpf_map_lookup_elem(map, key);
                if (v) {
                        __sync_fetch_and_add(v, 1);
                        return 0;
                }
        }
        return r;
}

/* A user stack is kept when it has frames, or when it has none but says why a walk was not made:
 * a sample inside exec, whose profile then shows that reason below its kernel frames. */
static __always_inline bool user_kept(const struct sample_state *st)
{
        return st->user.len > 0 || (st->user.flags & PROFD_STACK_REASON_MASK) == PROFD_STOP_IN_EXEC;
}

/* Hashes st's stacks into its key (before the counts lookup: the key holds the hashes). */
static __always_inline void hash_sample(struct sample_state *st)
{
        if (user_kept(st))
                st->key.user_hash = hash_user(st);
        if (st->kernel.len > 0)
                st->key.kernel_hash = hash_kernel(&st->kernel);
}

/* Stores st's stacks in its generation unless there. False when a map was full (counted). */
static __always_inline bool store_stacks(struct sample_state *st, bool gen1)
{
        if (user_kept(st)) {
                int r = store_stack(gen1 ? (void *)&stacks_1 : (void *)&stacks_0, &st->key.user_hash,
                                    &st->user);

                if (r < 0) {
                        count(PROFD_DROP_USER_STACKS_FULL);
                        return false;
                }
                if (r > 0 && st->py_recorded)
                        py_report_stack(st);
        }
        if (st->kernel.len > 0) {
                if (store_stack(gen1 ? (void *)&kstacks_1 : (void *)&kstacks_0, &st->key.kernel_hash,
                                &st->kernel) < 0) {
                        count(PROFD_DROP_KERNEL_STACKS_FULL);
                        return false;
                }
        }
        return true;
}

/* map_1[key] in generation 1, map_0[key] in generation 0: a call site per map, because the
 * verifier inlines a lookup (a direct call of the hash map's own lookup) only where it knows the
 * map; through a pointer chosen at run time it stays the generic helper and an indirect call (with
 * retpolines). Warm, 104-142 ns against 111-192 (docs/performance.md). The empty asm keeps clang
 * from merging the two calls into one on a chosen pointer. For the lookups every sample makes;
 * first-sample inserts may take the pointer. */
#define lookup_in_gen(gen1, map_1, map_0, key)                                                              \
        ({                                                                                                  \
                void *_v;                                                                                   \
                if (gen1) {                                                                                 \
                        _v = bpf_map_lookup_elem(&(map_1), key);                                            \
                        asm volatile("" ::: "memory");                                                      \
                } else {                                                                                    \
                        _v = bpf_map_lookup_elem(&(map_0), key);                                            \
                }                                                                                           \
                _v;                                                                                         \
        })

/* Hashes st's stacks into its key and counts the key in st's generation. False when a map was
 * full (counted): the sample is lost. */
static __always_inline bool store_sample(struct sample_state *st)
{
        bool gen1 = st->gen != 0;
        __u64 *v;

        hash_sample(st);

        /* Most samples repeat a key of this interval: its stacks are stored already (stacks go
         * in before their key), so one lookup does it. */
        v = lookup_in_gen(gen1, counts_1, counts_0, &st->key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                return true;
        }

        if (!store_stacks(st, gen1))
                return false;

        if (insert_key(gen1 ? (void *)&counts_1 : (void *)&counts_0, &st->key) < 0) {
                count(PROFD_DROP_COUNTS_FULL);
                return false;
        }
        return true;
}
