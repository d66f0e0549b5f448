/* SPDX-License-Identifier: GPL-2.0-only */
/* Recursion 300 deep: main -> rec_start -> rec_descend x300 -> rec_leaf, which burns for the whole
 * run. Each frame carries a 64-byte array, so the user stack below the leaf is ~30 KiB: more than
 * perf's default 8 KiB stack copy, which profd must not need. */
#include <stdio.h>

#include "scenario.h"

#define REC_DEPTH 300

SCEN_NOINLINE uint64_t rec_leaf(uint64_t seed)
{
        uint64_t acc = seed;

        while (!scen_expired())
                SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        return acc;
}

SCEN_NOINLINE uint64_t rec_descend(unsigned depth, uint64_t x)
{
        volatile uint64_t pad[8];
        uint64_t r;

        pad[depth & 7] = x;
        if (depth <= 1)
                r = rec_leaf(x);
        else
                r = rec_descend(depth - 1, x + depth);
        SCEN_KEEP(r);
        return r + pad[depth & 7];
}

SCEN_NOINLINE uint64_t rec_start(uint64_t x)
{
        uint64_t r = rec_descend(REC_DEPTH, x);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        scen_init(argc, argv);
        printf("%llu\n", (unsigned long long)(rec_start(7) & 1));
        return 0;
}
