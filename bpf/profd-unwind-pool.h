/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool as the BPF unwinder sees it (daemon/unwind/table-pool.c fills it).
 * Includes nothing (see profd-sample.h).
 *
 *   unwind_shards   ARRAY_OF_MAPS, slot -> inner ARRAY with one 4 MiB value of __u32 words.
 *                   A placed table segment is [page index: n_pages + 1 words][rows: 1 word each],
 *                   rows' rule fields already remapped to the global rule list.
 *   unwind_rules    ARRAY of struct profd_unwind_rule, deduplicated across all tables.
 *   unwind_proc_maps HASH pid -> struct profd_unwind_proc_maps: all mapping pieces of a process
 *                   that has at most PROFD_PROC_MAPS_MAX of them, sorted.
 *   unwind_mappings LPM_TRIE {pid, address} -> struct profd_unwind_mapping: the pieces of the
 *                   other processes.
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

/* A process with few mapping pieces (most processes: a program, its loader, libc and a few
 * libraries) has them all in one unwind_proc_maps entry, sorted by start and not overlapping: one
 * map write per push and one delete at exit, where LPM keys cost one or two writes per piece, each
 * a trie node allocated (and freed at exit). Processes with more pieces, and kernels whose tracing
 * programs cannot use hash maps allocated on use (before 6.1: the map would be preallocated, 1.5
 * KiB per possible pid), use the LPM trie. A pid is in one of the two; during a move between them
 * the new place is written before the old one is deleted, and BPF looks in the array first. */
#define PROFD_PROC_MAPS_MAX 32
/* start and end of the unused slots after the last piece: above every user address, and below
 * 2^63, which BPF's search needs (pool-lookup.bpf.h). */
#define PROFD_PROC_MAPS_UNUSED (1ULL << 62)
struct profd_unwind_proc_maps {
        __u32 n; /* pieces in m[], sorted by start; m[n..] start at PROFD_PROC_MAPS_UNUSED */
        __u32 _pad;
        struct profd_unwind_mapping m[PROFD_PROC_MAPS_MAX];
};
_Static_assert(sizeof(struct profd_unwind_proc_maps) == 8 + 48 * PROFD_PROC_MAPS_MAX,
               "profd_unwind_proc_maps layout");

_Static_assert(PROFD_PROC_MAPS_MAX == 32, "profd_proc_maps_find() searches 32 slots");

static inline __attribute__((always_inline)) struct profd_unwind_mapping *
profd_proc_maps_slot(struct profd_unwind_proc_maps *pm, __u32 i)
{
        /* Opaque to the compiler, so the mask stays even where it can prove i < 32: 5.10's and
         * 6.1's verifiers lose the bounds of the OR clang makes of the halvings, and need it. */
        __asm__ volatile("" : "+r"(i));
        return &pm->m[i & (PROFD_PROC_MAPS_MAX - 1)];
}

/* 1 when start <= pc, else 0 */
#define PROFD_PROC_MAPS_AT_OR_BELOW(start, pc) ((__u32)(((start) - (pc)-1) >> 63))

/* The piece of pm that may hold pc (the last whose start is at most pc), or NULL: BPF's search
 * (pool-lookup.bpf.h), which tests/test-table-pool.c runs on random layouts. A binary search
 * without branches over all 32 slots (the unused ones start at PROFD_PROC_MAPS_UNUSED, above any
 * user pc): straight-line code, which the verifier walks once per frame where a search with
 * branches would fork its states at every halving, 20 frames to a program. start <= pc is the sign
 * of start - pc - 1: both lie below 2^63. */
static inline __attribute__((always_inline)) struct profd_unwind_mapping *
profd_proc_maps_find(struct profd_unwind_proc_maps *pm, __u64 pc)
{
        __u32 idx = 0;

        for (__u32 step = PROFD_PROC_MAPS_MAX / 2; step > 0; step /= 2) /* 5 halvings */
                idx += step &
                       -PROFD_PROC_MAPS_AT_OR_BELOW(profd_proc_maps_slot(pm, idx + step - 1)->start, pc);
        /* idx counts the starts at most pc, up to 31: the 32nd slot decides the last one. */
        idx += PROFD_PROC_MAPS_AT_OR_BELOW(profd_proc_maps_slot(pm, idx)->start, pc);
        if (idx == 0)
                return NULL;
        return profd_proc_maps_slot(pm, idx - 1);
}

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
