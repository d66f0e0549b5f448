/* SPDX-License-Identifier: GPL-2.0-only */
/* Shared by the unwinding scenario programs. Each program burns CPU in a known leaf under a known
 * call chain for a bounded time (argv[1], seconds). The programs are built with -O2
 * -fomit-frame-pointer, so the chains survive only because of the attributes and barriers below:
 * SCEN_NOINLINE keeps every function a real frame (gcc's noipa also stops cloning into .constprop
 * copies and interprocedural shortcuts), and SCEN_KEEP after a call makes the call a non-tail call,
 * so -O2 cannot turn it into a jump that drops the caller's frame. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__clang__)
#define SCEN_NOINLINE __attribute__((noinline, used))
#else
#define SCEN_NOINLINE __attribute__((noipa, used))
#endif
#define SCEN_EXPORT __attribute__((visibility("default")))

/* Makes the compiler believe x is read and rewritten here: no folding across it, no tail call. */
#define SCEN_KEEP(x) __asm__ volatile("" : "+r"(x))
#define SCEN_BARRIER() __asm__ volatile("" ::: "memory")

/* Iterations between clock reads: 1-2 ms of work, so time spent reading the clock (vDSO) or in the
 * callers between two slices is a few parts per million of the samples. */
#define SCEN_SLICE_ITERATIONS (1u << 20)

static inline double scen_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double scen_deadline __attribute__((unused));

/* With SCEN_WAIT_GO=1 in the environment, waits for a line on stdin: the test first waits until the
 * profiler has this process's unwind tables in place, then says go (EOF: exit 3, never burn). */
static inline void scen_wait_go(void)
{
        const char *w = getenv("SCEN_WAIT_GO");
        char line[16];

        if (w && w[0] == '1' && !fgets(line, sizeof(line), stdin))
                exit(3);
}

/* argv[1]: how long to burn, in seconds (default 5, at most 600 so nothing runs unbounded), from
 * the go (see scen_wait_go()). */
static inline void scen_init(int argc, char **argv)
{
        double secs = argc > 1 ? atof(argv[1]) : 5.0;
        if (secs <= 0 || secs > 600)
                secs = 5.0;
        scen_wait_go();
        scen_deadline = scen_now() + secs;
}

static inline int scen_expired(void)
{
        return scen_now() >= scen_deadline;
}

/* The CPU-burning body every leaf runs: a multiply-xorshift chain the compiler cannot collapse. */
#define SCEN_BURN(acc, n)                                                                                   \
        do {                                                                                                \
                for (uint32_t _i = 0; _i < (n); _i++) {                                                     \
                        (acc) = (acc)*6364136223846793005ull + 1442695040888963407ull;                      \
                        (acc) ^= (acc) >> 29;                                                               \
                        SCEN_KEEP(acc);                                                                     \
                }                                                                                           \
        } while (0)
