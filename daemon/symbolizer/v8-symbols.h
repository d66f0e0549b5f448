/* SPDX-License-Identifier: GPL-2.0-only */
/* Names of the JavaScript frames in drained stacks. At the drain, while the process runs, each V8
 * entry (the JSFunction's address, bpf/profd-v8.h) is named through the remote memory path
 * (runtimes/v8-objects.h: types checked, a function the GC moved or freed stays unnamed) and its
 * (function, script) pair interned: the entry becomes that pair's id (runtimes/v8-stack.h), which
 * names the frame later, also after the process exited. A frame is named "function" ("<anonymous>"
 * for a function without a name), with its script as file. */
#pragma once

#include <stdint.h>
#include <stdio.h>

#include "runtimes/v8-procs.h"
#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct V8Symbols V8Symbols;

int v8_symbols_new(V8Procs *procs, V8Symbols **ret);
V8Symbols *v8_symbols_free(V8Symbols *vs);
DEFINE_TRIVIAL_CLEANUP_FUNC(V8Symbols *, v8_symbols_free);

/* A sampler_v8_names_cb_t: userdata is the V8Symbols. An interpreted frame's bytecode position
 * becomes its entry's line (runtimes/v8-stack.h); returns the stack's new length. */
size_t v8_symbols_name_stack(void *userdata, uint32_t pid, uint64_t *frames, uint8_t *exact, size_t n);
/* A sampler_namer_cb_t for PROFD_FRAME_V8: moves the pc entry of each V8 frame after it
 * (v8_stack_splice(), runtimes/v8-stack.h), then names the stack as above (an optimized frame's pc
 * gives its line and inlined functions, then goes). No salt: a pair's id names it for good. */
uint64_t v8_symbols_namer(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames, uint8_t *exact,
                          size_t *n);
/* A SymbolizerRuntimeFn (SYM_RUNTIME_V8): userdata is the V8Symbols. -ENOENT: the frame has no names (the
 * symbolizer calls it "[javascript]"). */
int v8_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret);
/* A SymbolizerRuntimeInlinedFn (SYM_RUNTIME_V8): the functions TurboFan or Maglev inlined at an
 * optimized frame's pc (runtimes/v8-code.h), innermost first, each with its line; the frame's own
 * function is v8_symbols_name()'s. */
size_t v8_symbols_inlined(void *userdata, const Process *p, uint64_t frame, SymFrame *ret, size_t max);

/* profd_v8_frames_named_total{result}, profd_v8_names, profd_v8_name_cache_* (v8-name-cache.h). */
void v8_symbols_write_metrics(const V8Symbols *vs, FILE *f);
size_t v8_symbols_memory(const V8Symbols *vs);
