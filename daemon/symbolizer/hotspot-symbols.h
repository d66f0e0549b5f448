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

/* Frames named, at most (ids of bound frames); past it new frames stay unnamed (counted). ~0.2 KiB
 * each with names. */
#define HOTSPOT_SYMBOLS_MAX 65536

typedef struct HotspotSymbols HotspotSymbols;

int hotspot_symbols_new(HotspotProcs *procs, HotspotSymbols **ret);
HotspotSymbols *hotspot_symbols_free(HotspotSymbols *hs);
DEFINE_TRIVIAL_CLEANUP_FUNC(HotspotSymbols *, hotspot_symbols_free);

/* Reads the methods of the Java frames in records that are not kept yet. */
void hotspot_symbols_note(HotspotSymbols *hs, const SampleRecord *records, size_t n);
/* A sampler_namer_cb_t for PROFD_FRAME_HOTSPOT: binds the Java frames of a drained stack of pid to
 * the names read now (runtimes/hotspot-frames.h: HOTSPOT_FRAME_BOUND), unless its JVM unloaded
 * classes since its previous drain (they stay unnamed, counted); the length stays. Returns the
 * salt of the bound frames. */
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
