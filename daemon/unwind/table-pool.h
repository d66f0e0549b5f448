/* SPDX-License-Identifier: GPL-2.0-only */
/* The BPF unwind-table pool: compact tables (unwind-tables/) placed into a sharded set of BPF
 * array maps by a bump allocator, one copy per executable identity shared by every process that
 * maps it, reference counted; plus the per-process mapping entries the BPF unwinder searches.
 * Bounded by --unwind-table-memory: when full, tables no process uses are evicted, then a shard
 * is compacted; never a global reset. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "unwind-tables/unwind-table.h"
#include "util/macro.h"

struct bpf_object;
typedef struct TablePool TablePool;
typedef struct PoolTable PoolTable;

int table_pool_new(struct bpf_object *obj, uint64_t memory_limit, TablePool **ret);
TablePool *table_pool_free(TablePool *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(TablePool *, table_pool_free);

/* The pool's copy of the table with this identity, or NULL (no reference taken). */
PoolTable *table_pool_find(TablePool *p, const uint8_t *id, size_t id_size);
/* Places t (if not present yet) and takes a reference. -ENOSPC when it cannot fit even after
 * evicting unreferenced tables and compacting. */
int table_pool_acquire(TablePool *p, const UnwindTable *t, PoolTable **ret);
void table_pool_ref(PoolTable *t);
void table_pool_release(TablePool *p, PoolTable *t);

typedef struct PoolMapping {
        uint64_t start, end; /* runtime addresses of the executable mapping */
        uint64_t load_bias;  /* runtime address - ELF vaddr */
        PoolTable *table;    /* NULL: no unwind table (frame-pointer step there) */
        bool table_pending;  /* table NULL but the file has CFI (build not done, pool full): BPF
                              * stops there with a visible reason instead of guessing */
} PoolMapping;

/* Replaces pid's mapping entries (sorted by start) in the BPF maps. maps_ns: CLOCK_MONOTONIC
 * time taken before the mappings were read (for a forked child still sharing its parent's
 * image: the parent's). If the process exec'd after maps_ns the mappings are the old image's:
 * the pid is left unknown to the unwinder (frame-pointer walk, marked) and -ESTALE returned;
 * read them again. table_pool_set_process() uses the current time. */
int table_pool_set_process_at(TablePool *p, pid_t pid, uint64_t maps_ns, const PoolMapping *m, size_t n);
int table_pool_set_process(TablePool *p, pid_t pid, const PoolMapping *m, size_t n);
/* CLOCK_MONOTONIC time of pid's last exec as the BPF exec hook recorded it (-ENOENT: none known). */
int table_pool_last_exec(TablePool *p, pid_t pid, uint64_t *ret_ns);
/* The same, as the last table_pool_set_process_at() of pid read it right after its write (no BPF
 * call; -ENOENT: none known then, or pid not in the pool). */
int table_pool_checked_exec(TablePool *p, pid_t pid, uint64_t *ret_ns);
/* The unwinder reports an unknown pid/pc at most once a second per pid: after the push a report
 * led to, the next report (a pc these mappings still miss) must not wait for that second. */
int table_pool_forget_report(TablePool *p, pid_t pid);
int table_pool_remove_process(TablePool *p, pid_t pid);
/* The same for a pid whose exit BPF saw at exit_ns (CLOCK_MONOTONIC): where the BPF exit hook runs
 * (table_pool_set_exit_hook()), its unwind_procs and unwind_execs entries are gone already unless
 * they were written after it. */
int table_pool_remove_exited(TablePool *p, pid_t pid, uint64_t exit_ns);
/* Whether the sampler's BPF exit hook (bpf/profile.bpf.c, profd_exit) is attached. */
void table_pool_set_exit_hook(TablePool *p, bool attached);
#define TABLE_POOL_RUNTIME_PYTHON 1u  /* = PROFD_PROC_RUNTIME_PYTHON */
#define TABLE_POOL_RUNTIME_HOTSPOT 2u /* = PROFD_PROC_RUNTIME_HOTSPOT */
#define TABLE_POOL_RUNTIME_V8 4u      /* = PROFD_PROC_RUNTIME_V8 */
/* Which runtimes' frames BPF walks in pid (TABLE_POOL_RUNTIME_* bits): samples of a pid without a
 * bit skip that runtime's lookup. Kept across set_process() calls; -ENOENT before the first. */
int table_pool_set_process_runtimes(TablePool *p, pid_t pid, uint32_t runtimes);
/* Tables placed in the pool (for the service STATUS= line). */
size_t table_pool_n_tables(const TablePool *p);
/* Bytes of shards mapped into profd (its RSS) right now: only while a table is written. */
uint64_t table_pool_mapped_bytes(const TablePool *p);
/* Heap of the pool's index in profd: rules and their hash, where each table's pages are, each
 * process's mappings and the entries BPF holds for them (profd_memory_bytes{owner="unwind_pool"}). */
uint64_t table_pool_host_bytes(const TablePool *p);
void table_pool_write_metrics(const TablePool *p, FILE *f);
