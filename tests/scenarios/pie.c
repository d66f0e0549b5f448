/* SPDX-License-Identifier: GPL-2.0-only */
/* PIE: the plain chain in a position-independent executable:
 * main -> pie_a -> pie_b -> pie_c -> pie_leaf. */
#include <stdio.h>

#include "scenario.h"

SCEN_NOINLINE uint64_t pie_leaf(uint64_t seed)
{
        /* A stack array moves rsp inside the leaf, so its CFA is not simply rsp+8. */
        volatile uint64_t scratch[8];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 7] = acc;
        return acc + scratch[acc & 7];
}

SCEN_NOINLINE uint64_t pie_c(uint64_t x)
{
        uint64_t r = pie_leaf(x ^ 3);
        SCEN_KEEP(r);
        return r + 3;
}

SCEN_NOINLINE uint64_t pie_b(uint64_t x)
{
        uint64_t r = pie_c(x ^ 2);
        SCEN_KEEP(r);
        return r + 2;
}

SCEN_NOINLINE uint64_t pie_a(uint64_t x)
{
        uint64_t r = pie_b(x ^ 1);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        uint64_t acc = 1;

        scen_init(argc, argv);
        while (!scen_expired())
                acc = pie_a(acc);
        printf("%llu\n", (unsigned long long)(acc & 1));
        return 0;
}
