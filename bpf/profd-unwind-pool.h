/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool as the BPF unwinder sees it (daemon/unwind/table-pool.c fills it).
 * Includes nothing (see profd-sample.h).
 *
 *   unwind_shards   ARRAY_OF_MAPS, slot -> inner ARRAY with one 4 MiB value of __u32 words.
 *                   A placed table segment is [page index: n_pages + 1 words][rows: 1 word each],
 *                   rows' rule fields already remapped to the global rule list.
 *   unwind_rules    ARRAY of struct profd_unwind_rule, deduplicated across all tables.
 *   unwind_mappings LPM_TRIE {pid, address} -> struct profd_unwind_mapping.
 *   unwind_procs    HASH pid -> struct profd_unwind_proc: the pid's mappings are loaded.
 *   unwind_execs    LRU HASH pid -> time of the last exec (see below).
 *   unwind_procs_gen ARRAY (mmapable), one struct profd_unwind_procs_gen: unwind_procs changed. */
#pragma once

#define PROFD_SHARD_SHIFT 20
#define PROFD_SHARD_WORDS (1u << PROFD_SHARD_SHIFT) /* 4 MiB of __u32 per shard */
#define PROFD_SHARD_BYTES (4ull * PROFD_SHARD_WORDS)
#define PROFD_POOL_MAX_SHARDS 1024 /* 4 GiB of tables */
#define PROFD_POOL_MAX_RULES 65536 /* global rule indices are the rows' 16-bit rule field */
#define PROFD_POOL_MAX_MAPPING_ENTRIES (1u << 20)
#define PROFD_POOL_MAX_PROCS 65536

struct profd_shard {
        __u32 words[PROFD_SHARD_WORDS];
};

/* LPM key: prefixlen counts bits of pid (always all 32) plus the leading bits of addr. Both are
 * big-endian so that prefix bits are the high bits. */
struct profd_unwind_mapping_key {
        __u32 prefixlen;
        __u32 pid_be;
        __u64 addr_be;
};
_Static_assert(sizeof(struct profd_unwind_mapping_key) == 16, "profd_unwind_mapping_key layout");

#define PROFD_MAPPING_NO_TABLE 1u /* JIT/anonymous code or no table: frame-pointer step */
/* The file has CFI whose table is not placed yet (being built, pool full): unwinding stops there
 * with PROFD_STOP_TABLE_PENDING rather than guessing with frame pointers. */
#define PROFD_MAPPING_TABLE_PENDING 2u

struct profd_unwind_mapping {
        __u64 start, end; /* the process mapping: consecutive frames in it skip the trie */
        __u64 load_bias;  /* runtime address - ELF vaddr */
        __u64 base;       /* ELF vaddr of the table segment's page 0 */
        __u32 shard;      /* slot in unwind_shards */
        __u32 offset;     /* word offset of the segment's page index in the shard */
        __u32 n_pages;
        __u32 flags;
};
_Static_assert(sizeof(struct profd_unwind_mapping) == 48, "profd_unwind_mapping layout");

/* Value of the one-entry array "unwind_config". generation changes whenever pool memory may be
 * reused for another table (eviction, dropped shard): it validates the BPF row cache. */
struct profd_unwind_config {
        __u32 active; /* 1 once the pool exists: DWARF unwinding and unknown-pid reports */
        __u32 generation;
};
_Static_assert(sizeof(struct profd_unwind_config) == 8, "profd_unwind_config layout");

/* Value of the one-entry mmapable array "unwind_procs_gen": changes after every write or delete
 * of an unwind_procs entry, by the daemon (an atomic add through its mapping of the array: no
 * bpf() call) and by the BPF exec and exit hooks (an atomic add after their deletes). Validates the
 * per-CPU copy of the last sampled process's entry (sample_state.pc_*): a copy taken under one
 * value is never used under another, so it cannot outlive a change of the entry it copies. */
struct profd_unwind_procs_gen {
        __u64 gen;
};
_Static_assert(sizeof(struct profd_unwind_procs_gen) == 8, "profd_unwind_procs_gen layout");

/* Per-CPU direct-mapped cache of (table location, ELF pc range) -> rule: the range is the whole
 * row the rule came from, [row's pc, next row's pc or the page end), so the varying pcs of a hot
 * loop's body hit one row as well as repeated return addresses do, and a hit skips the binary
 * search. Slots are chosen by the pc's 16-byte block (PROFD_ROW_CACHE_SHIFT): a row spanning
 * several blocks fills one slot per block. */
#define PROFD_ROW_CACHE_SHIFT 4
#define PROFD_ROW_CACHE_SIZE 1024
/* Per-CPU direct-mapped cache of mapping entries: (pid, pc >> 16) -> the entry covering pc, valid
 * while the pid's profd_unwind_proc.version and the pool generation are unchanged. An LPM trie
 * lookup walks ~10 cold nodes; most samples of a busy process hit here instead. */
#define PROFD_MAPPING_CACHE_SIZE 256
struct profd_mapping_cache_entry {
        __u32 pid;
        __u32 version;
        __u32 generation;
        __u32 valid;
        struct profd_unwind_mapping m;
};
_Static_assert(sizeof(struct profd_mapping_cache_entry) == 64, "profd_mapping_cache_entry layout");

struct profd_row_cache_entry {
        __u64 elf_lo; /* the row's first ELF pc */
        __u32 len;    /* bytes the row covers (<= PROFD_UT_PAGE_SIZE) */
        __u32 shard, offset;
        __u32 generation;
        __u32 rule; /* global rule index + 1; 0: empty */
        __u32 _pad;
};
_Static_assert(sizeof(struct profd_row_cache_entry) == 32, "profd_row_cache_entry layout");

/* profd_unwind_proc.runtimes: the interpreters whose frames BPF walks in this process. A sample
 * of a process without the bit skips that runtime's map lookup altogether. */
#define PROFD_PROC_RUNTIME_PYTHON 1u
#define PROFD_PROC_RUNTIME_HOTSPOT 2u
#define PROFD_PROC_RUNTIME_V8 4u

struct profd_unwind_proc {
        __u32 n_mappings;
        __u32 version;  /* unique per write (pool-wide counter): validates the BPF mapping cache */
        __u64 maps_ns;  /* CLOCK_MONOTONIC time the mappings were read (before the read) */
        __u32 runtimes; /* PROFD_PROC_RUNTIME_* */
        __u32 _pad;
};
_Static_assert(sizeof(struct profd_unwind_proc) == 24, "profd_unwind_proc layout");

/* LRU hash "unwind_execs": pid -> CLOCK_MONOTONIC time of its last exec, written by the BPF exec
 * hook, which also deletes the pid from unwind_procs (its mapping entries describe the old image).
 * The daemon installs a pid only with mappings read after its last exec. */
#define PROFD_POOL_MAX_EXECS 16384
