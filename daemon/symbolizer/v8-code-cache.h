/* SPDX-License-Identifier: GPL-2.0-only */
/* Optimized JavaScript frames named before, kept across drains: (process, SharedFunctionInfo, pc)
 * -> the Code that held the pc and the named entry it gave (line, or inlining chain). Finding the
 * Code, its positions and the inlined functions' names costs dozens of remote reads; a hit costs
 * the reads that say the Code is still there, holding the pc, with the same DeoptimizationData
 * (runtimes/v8-code.h: v8_code_still()).
 *
 * Bounded: V8_CODE_CACHE_SLOTS entries, direct-mapped (a new entry replaces the one in its slot),
 * allocated on the first put; every lookup and replacement counted. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* A power of two: the distinct pcs of a process's hot optimized frames (leaf pcs spread over the
 * hot loops' instructions, callers' return addresses are few). 64 bytes each: 512 KiB. */
#define V8_CODE_CACHE_SLOTS 8192

typedef struct V8CodeCache V8CodeCache;

/* A pc whose Code was not found (or gave no line) is kept too, for this long: looking for it costs
 * up to V8_CODE_SCAN_MAX / 4 KiB remote reads, and a pc in code that is gone stays so. */
#define V8_CODE_CACHE_NEGATIVE_NS (5ULL * 1000 * 1000 * 1000)

typedef struct V8CodeCached {
        uint64_t code, deopt; /* the Code (tagged) and its DeoptimizationData word; 0: none found */
        uint64_t map;         /* the Code's map word */
        uint64_t entry;       /* the named entry (runtimes/v8-stack.h); a negative one: its result */
        uint64_t until_ns;    /* a negative one: kept until then (CLOCK_MONOTONIC) */
        uint32_t result;      /* a named one: its result (an optimized or a baseline frame's line) */
} V8CodeCached;

int v8_code_cache_new(V8CodeCache **ret);
V8CodeCache *v8_code_cache_free(V8CodeCache *c);

/* The entry kept for (pid, start_time, shared, pc), or NULL. */
const V8CodeCached *v8_code_cache_get(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared,
                                      uint64_t pc);
/* Counts a hit the caller found still valid, or drops a stale one. */
void v8_code_cache_hit(V8CodeCache *c);
void v8_code_cache_stale(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc);
void v8_code_cache_put(V8CodeCache *c, pid_t pid, uint64_t start_time, uint64_t shared, uint64_t pc,
                       const V8CodeCached *v);

/* profd_v8_code_cache_lookups_total{result}, profd_v8_code_cache_evictions_total. */
void v8_code_cache_write_metrics(const V8CodeCache *c, FILE *f);
size_t v8_code_cache_memory(const V8CodeCache *c);
