/* SPDX-License-Identifier: GPL-2.0-only */
/* JavaScript function names kept across drains: (process, JSFunction address) -> the id of its
 * (function, script) pair, with the words it was named through (runtimes/v8-objects.h,
 * V8FunctionIdentity). A drain names the same hot functions again and again; a hit costs the two
 * remote reads of those words instead of the ten to twenty of naming: the words at the address
 * must still be the ones cached (the GC moves and frees functions; another one at that address has
 * another SharedFunctionInfo, or the same one and so the same names).
 *
 * Bounded: V8_NAME_CACHE_SLOTS entries, V8_NAME_CACHE_WAYS per set; a new entry in a full set
 * evicts its least recently used one. Every lookup and eviction is counted. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtimes/v8-objects.h"

/* Entries (a power of two): 8192 of 64 bytes, 512 KiB, allocated on the first insert. A
 * JavaScript profile's hot functions are hundreds to a few thousand. */
#define V8_NAME_CACHE_SLOTS 8192
/* Entries a function address may take in its set: few enough to compare them all per lookup. */
#define V8_NAME_CACHE_WAYS 4

typedef struct V8NameCache V8NameCache;

int v8_name_cache_new(V8NameCache **ret);
V8NameCache *v8_name_cache_free(V8NameCache *c);

/* The cached pair id of fn in process (pid, start_time), and the words to check; -ENOENT: none. */
int v8_name_cache_get(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn,
                      V8FunctionIdentity *ret_identity, uint32_t *ret_id);
/* The check of the entry v8_name_cache_get() gave failed: the function there is another one. */
void v8_name_cache_stale(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn);
/* fn was named id through identity. -ENOMEM: not kept. */
int v8_name_cache_put(V8NameCache *c, pid_t pid, uint64_t start_time, uint64_t fn,
                      const V8FunctionIdentity *identity, uint32_t id);

/* profd_v8_name_cache_lookups_total{result}, profd_v8_name_cache_evictions_total,
 * profd_v8_name_cache_entries. */
void v8_name_cache_write_metrics(const V8NameCache *c, FILE *f);
size_t v8_name_cache_memory(const V8NameCache *c);
