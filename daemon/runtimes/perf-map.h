/* SPDX-License-Identifier: GPL-2.0-only */
/* Names of JIT-compiled code from perf map files: the /tmp/perf-PID.map a runtime writes (Node
 * --perf-basic-prof, the JVM's Compiler.perfmap, .NET's DOTNET_PerfMapEnabled, python -X perf,
 * LuaJIT), one "START SIZE name" line per function, START and SIZE in hex. Read from the process's
 * own root under its own pid (innermost pid namespace), never blocking, only a regular file owned
 * by the process's user or root, bounded per step and per process; appended lines are read
 * incrementally. What was read stays after the process exits, until perf_maps_gc() is told it is
 * forgotten. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct PerfMaps PerfMaps;

/* Per-process bound: entries beyond it are dropped (counted). A Node server's map grows by a line
 * per function compiled, typically 10k-100k lines of ~60 bytes. */
#define PERF_MAP_MAX_BYTES_PER_PROCESS (32u << 20)
/* All processes together; beyond it new entries are dropped (counted). */
#define PERF_MAP_MAX_BYTES_TOTAL (128u << 20)
/* Processes whose map is tracked at once; beyond it exited ones are forgotten first, else the
 * new process's map is not read (counted). */
#define PERF_MAP_MAX_PROCESSES 1024
/* Bytes of a map file read per step (one step per lookup or periodic refresh). */
#define PERF_MAP_READ_STEP (1u << 20)
/* Longer lines are malformed (skipped, counted). */
#define PERF_MAP_MAX_LINE 4096

int perf_maps_new(PerfMaps **ret);
PerfMaps *perf_maps_free(PerfMaps *pm);
DEFINE_TRIVIAL_CLEANUP_FUNC(PerfMaps *, perf_maps_free);

/* The name of the function containing addr, an address in anonymous executable memory of p, or
 * NULL. A miss (or a map not checked for a while) reads one step of p's map while p runs. The
 * string stays valid until the next call into pm. ret_file (optional) gets the map's path as the
 * process sees it ("/tmp/perf-NSPID.map"), valid as long as the name. */
const char *perf_maps_lookup(PerfMaps *pm, const Process *p, uint64_t addr, const char **ret_file);
/* Reads one step of p's map if it is due (p runs and has anonymous executable memory): called
 * for processes seen in samples, so that a map is read while its process still exists. */
void perf_maps_refresh(PerfMaps *pm, const Process *p);
/* Periodic work: forgets the maps of processes that find() no longer knows (or knows as another
 * process: pid reused), and reads a bounded number of steps of live processes' maps that are
 * due. */
void perf_maps_tick(PerfMaps *pm, const Process *(*find)(pid_t pid, void *userdata), void *userdata);
size_t perf_maps_memory(const PerfMaps *pm);
void perf_maps_write_metrics(const PerfMaps *pm, FILE *f);
