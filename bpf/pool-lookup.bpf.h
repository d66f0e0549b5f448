/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool from the BPF side (layout: profd-unwind-pool.h, profd-unwind-table.h;
 * filled by daemon/unwind/table-pool.c): its maps, and the two lookups of a DWARF step, the
 * mapping that holds a pc and the table row in force at it, each behind a per-CPU cache. Defines
 * the pool's maps (unwind_*, row_cache, mapping_cache): include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-sample.h"
#include "profd-unwind-pool.h"
#include "profd-unwind-table.h"
#include "sample-state.bpf.h"

/* Binary search over one 64 KiB text page: at most 65536 rows, so 17 halvings. */
#define PROFD_BSEARCH_STEPS 17
_Static_assert((1u << (PROFD_BSEARCH_STEPS - 1)) >= PROFD_UT_PAGE_SIZE, "bsearch bound");

struct profd_shard_map {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(key_size, sizeof(__u32));
        __uint(value_size, sizeof(struct profd_shard)); /* no BTF: clang emits the struct as FWD */
};

/* Shards are created at run time by daemon/unwind/table-pool.c; the template above only fixes the
 * inner map's shape. */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
        __uint(max_entries, PROFD_POOL_MAX_SHARDS);
        __type(key, __u32);
        __array(values, struct profd_shard_map);
} unwind_shards SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, PROFD_POOL_MAX_RULES);
        __type(key, __u32);
        __type(value, struct profd_unwind_rule);
} unwind_rules SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LPM_TRIE);
        __uint(max_entries, PROFD_POOL_MAX_MAPPING_ENTRIES);
        __uint(map_flags, BPF_F_NO_PREALLOC); /* required by LPM tries */
        __type(key, struct profd_unwind_mapping_key);
        __type(value, struct profd_unwind_mapping);
} unwind_mappings SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_POOL_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_unwind_proc);
} unwind_procs SEC(".maps");

/* Allocated on use: only live small processes take memory. The daemon makes it a one-entry
 * preallocated map, unused, where the kernel needs that (daemon/sampler/sampler-bpf.c). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_POOL_MAX_PROCS);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, __u32);
        __type(value, struct profd_unwind_proc_maps);
} unwind_proc_maps SEC(".maps");

/* Bumped after every change of unwind_procs (profd-unwind-pool.h); the daemon bumps it through
 * its mapping of the array, hence BPF_F_MMAPABLE (5.5+, like the shards). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __uint(map_flags, BPF_F_MMAPABLE);
        __type(key, __u32);
        __type(value, struct profd_unwind_procs_gen);
} unwind_procs_gen SEC(".maps");

/* After a BPF hook deleted an unwind_procs entry: no CPU may keep using its copy of it. */
static __always_inline void unwind_procs_changed(void)
{
        __u32 zero = 0;
        struct profd_unwind_procs_gen *g = bpf_map_lookup_elem(&unwind_procs_gen, &zero);

        if (g)
                __sync_fetch_and_add(&g->gen, 1);
}

/* pid -> time of its last exec. LRU: only recent execs matter (a push of mappings read before
 * them), older ones may be forgotten. */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, PROFD_POOL_MAX_EXECS);
        __type(key, __u32);
        __type(value, __u64);
} unwind_execs SEC(".maps");

/* active = 1 once daemon/unwind/table-pool.c exists; before that every stack is walked with frame
 * pointers and no pid is reported as unknown (nobody would read the reports). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct profd_unwind_config);
} unwind_config SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_ROW_CACHE_SIZE);
        __type(key, __u32);
        __type(value, struct profd_row_cache_entry);
} row_cache SEC(".maps");
_Static_assert((PROFD_ROW_CACHE_SIZE & (PROFD_ROW_CACHE_SIZE - 1)) == 0, "row cache index is masked");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_MAPPING_CACHE_SIZE);
        __type(key, __u32);
        __type(value, struct profd_mapping_cache_entry);
} mapping_cache SEC(".maps");
_Static_assert((PROFD_MAPPING_CACHE_SIZE & (PROFD_MAPPING_CACHE_SIZE - 1)) == 0,
               "mapping cache index is masked");

/* Makes st->cache the pool's entry for the mapping of st's pid that holds lookup_pc: the previous
 * frame's (st->cache itself), the per-CPU mapping cache's, or the process's unwind_proc_maps entry
 * or LPM trie's. False when the pool has none. */
static __always_inline bool find_mapping(struct sample_state *st, __u64 lookup_pc)
{
        struct profd_unwind_mapping_key key;
        struct profd_unwind_mapping *m = &st->cache;
        struct profd_mapping_cache_entry *ce;
        __u32 ci;

        if (st->cache_valid && lookup_pc >= m->start && lookup_pc < m->end)
                return true;

        ci = ((lookup_pc >> 16) ^ ((__u64)st->map_pid << 20)) * 0x9e3779b97f4a7c15ULL >> 56;
        ci &= PROFD_MAPPING_CACHE_SIZE - 1;
        ce = bpf_map_lookup_elem(&mapping_cache, &ci);
        if (ce && ce->valid && ce->pid == st->map_pid && ce->version == st->proc_version &&
            ce->generation == st->pool_gen && lookup_pc >= ce->m.start && lookup_pc < ce->m.end) {
                st->cache = ce->m;
        } else {
                struct profd_unwind_proc_maps *pm = bpf_map_lookup_elem(&unwind_proc_maps, &st->map_pid);

                if (pm) {
                        m = profd_proc_maps_find(pm, lookup_pc);
                } else {
                        key.prefixlen = 32 + 64;
                        key.pid_be = __builtin_bswap32(st->map_pid);
                        key.addr_be = __builtin_bswap64(lookup_pc);
                        m = bpf_map_lookup_elem(&unwind_mappings, &key);
                }
                /* An LPM entry's prefix may be wider than its mapping (pool-mappings.c); the piece
                 * before a pc may end below it. */
                if (!m || lookup_pc < m->start || lookup_pc >= m->end)
                        return false;
                st->cache = *m;
                if (ce) {
                        ce->pid = st->map_pid;
                        ce->version = st->proc_version;
                        ce->generation = st->pool_gen;
                        ce->m = *m;
                        ce->valid = 1;
                }
        }
        st->cache_valid = 1;
        return true;
}

static __always_inline void remember_rule(struct sample_state *st, const struct profd_unwind_mapping *m,
                                          __u64 elf_pc, __u32 rule)
{
        st->last_elf_pc = elf_pc;
        st->last_shard = m->shard;
        st->last_offset = m->offset;
        st->last_rule = rule;
}

/* Global index + 1 of the rule in force at elf_pc in m's table; 0 if none (unwinding stopped if
 * the pool itself is broken). */
static __always_inline __u32 find_rule(struct sample_state *st, const struct profd_unwind_mapping *m,
                                       __u64 elf_pc)
{
        __u32 page, slot, zero = 0, lo, hi, l, r, rows, w, ci;
        struct profd_row_cache_entry *ce;
        struct profd_shard *sh;
        __u16 target;
        void *inner;

        if (elf_pc < m->base || ((elf_pc - m->base) >> PROFD_UT_PAGE_SHIFT) >= m->n_pages)
                return 0;

        if (st->last_rule && st->last_elf_pc == elf_pc && st->last_offset == m->offset &&
            st->last_shard == m->shard)
                return st->last_rule;

        ci = (((elf_pc >> PROFD_ROW_CACHE_SHIFT) ^ m->offset) * 0x9e3779b97f4a7c15ULL) >> 54;
        ci &= PROFD_ROW_CACHE_SIZE - 1;
        ce = bpf_map_lookup_elem(&row_cache, &ci);
        if (ce && ce->rule && elf_pc >= ce->elf_lo && elf_pc - ce->elf_lo < ce->len &&
            ce->offset == m->offset && ce->shard == m->shard && ce->generation == st->pool_gen) {
                remember_rule(st, m, elf_pc, ce->rule);
                return ce->rule;
        }
        page = (elf_pc - m->base) >> PROFD_UT_PAGE_SHIFT;
        target = elf_pc & (PROFD_UT_PAGE_SIZE - 1);

        slot = m->shard;
        inner = bpf_map_lookup_elem(&unwind_shards, &slot);
        sh = inner ? bpf_map_lookup_elem(inner, &zero) : NULL;
        if (!sh) {
                count(PROFD_ERR_UNWIND_POOL);
                stop(st, PROFD_STOP_NO_ROW);
                return 0;
        }

        lo = sh->words[(m->offset + page) & (PROFD_SHARD_WORDS - 1)];
        hi = sh->words[(m->offset + page + 1) & (PROFD_SHARD_WORDS - 1)];
        rows = m->offset + m->n_pages + 1;

        count(PROFD_CNT_ROW_SEARCHES);
        /* First row of [lo, hi) whose pc_low is above target; the row in force is the one before. */
        l = lo;
        r = hi;
        for (int i = 0; i < PROFD_BSEARCH_STEPS; i++) {
                __u32 mid;

                if (l >= r)
                        break;
                mid = l + (r - l) / 2;
                w = sh->words[(rows + mid) & (PROFD_SHARD_WORDS - 1)];
                if ((w & 0xffff) <= target)
                        l = mid + 1;
                else
                        r = mid;
        }
        if (l <= lo || l > hi)
                return 0;
        w = sh->words[(rows + l - 1) & (PROFD_SHARD_WORDS - 1)];
        if (ce) {
                /* The row holds from its own pc to the next row's in this page, or the page end
                 * (every page starts with a row of its own: profd-unwind-table.h). */
                __u32 row_lo = w & 0xffff, row_end = PROFD_UT_PAGE_SIZE;

                if (l < hi)
                        row_end = sh->words[(rows + l) & (PROFD_SHARD_WORDS - 1)] & 0xffff;
                ce->elf_lo = m->base + ((__u64)page << PROFD_UT_PAGE_SHIFT) + row_lo;
                ce->len = row_end > row_lo ? row_end - row_lo : 0;
                ce->shard = m->shard;
                ce->offset = m->offset;
                ce->generation = st->pool_gen;
                ce->rule = (w >> 16) + 1;
        }
        remember_rule(st, m, elf_pc, (w >> 16) + 1);
        return (w >> 16) + 1;
}
