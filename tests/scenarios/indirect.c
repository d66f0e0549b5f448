/* SPDX-License-Identifier: GPL-2.0-only */
/* Indirect calls through a table of function pointers the compiler cannot see through:
 *   main -> ind_dispatch -> (*ind_ops[0]) ind_op_square -> ind_leaf
 *   main -> ind_dispatch -> (*ind_ops[1]) ind_op_cube -> ind_trampoline -> (*ind_next) ind_leaf
 * Half of the slices take each path. */
#include <stdio.h>

#include "scenario.h"

SCEN_NOINLINE uint64_t ind_leaf(uint64_t seed)
{
        volatile uint64_t scratch[2];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 1] = acc;
        return acc + scratch[acc & 1];
}

/* volatile: the targets are loaded at run time, so every call stays an indirect call */
static uint64_t (*volatile ind_next)(uint64_t) = ind_leaf;

SCEN_NOINLINE uint64_t ind_trampoline(uint64_t x)
{
        uint64_t r = ind_next(x);
        SCEN_KEEP(r);
        return r ^ 9;
}

SCEN_NOINLINE uint64_t ind_op_square(uint64_t x)
{
        uint64_t r = ind_leaf(x * x);
        SCEN_KEEP(r);
        return r + 2;
}

SCEN_NOINLINE uint64_t ind_op_cube(uint64_t x)
{
        uint64_t r = ind_trampoline(x * x * x);
        SCEN_KEEP(r);
        return r + 3;
}

static uint64_t (*volatile ind_ops[2])(uint64_t) = {ind_op_square, ind_op_cube};

SCEN_NOINLINE uint64_t ind_dispatch(unsigned which, uint64_t x)
{
        uint64_t r = ind_ops[which & 1](x);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        uint64_t acc = 3;
        unsigned n = 0;

        scen_init(argc, argv);
        while (!scen_expired())
                acc = ind_dispatch(n++, acc);
        printf("%llu\n", (unsigned long long)(acc & 1));
        return 0;
}
