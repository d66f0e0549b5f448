/* SPDX-License-Identifier: GPL-2.0-only */
/* Names of the HotSpot (Java) frames in drained stacks (runtimes/hotspot-frames.h): each (method,
 * bytecode index) of a process is read while the process runs (hotspot_symbols_note(), at each
 * drain) through runtimes/hotspot-method.h and kept, so that the symbolizer names frames later
 * (hotspot_symbols_name(), a SymbolizerRuntimeFn), also after the process exited. A frame is
 * named "package.Class.method" (pprof's function), with its source file as the class's package
 * path ("java/util/zip/Deflater.java") and the line of its bytecode index. A method that could
 * not be read for sure (gone, not its class's any more) is not named: "[java] 0xMETHOD". */
#pragma once

#include <stdio.h>

#include "runtimes/hotspot-procs.h"
#include "sampler/sampler.h"
#include "symbolizer/symbolizer.h"
#include "util/macro.h"

/* Frames kept, at most (util/id-ring.h: bound frames carry their id); past it the oldest is
 * forgotten (counted): frames still carrying its id stay unnamed. ~0.2 KiB each with names.
 * PROFD_HOTSPOT_NAMES_MAX (environment) keeps fewer, for tests of the bound. */
#define HOTSPOT_SYMBOLS_MAX 65536
/* Their bytes as the memory budget counts them, at most (util/memory-budget.h lowers it): about
 * HOTSPOT_SYMBOLS_MAX frames' names. */
#define HOTSPOT_SYMBOLS_MAX_BYTES (16ULL << 20)

typedef struct HotspotSymbols HotspotSymbols;

int hotspot_symbols_new(HotspotProcs *procs, HotspotSymbols **ret);
/* How long the history keeps samples: frames no stack was bound to for longer (and a margin) are
 * named by no stored sample, and are forgotten (checked every 10 s). 0 (the default): kept until
 * HOTSPOT_SYMBOLS_MAX or the budget's bound pushes them out. */
void hotspot_symbols_set_history(HotspotSymbols *hs, uint64_t history_ns);
HotspotSymbols *hotspot_symbols_free(HotspotSymbols *hs);
DEFINE_TRIVIAL_CLEANUP_FUNC(HotspotSymbols *, hotspot_symbols_free);

/* Reads the methods of the Java frames in records that are not kept yet. */
void hotspot_symbols_note(HotspotSymbols *hs, const SampleRecord *records, size_t n);
/* A sampler_cut_cb_t: reads the class unloading counter of the JVMs that had stacks in the last
 * drain, the state the next generation's frames are named against. */
void hotspot_symbols_cut(void *userdata);
/* A sampler_namer_cb_t for PROFD_FRAME_HOTSPOT: binds the Java frames of a drained stack of pid to
 * the names read now (runtimes/hotspot-frames.h: HOTSPOT_FRAME_BOUND), unless its JVM unloaded
 * classes since the cut that began the stack's generation (they stay unnamed, counted); the
 * length stays. Returns the salt of the bound frames. */
uint64_t hotspot_symbols_name_stack(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames,
                                    uint8_t *exact, size_t *ret_n);
/* SymbolizerRuntimeFn: userdata is the HotspotSymbols. */
int hotspot_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret);
/* SymbolizerAnonFn: the stub, adapter or interpreter blob of a JVM's code cache holding addr
 * (read at a drain), "[jvm] NAME"; NULL when none. */
const char *hotspot_symbols_anon(void *userdata, const Process *p, uint64_t addr);
/* SymbolizerRuntimeInlinedFn: a compiled frame's methods inlined at its pc, innermost first. */
size_t hotspot_symbols_inlined(void *userdata, const Process *p, uint64_t frame, SymFrame *ret, size_t max);

void hotspot_symbols_write_metrics(const HotspotSymbols *hs, FILE *f);
size_t hotspot_symbols_memory(const HotspotSymbols *hs);
/* For the memory budget (MemoryBudgetOwner; userdata is the HotspotSymbols): the bytes of the names
 * kept, and a new bound on them: the idle go, then the oldest (counted). Returns the frames forgotten. */
uint64_t hotspot_symbols_bytes(void *userdata);
uint64_t hotspot_symbols_set_limit(void *userdata, uint64_t max_bytes);
