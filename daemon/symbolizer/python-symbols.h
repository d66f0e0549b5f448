/* SPDX-License-Identifier: GPL-2.0-only */
/* Names of the Python frames in drained stacks: the code objects are read while their process
 * runs (python_symbols_note(), at each drain) into the code cache (python-code.h), and the
 * symbolizer names frames from that cache later (python_symbols_name(), a SymbolizerPythonFn),
 * also after the process exited. A frame is named "module.qualname" ("threading.Thread.run"),
 * the module told from the file name. */
#pragma once

#include "runtimes/python-code.h"
#include "runtimes/python-frame-ids.h"
#include "runtimes/python-procs.h"
#include "sampler/sampler.h"
#include "symbolizer/symbolizer.h"
#include "util/macro.h"

typedef struct PythonSymbols PythonSymbols;

/* ids: those the drain gave Python frames (sampler_set_python_frame_ids()). */
int python_symbols_new(PythonProcs *procs, PythonFrameIds *ids, PythonSymbols **ret);
PythonSymbols *python_symbols_free(PythonSymbols *ps);
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonSymbols *, python_symbols_free);

/* Reads the code objects of the Python frames in records that are not cached yet. */
void python_symbols_note(PythonSymbols *ps, const SampleRecord *records, size_t n);
/* The same for a stack as BPF wrote it, as soon as it is reported (a sampler_python_stack_cb_t;
 * userdata is the PythonSymbols). */
void python_symbols_note_stack(void *userdata, uint32_t pid, const uint64_t *frames, size_t n);
/* SymbolizerPythonFn: userdata is the PythonSymbols. A frame it cannot name for sure gets a
 * placeholder ("[python] 0xCODE") in ret and a negative errno. */
int python_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret);

/* "/usr/lib/python3.11/json/encoder.py" -> "json.encoder", "/srv/app.py" -> "app",
 * "<frozen importlib._bootstrap>" -> "importlib._bootstrap"; "" when there is none ("<string>"). */
void python_module_name(const char *file, char *buf, size_t size);

void python_symbols_write_metrics(const PythonSymbols *ps, FILE *f);
/* Memory of the code cache, for profd_memory_bytes. */
size_t python_symbols_memory(const PythonSymbols *ps);
/* The code objects' bound, for the memory budget (python-code.h); returns how many were evicted. */
size_t python_symbols_set_code_limit(PythonSymbols *ps, size_t max_bytes);
