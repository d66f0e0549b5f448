/* SPDX-License-Identifier: GPL-2.0-only */
/* A chain crossing into a shared library and back:
 *   main -> shlib_caller -> [libscen-shlib.so] shlib_lib_entry -> shlib_lib_mid -> shlib_lib_leaf
 *   main -> shlib_caller -> [libscen-shlib.so] shlib_lib_entry -> shlib_lib_mid -> shlib_callback
 *        -> shlib_callback_leaf   (back in the executable, through a function pointer)
 * Half of the slices take each path. */
#include <stdio.h>

#include "scenario.h"

uint64_t shlib_lib_entry(uint64_t x, uint64_t (*callback)(uint64_t));

SCEN_NOINLINE uint64_t shlib_callback_leaf(uint64_t seed)
{
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        return acc;
}

SCEN_NOINLINE uint64_t shlib_callback(uint64_t x)
{
        uint64_t r = shlib_callback_leaf(x);
        SCEN_KEEP(r);
        return r + 7;
}

SCEN_NOINLINE uint64_t shlib_caller(uint64_t x)
{
        uint64_t r = shlib_lib_entry(x, shlib_callback);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        uint64_t acc = 0, n = 0;

        scen_init(argc, argv);
        while (!scen_expired()) {
                /* alternate the two paths on the low bit of a counter */
                uint64_t r = shlib_caller((acc << 1) | (n++ & 1));
                acc = r >> 1;
        }
        printf("%llu\n", (unsigned long long)(acc & 1));
        return 0;
}
