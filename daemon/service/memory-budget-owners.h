/* SPDX-License-Identifier: GPL-2.0-only */
/* The owners profd's memory budget (util/memory-budget.h) may ask to give memory back, in the
 * order it asks them: the symbolizer's open executables (closed ones open again on demand; names
 * already resolved stay cached), then Python code objects (a running process's are read again
 * when next seen; an exited one's are lost, counted), then Java frames' names (first those no
 * stored sample carries, then the oldest: stored samples bound to them lose their names, counted).
 * Not asked: the process table (lowering its bound cuts live processes' mappings short),
 * JavaScript names bound to frame ids the history holds, the history itself (samples). */
#pragma once

#include "symbolizer/hotspot-symbols.h"
#include "symbolizer/python-symbols.h"
#include "symbolizer/symbolizer.h"
#include "util/memory-budget.h"

/* Floors: under these an owner is not asked to go. The symbolizer's: a profile of a busy host reads
 * tens of executables within seconds, and below ~16 MiB of tables it reopens them over and over;
 * Python's: a few thousand code objects, a busy interpreter's working set. */
#define MEMORY_BUDGET_SYMBOLIZER_FLOOR (16ULL << 20)
#define MEMORY_BUDGET_PYTHON_CODE_FLOOR (1ULL << 20)
/* Python code's hysteresis (one check a drain, a second): the peaks of a profile build pass within
 * a few seconds and the symbolizer's tables answer them; only RSS over the target for 10 s in a
 * row lowers Python code's bound, by 1 MiB a second, so an exited process's code objects (not read
 * again) are not dropped for a transient peak. */
#define MEMORY_BUDGET_PYTHON_CODE_PATIENCE 10
#define MEMORY_BUDGET_PYTHON_CODE_STEP (1ULL << 20)
/* Java names: last, with the same hysteresis; a JVM's hot methods (a few thousand frames) fit
 * 2 MiB. */
#define MEMORY_BUDGET_JAVA_NAMES_FLOOR (2ULL << 20)

/* ps, hs may be NULL (no Python, no Java frames). */
int memory_budget_add_owners(MemoryBudget *b, Symbolizer *s, PythonSymbols *ps, HotspotSymbols *hs);
