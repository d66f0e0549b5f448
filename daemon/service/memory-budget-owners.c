/* SPDX-License-Identifier: GPL-2.0-only */
#include "runtimes/python-code.h"
#include "service/memory-budget-owners.h"
#include "symbolizer/elf-cache.h"

static uint64_t symbolizer_bytes(void *userdata)
{
        return symbolizer_tables_bytes(userdata);
}

static uint64_t symbolizer_limit(void *userdata, uint64_t max_bytes)
{
        return symbolizer_set_tables_limit(userdata, max_bytes);
}

static uint64_t python_bytes(void *userdata)
{
        return python_symbols_memory(userdata);
}

static uint64_t python_limit(void *userdata, uint64_t max_bytes)
{
        return python_symbols_set_code_limit(userdata, max_bytes);
}

int memory_budget_add_owners(MemoryBudget *b, Symbolizer *s, PythonSymbols *ps, HotspotSymbols *hs)
{
        int r;

        /* The budget acts once a second, after the fact: a large read makes room before. */
        symbolizer_set_peak_limit(s, memory_budget_target(b) + SYMBOLIZER_PEAK_ABOVE_TARGET);
        r = memory_budget_add(b, &(MemoryBudgetOwner){
                                         .name = "dwarf_elf",
                                         .bytes = symbolizer_bytes,
                                         .set_limit = symbolizer_limit,
                                         .floor = MEMORY_BUDGET_SYMBOLIZER_FLOOR,
                                         .ceiling = SYMBOLIZER_MAX_BYTES,
                                         .userdata = s,
                                 });
        if (r < 0)
                return r;
        if (ps) {
                r = memory_budget_add(b, &(MemoryBudgetOwner){
                                                 .name = "python_code",
                                                 .bytes = python_bytes,
                                                 .set_limit = python_limit,
                                                 .floor = MEMORY_BUDGET_PYTHON_CODE_FLOOR,
                                                 .ceiling = PYTHON_CODE_MAX_BYTES,
                                                 .userdata = ps,
                                                 .patience = MEMORY_BUDGET_PYTHON_CODE_PATIENCE,
                                                 .step = MEMORY_BUDGET_PYTHON_CODE_STEP,
                                         });
                if (r < 0)
                        return r;
        }
        if (!hs)
                return 0;
        return memory_budget_add(b, &(MemoryBudgetOwner){
                                            .name = "java_names",
                                            .bytes = hotspot_symbols_bytes,
                                            .set_limit = hotspot_symbols_set_limit,
                                            .floor = MEMORY_BUDGET_JAVA_NAMES_FLOOR,
                                            .ceiling = HOTSPOT_SYMBOLS_MAX_BYTES,
                                            .userdata = hs,
                                            .patience = MEMORY_BUDGET_PYTHON_CODE_PATIENCE,
                                            .step = MEMORY_BUDGET_PYTHON_CODE_STEP,
                                    });
}
