/* SPDX-License-Identifier: GPL-2.0-only */
/* Executable cache: identity -> unwind table placed in the BPF table pool. The identity is
 * process_mapping_key(): the opened file's device, inode, size and times plus its build ID, so a
 * table is shared only by mappings of the same file, never by files that merely claim the same
 * build ID; the pool keys the table by it too. One entry per executable, shared by every mapping of
 * it in every process and counted by them; an entry no mapping uses releases its pool reference at once (the
 * pool keeps the rows until it needs the room) and is forgotten after a short grace.
 *
 * Table builds take up to ~100 ms for huge libraries, so they are queued and run one per
 * event-loop iteration from a low-priority defer source; until its build finishes an entry has
 * no pool table (the unwinder steps by frame pointer there). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "unwind-tables/unwind-table.h"
#include "unwind/table-pool.h"
#include "util/chain-hash.h"
#include "util/macro.h"
#include "util/safe-open.h"

typedef struct ExeCache ExeCache;

typedef enum ExeState {
        EXE_NEW,    /* not built yet, no build queued */
        EXE_QUEUED, /* build queued */
        EXE_READY,  /* built; pool_table set while users > 0 (unless the pool was full) */
        EXE_FAILED, /* build failed (malformed, no CFI, pool full): see error */
} ExeState;

typedef struct ExeEntry {
        uint8_t id[UNWIND_TABLE_ID_MAX];
        size_t id_size;
        uint8_t build_id[UNWIND_TABLE_ID_MAX]; /* the file's GNU build ID when it was read, if any */
        size_t build_id_size;
        ExeState state;
        int error;             /* EXE_FAILED: negative errno */
        uint64_t failed_ns;    /* CLOCK_MONOTONIC of the failure (pool-full entries are retried) */
        PoolTable *pool_table; /* reference held while users > 0 */
        unsigned users;        /* mappings using it, across processes */
        uint64_t unused_ns;    /* CLOCK_MONOTONIC when users dropped to 0 */
        uint32_t n_rows;       /* of the built table (for metrics/debugging) */
        char *name;            /* a path it was seen under, for messages */
        HashLink link;         /* in the cache's entries, by a hash of id */
} ExeEntry;

/* Called after an entry's build finished (successfully or not) so that the processes mapping it
 * can be pushed to the pool again. */
typedef void (*exe_ready_fn)(ExeEntry *e, void *userdata);

int exe_cache_new(sd_event *e, TablePool *pool, uint64_t grace_ns, exe_ready_fn ready, void *userdata,
                  ExeCache **ret);
ExeCache *exe_cache_free(ExeCache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ExeCache *, exe_cache_free);

/* Finds or creates the entry of this identity (no user reference taken). build_id: the file's GNU
 * build ID as read when it was mapped (a build finding another one fails). */
int exe_cache_get(ExeCache *c, const uint8_t *id, size_t id_size, const uint8_t *build_id,
                  size_t build_id_size, const char *name, ExeEntry **ret);
/* Takes a user reference. If the entry has no pool table yet, reuses the pool's copy when it still
 * holds one, else queues a build of fd (dup'ed; -1: the caller has none, nothing is queued). Past
 * EXE_CACHE_MAX_QUEUED_FDS queued descriptors, the build keeps reopen (process_mapping_reopen())
 * instead and opens the file again when it runs.
 * urgent: ahead of every other build (a process just started); else behind them (start-up scan). */
void exe_cache_use(ExeCache *c, ExeEntry *e, int fd, const SafeMapping *reopen, const char *debug_root,
                   bool urgent);
void exe_cache_unuse(ExeCache *c, ExeEntry *e);
/* For an entry already in use that still has no table and no build queued (its first user had no
 * file to give, the queue was full, the pool was full): queue one now from fd. */
void exe_cache_ensure(ExeCache *c, ExeEntry *e, int fd, const SafeMapping *reopen, const char *debug_root,
                      bool urgent);
/* True when exe_cache_use() would want a file to build from (so callers open one only then). */
bool exe_cache_needs_file(ExeCache *c, const ExeEntry *e);
/* Forgets entries unused for longer than the grace period. */
void exe_cache_gc(ExeCache *c, uint64_t now_ns);
size_t exe_cache_queued(const ExeCache *c);
void exe_cache_write_metrics(const ExeCache *c, FILE *f);
