// SPDX-License-Identifier: GPL-2.0-only
// C++ with exceptions thrown and caught in the hot loop. The work is done inside the catch block,
// which g++ -O2 moves to a separate cold fragment (exc_hot_loop.cold) with its own FDE, as it does
// with the throw (exc_thrower.cold):
//   main -> exc_hot_loop[.cold] -> exc_catch_leaf
//   main -> exc_hot_loop -> exc_thrower[.cold] -> __cxa_throw -> _Unwind_RaiseException -> ...
// Functions are extern "C" so their names need no demangling.
#include <cstdio>

#include "scenario.h"

/* Unwinding costs a few microseconds per throw: with this little work per catch, a good part of
 * the samples land in libstdc++/libgcc's unwinder (their CFI gets exercised too). */
#define EXC_CATCH_WORK 1024
/* throws between clock reads */
#define EXC_BATCH 64

struct ExcError {
        uint64_t value;
};

extern "C" {

SCEN_NOINLINE uint64_t exc_catch_leaf(uint64_t seed)
{
        volatile uint64_t scratch[4];
        uint64_t acc = seed;

        SCEN_BURN(acc, EXC_CATCH_WORK);
        scratch[acc & 3] = acc;
        return acc + scratch[acc & 3];
}

SCEN_NOINLINE void exc_thrower(uint64_t x)
{
        SCEN_KEEP(x);
        if (x != 1) // always true at run time; the compiler cannot know
                throw ExcError{x};
}

SCEN_NOINLINE uint64_t exc_hot_loop(uint64_t acc)
{
        while (!scen_expired()) {
                for (int i = 0; i < EXC_BATCH; i++) {
                        try {
                                exc_thrower(acc | 2);
                        } catch (const ExcError &e) {
                                acc = exc_catch_leaf(e.value);
                                SCEN_KEEP(acc);
                        }
                }
        }
        return acc;
}

} // extern "C"

int main(int argc, char **argv)
{
        scen_init(argc, argv);
        uint64_t r = exc_hot_loop(3);
        std::printf("%llu\n", (unsigned long long)(r & 1));
        return 0;
}
