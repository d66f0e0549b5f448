/* SPDX-License-Identifier: GPL-2.0-only */
/* The pool's storage (pool-storage.c): shards, rules, segments. */
#pragma once

#include "unwind/table-pool-internal.h"

int pool_write_config(TablePool *p, uint32_t active);
/* Pool memory may now hold another table than before: BPF's row cache must not trust it. */
void pool_new_generation(TablePool *p);
/* Writes and deletes of unwind_procs entries (pid's): each bumps the generation after the change,
 * so that BPF's per-CPU copy of an entry is not trusted any more. pool_procs_write() returns
 * bpf_map_update_elem()'s -errno. */
int pool_procs_write(TablePool *p, uint32_t pid, const struct profd_unwind_proc *info, uint64_t flags);
void pool_procs_delete(TablePool *p, uint32_t pid);
int pool_procs_gen_map(TablePool *p);
void pool_procs_gen_unmap(TablePool *p);

int pool_shard_create(TablePool *p, uint32_t *ret_slot);
void pool_shard_drop(TablePool *p, uint32_t slot);
/* words words of the shard at offset (in words) mapped for writing, until pool_shard_unmap(). */
typedef struct ShardWindow {
        void *base;
        size_t len;
        uint32_t *words;
} ShardWindow;
int pool_shard_map(TablePool *p, uint32_t slot, uint32_t offset, uint32_t words, ShardWindow *ret);
void pool_shard_unmap(TablePool *p, ShardWindow *w);
/* Shards for tables: all but one, which compaction needs as its target (a one-shard pool
 * cannot compact, only evict). */
unsigned pool_usable_shards(const TablePool *p);
/* A shard with room for words at its bump pointer; creates one while under the limit, keeping
 * one shard's worth for compaction. */
int pool_shard_find_space(TablePool *p, uint32_t words, uint32_t *ret_slot);

/* The key of TablePool.table_hashes. */
uint64_t table_id_hash(const uint8_t *id, size_t id_size);

/* Global index of rule r, adding it to the BPF rule list if new. */
int pool_rule_intern(TablePool *p, const struct profd_unwind_rule *r, uint16_t *ret);

/* Splits t into segments of whole pages that each fit a shard (usually one segment). */
int pool_plan_segments(const UnwindTable *t, Segment **ret, size_t *ret_n);
void pool_segment_write(const UnwindTable *t, const uint16_t *remap, const Segment *g, uint32_t *dst);
void pool_segment_free_space(TablePool *p, const Segment *g);
