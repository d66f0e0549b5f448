/* SPDX-License-Identifier: GPL-2.0-only */
/* Plain call chain: main -> plain_a -> plain_b -> plain_c -> plain_leaf. Built without PIE. */
#include <stdio.h>

#include "scenario.h"

SCEN_NOINLINE uint64_t plain_leaf(uint64_t seed)
{
        /* A stack array moves rsp inside the leaf, so its CFA is not simply rsp+8. */
        volatile uint64_t scratch[8];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 7] = acc;
        return acc + scratch[acc & 7];
}

SCEN_NOINLINE uint64_t plain_c(uint64_t x)
{
        uint64_t r = plain_leaf(x ^ 3);
        SCEN_KEEP(r);
        return r + 3;
}

SCEN_NOINLINE uint64_t plain_b(uint64_t x)
{
        uint64_t r = plain_c(x ^ 2);
        SCEN_KEEP(r);
        return r + 2;
}

SCEN_NOINLINE uint64_t plain_a(uint64_t x)
{
        uint64_t r = plain_b(x ^ 1);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        uint64_t acc = 1;

        scen_init(argc, argv);
        while (!scen_expired())
                acc = plain_a(acc);
        printf("%llu\n", (unsigned long long)(acc & 1));
        return 0;
}
