/* SPDX-License-Identifier: GPL-2.0-only */
/* The module the dlopen scenario loads at run time (scen-dlopen-module.so). */
#include "scenario.h"

SCEN_NOINLINE uint64_t dl_module_leaf(uint64_t seed)
{
        volatile uint64_t scratch[4];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 3] = acc;
        return acc + scratch[acc & 3];
}

SCEN_NOINLINE uint64_t dl_module_mid(uint64_t x)
{
        uint64_t r = dl_module_leaf(x);
        SCEN_KEEP(r);
        return r + 2;
}

SCEN_EXPORT SCEN_NOINLINE uint64_t dl_module_entry(uint64_t x)
{
        uint64_t r = dl_module_mid(x);
        SCEN_KEEP(r);
        return r + 1;
}
