/* SPDX-License-Identifier: GPL-2.0-only */
/* Two threads with different chains, both burning at the same time:
 *   main thread:   main -> thr_main_work -> thr_main_leaf
 *   second thread: start_thread -> thr_worker -> thr_worker_mid -> thr_worker_leaf */
#include <pthread.h>
#include <stdio.h>

#include "scenario.h"

SCEN_NOINLINE uint64_t thr_main_leaf(uint64_t seed)
{
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        return acc;
}

SCEN_NOINLINE uint64_t thr_main_work(uint64_t x)
{
        uint64_t r = thr_main_leaf(x);
        SCEN_KEEP(r);
        return r + 1;
}

SCEN_NOINLINE uint64_t thr_worker_leaf(uint64_t seed)
{
        volatile uint64_t scratch[16];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS);
        scratch[acc & 15] = acc;
        return acc + scratch[acc & 15];
}

SCEN_NOINLINE uint64_t thr_worker_mid(uint64_t x)
{
        uint64_t r = thr_worker_leaf(x);
        SCEN_KEEP(r);
        return r + 2;
}

SCEN_NOINLINE void *thr_worker(void *arg)
{
        uint64_t acc = (uintptr_t)arg;

        while (!scen_expired())
                acc = thr_worker_mid(acc);
        return (void *)(uintptr_t)acc;
}

int main(int argc, char **argv)
{
        pthread_t t;
        uint64_t acc = 5;
        void *ret;

        scen_init(argc, argv);
        if (pthread_create(&t, NULL, thr_worker, (void *)(uintptr_t)11) != 0) {
                perror("pthread_create");
                return 1;
        }
        while (!scen_expired())
                acc = thr_main_work(acc);
        pthread_join(t, &ret);
        printf("%llu\n", (unsigned long long)((acc ^ (uintptr_t)ret) & 1));
        return 0;
}
