/* SPDX-License-Identifier: GPL-2.0-only */
/* The shared-library half of the shlib scenario (libscen-shlib.so). */
#include "scenario.h"

SCEN_NOINLINE uint64_t shlib_lib_leaf(uint64_t seed)
{
        volatile uint64_t scratch[4];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 3] = acc;
        return acc + scratch[acc & 3];
}

SCEN_NOINLINE uint64_t shlib_lib_mid(uint64_t x, uint64_t (*callback)(uint64_t))
{
        uint64_t r = (x & 1) ? callback(x) : shlib_lib_leaf(x);
        SCEN_KEEP(r);
        return r + 5;
}

/* Entry point called from the executable through the PLT. */
SCEN_EXPORT SCEN_NOINLINE uint64_t shlib_lib_entry(uint64_t x, uint64_t (*callback)(uint64_t))
{
        uint64_t r = shlib_lib_mid(x, callback);
        SCEN_KEEP(r);
        return r + 4;
}
