/* SPDX-License-Identifier: GPL-2.0-only */
/* Line tables of interpreted JavaScript functions kept across drains: (process, BytecodeArray,
 * SharedFunctionInfo) -> the array's lines (runtimes/v8-lines.h). Reading a table costs a dozen
 * remote reads and the script's line ends; a hit costs one read, of the array's words that say it
 * is still the same array (map, length, position table).
 *
 * Bounded: V8_LINE_CACHE_SLOTS entries in sets of V8_LINE_CACHE_WAYS (a new table replaces the least
 * used of its set: two functions of every stack falling into one slot of a direct-mapped table
 * replaced each other's table at every stack, a dozen reads each time),
 * and V8_LINE_CACHE_BYTES of tables and line ends in all (beyond, not kept). Every lookup, replacement
 * and table not kept is counted. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtimes/v8-lines.h"

/* A power of two: hot interpreted functions are tens to hundreds. */
#define V8_LINE_CACHE_SLOTS 2048
#define V8_LINE_CACHE_WAYS 4
/* Tables' bytes kept, at most: 8 bytes a position, a few hundred positions a function. */
#define V8_LINE_CACHE_BYTES (4u * 1024 * 1024)
/* Scripts whose line ends are kept (a power of two): a Node.js process has a few hundred, most
 * of them its own modules (their sources are external strings, kept as unreadable). */
#define V8_SCRIPT_CACHE_SLOTS 256

typedef struct V8LineCache V8LineCache;

int v8_line_cache_new(V8LineCache **ret);
V8LineCache *v8_line_cache_free(V8LineCache *c);

/* The table of bca (with sfi) in process (pid, start_time), if cached: NULL otherwise. The caller
 * checks its words and calls v8_line_cache_stale() when they changed. */
const V8LineTable *v8_line_cache_get(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca,
                                     uint64_t sfi);
void v8_line_cache_stale(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca, uint64_t sfi);
/* Keeps t (taken over: freed on failure too); the kept table, or NULL when not kept. */
const V8LineTable *v8_line_cache_put(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca,
                                     uint64_t sfi, V8LineTable *t);

/* Line ends of scripts, by (process, Script): kept with the Script's source word, which the caller
 * reads again to check (a script's source never changes; another script has another).
 * V8_SCRIPT_CACHE_SLOTS entries, direct-mapped, within the same byte bound. */
const V8LineEnds *v8_line_cache_get_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script,
                                           uint64_t *ret_source);
void v8_line_cache_drop_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script);
/* Keeps e (taken over); the kept line ends, or NULL when not kept. */
const V8LineEnds *v8_line_cache_put_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script,
                                           uint64_t source, V8LineEnds *e);

/* profd_v8_line_cache_lookups_total{result}, profd_v8_line_cache_dropped_total{reason},
 * profd_v8_line_cache_bytes. */
void v8_line_cache_write_metrics(const V8LineCache *c, FILE *f);
size_t v8_line_cache_memory(const V8LineCache *c);
