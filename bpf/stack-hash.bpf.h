/* SPDX-License-Identifier: GPL-2.0-only */
/* Stack hashes: the key a stack is stored under (stack-store.bpf.h). User frames are mixed in as
 * they are recorded (st->uhash), kernel frames in one pass at the end. Defines no maps. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-sample.h"
#include "sample-state.bpf.h"

/* One multiply per frame (this loop runs over up to 512 frames per sample). For a fixed v the
 * step is a bijection of h, so two stacks that differ in a single frame never collide;
 * hash_final then spreads the bits. */
#define PROFD_USER_HASH_SEED 0x9e3779b97f4a7c15ULL

static __always_inline __u64 hash_mix(__u64 h, __u64 v)
{
        h ^= v;
        h = (h << 29) | (h >> 35);
        return h * 0x9e3779b97f4a7c15ULL;
}

static __always_inline __u64 hash_final(__u64 h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return h ? h : 1; /* 0 means "no stack" */
}

/* The frames were mixed in as they were recorded (unwind_one): there the multiplies overlap the
 * unwinding's memory accesses, a separate pass over 512 frames would be a serial chain. */
static __always_inline __u64 hash_user(const struct sample_state *st)
{
        return hash_final(hash_mix(st->uhash, ((__u64)st->user.flags << 32) | st->user.len));
}

static __always_inline __u64 hash_kernel(const struct profd_kstack *s)
{
        __u64 h = hash_mix(0x7f4a7c159e3779b9ULL, s->len);
        __u32 len = s->len;

        /* Bounded by the kernel stack's slots; bpf_get_stack filled len of them. */
        for (__u32 i = 0; i < PROFD_MAX_KERNEL_FRAMES; i++) {
                if (i >= len)
                        break;
                h = hash_mix(h, s->ips[i]);
        }
        return hash_final(h);
}
