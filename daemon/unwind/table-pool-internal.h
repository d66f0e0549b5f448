/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool's state, shared by its files: table-pool.c (lifecycle, placement,
 * eviction, compaction, metrics), pool-storage.c (shards, rules, segments, table references) and
 * pool-mappings.c (the per-process mapping entries). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "bpf/profd-unwind-pool.h"
#include "unwind/map-batch.h"
#include "unwind/table-pool.h"
#include "util/pid-table.h"

#define RULE_HASH_SIZE (2 * PROFD_POOL_MAX_RULES) /* open addressing, load <= 1/2 */

/* A run of whole pages of one table placed contiguously in one shard: [page index][rows], row
 * indices relative to the segment. */
typedef struct Segment {
        uint32_t shard, offset, words;
        uint32_t first_page, n_pages;
} Segment;

struct PoolTable {
        uint8_t id[UNWIND_TABLE_ID_MAX];
        size_t id_size;
        unsigned refs;
        uint32_t n_pages, n_rows;
        uint64_t base;
        uint64_t released_ns; /* when refs dropped to 0: eviction order */
        Segment *segs;
        size_t n_segs;
};

typedef struct Shard {
        int fd;        /* -1: slot free */
        uint32_t used; /* bump pointer, words */
        uint32_t live; /* words of tables placed here */
} Shard;

typedef struct Proc {
        pid_t pid;
        PoolMapping *maps;
        size_t n_maps;
        struct profd_unwind_mapping_key *keys; /* sorted */
        struct profd_unwind_mapping *values;   /* what the map holds for keys[i] */
        size_t n_keys;
        /* Its pieces as its unwind_proc_maps entry holds them (in_array), instead of LPM keys;
         * NULL while what the map holds is unknown (a failed write). */
        struct profd_unwind_mapping *array;
        size_t n_array;
        bool in_array;
        uint32_t runtimes;         /* profd_unwind_proc.runtimes, kept across pushes */
        uint64_t exec_ns;          /* unwind_execs as the last push's check read it; 0: none */
        uint64_t procs_written_ns; /* CLOCK_MONOTONIC, right after its unwind_procs entry was written */
} Proc;

struct TablePool {
        int shards_fd, rules_fd, mappings_fd, procs_fd, config_fd, execs_fd, procs_gen_fd;
        int reported_fd;  /* the unwinder's "reported unknown pid/pc" times (optional), or -1 */
        int proc_maps_fd; /* unwind_proc_maps, or -1 where the kernel cannot have it (profd-unwind-pool.h) */
        uint64_t limit;
        unsigned max_shards; /* including the one kept for compaction */
        unsigned n_shards;
        uint64_t mapped_bytes; /* of shards mapped into profd right now (only while written) */
        Shard shards[PROFD_POOL_MAX_SHARDS];

        PoolTable **tables;
        /* table_hashes[i]: table_id_hash() of tables[i]: table_pool_find() runs at every exec of
         * a program whose table was released, and compares 8 bytes per table before any id. */
        uint64_t *table_hashes;
        size_t n_tables, cap_tables, cap_table_hashes;

        struct profd_unwind_rule *rules;
        uint32_t n_rules;
        int32_t *rule_hash;

        PidTable procs; /* of Proc */
        uint64_t n_mapping_entries;
        uint64_t n_array_procs; /* processes whose pieces are one unwind_proc_maps entry */
        uint64_t array_writes, array_unchanged;

        uint32_t generation, active;
        struct profd_unwind_procs_gen *procs_gen; /* unwind_procs_gen, mapped */
        uint64_t placed, evicted, compactions, place_failures, entry_errors;
        uint64_t stale_snapshots;
        bool exit_hook;             /* the BPF exit hook deletes unwind_procs/unwind_execs entries */
        uint64_t exit_deletes_left; /* exits whose two deletes the BPF exit hook made */
        uint64_t entries_written, entries_unchanged;
        uint32_t proc_version; /* last profd_unwind_proc.version written */
        MapBatch entry_batch;  /* writes and deletes of mapping entries */
};
