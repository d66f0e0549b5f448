/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool (see table-pool.h and bpf/profd-unwind-pool.h).
 *
 * Memory: shards are 4 MiB BPF arrays created on demand, at most limit / 4 MiB of them, one of
 * which is held back so that a shard can always be compacted. A table segment is bump-allocated
 * inside one shard and never moves except by compaction, which copies a shard's live tables into
 * a fresh shard, repoints every process mapping entry, and only then drops the old shard: BPF
 * never sees a half-moved table. Tables no process uses stay cached until space is needed.
 *
 * This file: the pool's lifecycle, placement with eviction and compaction, metrics. The shards,
 * rules and segments are in pool-storage.c, the per-process mapping entries in pool-mappings.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "unwind/pool-mappings.h"
#include "unwind/pool-storage.h"
#include "util/array.h"
#include "util/log.h"
#include "util/metrics-writer.h"

static int find_map_fd(struct bpf_object *obj, const char *name)
{
        struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

        return m ? bpf_map__fd(m) : -ENOENT;
}

int table_pool_new(struct bpf_object *obj, uint64_t memory_limit, TablePool **ret)
{
        _cleanup_(table_pool_freep) TablePool *p = NULL;
        int r;

        if (!obj || !ret)
                return -EINVAL;
        if (memory_limit < PROFD_SHARD_BYTES)
                return log_error_errno(-ERANGE,
                                       "--unwind-table-memory must be at least %llu bytes (one shard)",
                                       (unsigned long long)PROFD_SHARD_BYTES);

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->procs = PID_TABLE_INIT(Proc, pid);
        for (unsigned i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                p->shards[i].fd = -1;
        p->shards_fd = p->rules_fd = p->mappings_fd = p->procs_fd = p->config_fd = p->execs_fd =
                p->procs_gen_fd = p->proc_maps_fd = -1;
        p->limit = memory_limit;
        p->max_shards = memory_limit / PROFD_SHARD_BYTES;
        if (p->max_shards > PROFD_POOL_MAX_SHARDS)
                p->max_shards = PROFD_POOL_MAX_SHARDS;

        p->shards_fd = find_map_fd(obj, "unwind_shards");
        p->rules_fd = find_map_fd(obj, "unwind_rules");
        p->mappings_fd = find_map_fd(obj, "unwind_mappings");
        p->procs_fd = find_map_fd(obj, "unwind_procs");
        p->config_fd = find_map_fd(obj, "unwind_config");
        p->execs_fd = find_map_fd(obj, "unwind_execs");
        p->procs_gen_fd = find_map_fd(obj, "unwind_procs_gen");
        p->reported_fd = find_map_fd(obj, "unwind_reported");
        {
                /* Preallocated (the kernel's tracing programs need that before 6.1): left unused. */
                struct bpf_map *pm = bpf_object__find_map_by_name(obj, "unwind_proc_maps");

                p->proc_maps_fd = pm && (bpf_map__map_flags(pm) & BPF_F_NO_PREALLOC) &&
                                                  bpf_map__max_entries(pm) >= PROFD_POOL_MAX_PROCS
                                          ? bpf_map__fd(pm)
                                          : -1;
        }
        if (p->shards_fd < 0 || p->rules_fd < 0 || p->mappings_fd < 0 || p->procs_fd < 0 ||
            p->config_fd < 0 || p->execs_fd < 0 || p->procs_gen_fd < 0)
                return -ENOENT;
        r = pool_procs_gen_map(p);
        if (r < 0)
                return log_error_errno(r, "Failed to map the BPF array unwind_procs_gen: %m");

        p->rules = calloc(PROFD_POOL_MAX_RULES, sizeof(*p->rules));
        p->rule_hash = malloc(RULE_HASH_SIZE * sizeof(int32_t));
        if (!p->rules || !p->rule_hash)
                return -ENOMEM;
        memset(p->rule_hash, 0xff, RULE_HASH_SIZE * sizeof(int32_t));

        p->active = 1;
        r = pool_write_config(p, 1);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

TablePool *table_pool_free(TablePool *p)
{
        if (!p)
                return NULL;
        p->active = 0;
        if (p->config_fd >= 0)
                (void)pool_write_config(p, 0);
        for (size_t i = 0; i < pid_table_size(&p->procs); i++) {
                Proc *pr = pid_table_at(&p->procs, i);

                for (size_t k = 0; k < pr->n_keys; k++)
                        (void)bpf_map_delete_elem(p->mappings_fd, &pr->keys[k]);
                if (pr->in_array)
                        (void)bpf_map_delete_elem(p->proc_maps_fd, &(uint32_t){pr->pid});
                pool_procs_delete(p, pr->pid);
                pool_proc_free(pr);
        }
        pid_table_done(&p->procs);
        pool_procs_gen_unmap(p);
        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                pool_shard_drop(p, i);
        for (size_t i = 0; i < p->n_tables; i++) {
                free(p->tables[i]->segs);
                free(p->tables[i]);
        }
        free(p->tables);
        free(p->table_hashes);
        free(p->rules);
        free(p->rule_hash);
        free(p);
        return NULL;
}

static void table_remove(TablePool *p, size_t i)
{
        PoolTable *t = p->tables[i];

        for (size_t k = 0; k < t->n_segs; k++)
                pool_segment_free_space(p, &t->segs[k]);
        free(t->segs);
        free(t);
        p->tables[i] = p->tables[--p->n_tables];
        p->table_hashes[i] = p->table_hashes[p->n_tables];
        p->evicted++;
        pool_new_generation(p);
}

/* Evicts the least recently released unreferenced table. Returns false when there is none. */
static bool evict_one(TablePool *p)
{
        size_t best = SIZE_MAX;

        for (size_t i = 0; i < p->n_tables; i++) {
                PoolTable *t = p->tables[i];

                if (t->refs == 0 && (best == SIZE_MAX || t->released_ns < p->tables[best]->released_ns))
                        best = i;
        }
        if (best == SIZE_MAX)
                return false;
        table_remove(p, best);
        return true;
}

static bool proc_uses_shard(const Proc *pr, uint32_t slot)
{
        for (size_t i = 0; i < pr->n_maps; i++)
                for (size_t k = 0; pr->maps[i].table && k < pr->maps[i].table->n_segs; k++)
                        if (pr->maps[i].table->segs[k].shard == slot)
                                return true;
        return false;
}

/* Moves the live segments of the shard with the most dead space into a fresh shard, repoints
 * all mapping entries, then drops the old shard. */
static int compact_one(TablePool *p)
{
        uint32_t victim = UINT32_MAX, dead_best = 0, fresh, off = 0;
        int r;

        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++) {
                Shard *s = &p->shards[i];

                if (s->fd >= 0 && s->used - s->live > dead_best) {
                        dead_best = s->used - s->live;
                        victim = i;
                }
        }
        if (victim == UINT32_MAX || p->n_shards >= p->max_shards)
                return -ENOSPC;
        r = pool_shard_create(p, &fresh);
        if (r < 0)
                return r;

        /* Copied first, repointed after: a copy that fails leaves every segment where it was. */
        for (size_t i = 0; i < p->n_tables; i++)
                for (size_t k = 0; k < p->tables[i]->n_segs; k++) {
                        const Segment *g = &p->tables[i]->segs[k];
                        ShardWindow src = {}, dst = {};

                        if (g->shard != victim)
                                continue;
                        r = pool_shard_map(p, victim, g->offset, g->words, &src);
                        if (r >= 0)
                                r = pool_shard_map(p, fresh, off, g->words, &dst);
                        if (r >= 0)
                                memcpy(dst.words, src.words, (size_t)g->words * sizeof(uint32_t));
                        pool_shard_unmap(p, &src);
                        pool_shard_unmap(p, &dst);
                        if (r < 0) {
                                pool_shard_drop(p, fresh);
                                return r;
                        }
                        off += g->words;
                }
        off = 0;
        for (size_t i = 0; i < p->n_tables; i++)
                for (size_t k = 0; k < p->tables[i]->n_segs; k++) {
                        Segment *g = &p->tables[i]->segs[k];

                        if (g->shard != victim)
                                continue;
                        g->shard = fresh;
                        g->offset = off;
                        off += g->words;
                }
        p->shards[fresh].used = p->shards[fresh].live = off;

        /* Only processes that map a moved segment need new entries. */
        for (size_t i = 0; i < pid_table_size(&p->procs); i++) {
                Proc *pr = pid_table_at(&p->procs, i);

                if (!proc_uses_shard(pr, fresh))
                        continue;
                r = pool_proc_write_entries(p, pr, pr->maps, pr->n_maps);
                if (r < 0)
                        p->entry_errors++;
        }
        pool_shard_drop(p, victim);
        p->compactions++;
        return 0;
}

/* Room for words, evicting unreferenced tables and compacting as needed. */
static int pool_alloc(TablePool *p, uint32_t words, uint32_t *ret_slot)
{
        int r;

        for (;;) {
                r = pool_shard_find_space(p, words, ret_slot);
                if (r != -ENOSPC)
                        return r;
                if (evict_one(p))
                        continue;
                r = compact_one(p);
                if (r < 0)
                        return r;
        }
}

int table_pool_acquire(TablePool *p, const UnwindTable *t, PoolTable **ret)
{
        _cleanup_free_ uint16_t *remap = NULL;
        _cleanup_free_ PoolTable *pt = NULL;
        size_t placed = 0;
        int r;

        if (!p || !t || !ret)
                return -EINVAL;

        PoolTable *found = table_pool_find(p, t->id, t->id_size);
        if (found) {
                found->refs++;
                *ret = found;
                return 0;
        }
        if (t->n_pages == 0 || !t->page_index || t->page_index[t->n_pages] != t->n_rows) {
                p->place_failures++;
                return -EINVAL;
        }
        if ((uint64_t)t->n_pages + 1 + t->n_rows > (uint64_t)pool_usable_shards(p) * PROFD_SHARD_WORDS) {
                p->place_failures++;
                return -ENOSPC;
        }

        remap = calloc(t->n_rules ? t->n_rules : 1, sizeof(uint16_t));
        pt = calloc(1, sizeof(*pt));
        if (!remap || !pt)
                return -ENOMEM;
        for (uint32_t i = 0; i < t->n_rules; i++) {
                r = pool_rule_intern(p, &t->rules[i], &remap[i]);
                if (r < 0) {
                        p->place_failures++;
                        return r;
                }
        }
        r = pool_plan_segments(t, &pt->segs, &pt->n_segs);
        if (r < 0)
                return r;
        r = ARRAY_GROW(p->tables, p->cap_tables, p->n_tables + 1, 64);
        if (r >= 0)
                r = ARRAY_GROW(p->table_hashes, p->cap_table_hashes, p->n_tables + 1, 64);
        if (r < 0) {
                free(pt->segs);
                return r;
        }

        for (; placed < pt->n_segs; placed++) {
                Segment *g = &pt->segs[placed];
                uint32_t slot;

                r = pool_alloc(p, g->words, &slot);
                if (r < 0)
                        break;
                g->shard = slot;
                g->offset = p->shards[slot].used;
                /* Written before any mapping entry can point here. */
                ShardWindow w = {};
                r = pool_shard_map(p, slot, p->shards[slot].used, g->words, &w);
                if (r < 0)
                        break;
                pool_segment_write(t, remap, g, w.words);
                pool_shard_unmap(p, &w);
                p->shards[slot].used += g->words;
                p->shards[slot].live += g->words;
        }
        if (r < 0) {
                /* Segments placed so far are referenced by nothing: give their space back. */
                for (size_t k = 0; k < placed; k++)
                        pool_segment_free_space(p, &pt->segs[k]);
                free(pt->segs);
                p->place_failures++;
                return r;
        }

        memcpy(pt->id, t->id, t->id_size);
        pt->id_size = t->id_size;
        pt->refs = 1;
        pt->n_pages = t->n_pages;
        pt->n_rows = t->n_rows;
        pt->base = t->base;
        p->placed++;
        p->table_hashes[p->n_tables] = table_id_hash(pt->id, pt->id_size);
        p->tables[p->n_tables++] = pt;
        *ret = TAKE_PTR(pt);
        return 0;
}

void table_pool_write_metrics(const TablePool *p, FILE *f)
{
        uint64_t live = 0, rows = 0, referenced = 0;

        if (!p || !f)
                return;
        for (size_t i = 0; i < p->n_tables; i++) {
                rows += p->tables[i]->n_rows;
                referenced += p->tables[i]->refs > 0;
        }
        for (unsigned i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                if (p->shards[i].fd >= 0)
                        live += p->shards[i].live;

        metric_gauge(f, "profd_unwind_pool_limit_bytes", "--unwind-table-memory.", p->limit);
        metric_gauge(f, "profd_unwind_pool_allocated_bytes", "BPF memory of the allocated shards.",
                     (uint64_t)(p->n_shards * PROFD_SHARD_BYTES));
        metric_gauge(f, "profd_unwind_pool_used_bytes", "Bytes of placed tables (page indexes and rows).",
                     live * 4);
        metric_gauge(f, "profd_unwind_pool_shards", "Allocated 4 MiB shards.", p->n_shards);
        metric_labelled(f, "profd_unwind_pool_tables", "gauge", "Placed unwind tables.", "state",
                        (const char *const[]){"referenced", "unreferenced"},
                        (const uint64_t[]){referenced, (uint64_t)p->n_tables - referenced}, 2);
        metric_gauge(f, "profd_unwind_pool_rows", "Rows of the placed tables.", rows);
        metric_gauge(f, "profd_unwind_pool_rules", "Distinct unwind rules shared by all tables.",
                     p->n_rules);
        metric_gauge(f, "profd_unwind_pool_processes", "Processes with mapping entries.",
                     pid_table_size(&p->procs));
        metric_gauge(f, "profd_unwind_pool_mapping_entries", "LPM entries covering process mappings.",
                     p->n_mapping_entries);
        metric_gauge(f, "profd_unwind_pool_array_processes",
                     "Processes whose mapping pieces are one array entry instead of LPM entries.",
                     p->n_array_procs);
        metric_labelled(f, "profd_unwind_pool_array_writes_total", "counter",
                        "Pushes of processes whose pieces are one array entry: written, or already "
                        "in the map as they are (not written again).",
                        "outcome", (const char *const[]){"written", "unchanged"},
                        (const uint64_t[]){p->array_writes, p->array_unchanged}, 2);
        metric_counter(f, "profd_unwind_pool_placed_total", "Tables placed.", p->placed);
        metric_counter(f, "profd_unwind_pool_evictions_total", "Unreferenced tables evicted for space.",
                       p->evicted);
        metric_counter(f, "profd_unwind_pool_compactions_total", "Shards compacted.", p->compactions);
        metric_counter(f, "profd_unwind_pool_place_failures_total", "Tables that did not fit.",
                       p->place_failures);
        metric_counter(f, "profd_unwind_pool_entry_errors_total",
                       "Mapping entries that could not be written.", p->entry_errors);
        metric_labelled(f, "profd_unwind_pool_entry_writes_total", "counter",
                        "Mapping entries of pushed processes: written, or already in the map with the "
                        "same value (not written again).",
                        "outcome", (const char *const[]){"written", "unchanged"},
                        (const uint64_t[]){p->entries_written, p->entries_unchanged}, 2);
        metric_counter(f, "profd_unwind_pool_exit_deletes_in_bpf_total",
                       "Exited processes whose unwind_procs and unwind_execs entries the BPF exit hook "
                       "deleted (no bpf() call of profd's).",
                       p->exit_deletes_left);
        metric_counter(f, "profd_unwind_pool_stale_snapshots_total",
                       "Process mappings not installed: read before the process exec'd.",
                       p->stale_snapshots);
}

uint64_t table_pool_mapped_bytes(const TablePool *p)
{
        return p ? p->mapped_bytes : 0;
}

uint64_t table_pool_host_bytes(const TablePool *p)
{
        uint64_t b;

        if (!p)
                return 0;
        /* The rule hash is written whole at start (-1 slots); rules only as they are added. */
        b = sizeof(*p) + (uint64_t)p->n_rules * sizeof(*p->rules) + RULE_HASH_SIZE * sizeof(int32_t) +
            p->cap_tables * sizeof(*p->tables) + pid_table_bytes(&p->procs);
        for (size_t i = 0; i < p->n_tables; i++)
                b += sizeof(PoolTable) + p->tables[i]->n_segs * sizeof(Segment);
        for (size_t i = 0; i < pid_table_size(&p->procs); i++) {
                const Proc *pr = pid_table_at(&p->procs, i);

                b += sizeof(Proc) + pr->n_maps * sizeof(PoolMapping) +
                     pr->n_keys * (sizeof(struct profd_unwind_mapping_key) +
                                   sizeof(struct profd_unwind_mapping)) +
                     (pr->array ? pr->n_array : 0) * sizeof(struct profd_unwind_mapping);
        }
        return b;
}

size_t table_pool_n_tables(const TablePool *p)
{
        return p ? p->n_tables : 0;
}
