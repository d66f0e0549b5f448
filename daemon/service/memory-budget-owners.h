/* SPDX-License-Identifier: GPL-2.0-only */
/* The owners profd's memory budget (util/memory-budget.h) may ask to give memory back, in the
 * order it asks them: the symbolizer's open executables (closed ones open again on demand; names
 * already resolved stay cached), then Python code objects (a running process's are read again
 * when next seen; an exited one's are lost, counted). Not asked: the process table (lowering its
 * bound cuts live processes' mappings short), Java and JavaScript names bound to frame ids the
 * history holds, the history itself (samples). */
#pragma once

#include "symbolizer/python-symbols.h"
#include "symbolizer/symbolizer.h"
#include "util/memory-budget.h"

/* Floors: under these an owner is not asked to go. The symbolizer's: a profile of a busy host reads
 * tens of executables within seconds, and below ~16 MiB of tables it reopens them over and over;
 * Python's: a few thousand code objects, a busy interpreter's working set. */
#define MEMORY_BUDGET_SYMBOLIZER_FLOOR (16ULL << 20)
#define MEMORY_BUDGET_PYTHON_CODE_FLOOR (1ULL << 20)

/* ps may be NULL (no Python frames). */
int memory_budget_add_owners(MemoryBudget *b, Symbolizer *s, PythonSymbols *ps);
