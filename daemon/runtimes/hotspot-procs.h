/* SPDX-License-Identifier: GPL-2.0-only */
/* Which processes run a HotSpot JVM, and the offsets to walk it. After the tracker reads a
 * process's mappings, hotspot_procs_note() looks for a mapped libjvm.so; the first process that maps
 * a given libjvm file has that file's vmStructs tables read from its memory
 * (hotspot-vmstructs.h, through remote-memory.h) and turned into HotspotOffsets
 * (hotspot-offsets.h), kept per file (bounded) so that every later JVM of the same build costs a
 * lookup. A build profd cannot walk is counted once per process by reason, and its stacks stay
 * native (perf maps still name its compiled code). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <linux/types.h> /* for profd-hotspot.h */

#include "bpf/profd-hotspot.h"
#include "runtimes/hotspot-offsets.h"
#include "tracker/process-table.h"
#include "util/macro.h"

/* libjvm files whose tables are kept: a host has a few JDKs; past it the least recently used goes
 * (and is read again from the next process that maps it). */
#define HOTSPOT_FILE_CACHE_MAX 32
/* JVMs tracked at once; more are counted (outcome "table_full") and stay native. */
#define HOTSPOT_MAX_PROCS 4096

typedef struct HotspotProcs HotspotProcs;

typedef struct HotspotProcess {
        pid_t pid;
        uint64_t start_time;
        uint64_t bias; /* libjvm's load bias in the process */
        HotspotOffsets offsets;
        struct profd_hotspot_proc code; /* where its code is (what BPF was given) */
} HotspotProcess;

/* map_fd: the BPF map hotspot_procs (bpf/profd-hotspot.h); -1 for none (detection alone). */
int hotspot_procs_new(int map_fd, HotspotProcs **ret);
HotspotProcs *hotspot_procs_free(HotspotProcs *hp);
DEFINE_TRIVIAL_CLEANUP_FUNC(HotspotProcs *, hotspot_procs_free);

/* p's mappings were (re)read: note its JVM, or forget it if it has none. */
void hotspot_procs_note(HotspotProcs *hp, const Process *p);
void hotspot_procs_forget(HotspotProcs *hp, pid_t pid);

/* JVMs noted before their code cache existed (at most HOTSPOT_STARTING_MAX): up to max of their
 * pids, taken out of the list, to be noted again (their mappings may not change any more). */
#define HOTSPOT_STARTING_MAX 64
size_t hotspot_procs_take_starting(HotspotProcs *hp, pid_t *ret, size_t max);
/* Adds pid to that list: its JVM is noted again at the next interval (e.g. BPF could not be told
 * yet because the pool has no entry for the pid while its tables are built). */
void hotspot_procs_retry(HotspotProcs *hp, pid_t pid);
/* The live process pid known to run a HotSpot profd can walk, or NULL. */
const HotspotProcess *hotspot_procs_get(const HotspotProcs *hp, pid_t pid);

void hotspot_procs_write_metrics(const HotspotProcs *hp, FILE *f);
/* Bytes of the table of JVMs and of their libjvm files (profd_memory_bytes). */
size_t hotspot_procs_memory(const HotspotProcs *hp);
