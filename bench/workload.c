/* SPDX-License-Identifier: GPL-2.0-only */
/* CPU-bound workload for the overhead benchmark (bench-overhead.py): descends DEPTH frames, then
 * burns CPU in the deepest one until SECONDS have passed, and prints how much work it did per
 * second of its own CPU time and per second of wall time. Built -O2 -fomit-frame-pointer, so a
 * profiler has to unwind it with DWARF CFI.
 * Usage: bench-workload SECONDS DEPTH
 * User stack seen by a sampler: bench_leaf, bench_descend x DEPTH, bench_start, main,
 * __libc_start_call_main, __libc_start_main, _start = DEPTH + 6 frames. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NOINLINE __attribute__((noinline, noclone))
#define BENCH_KEEP(x) __asm__ volatile("" : "+r"(x))
/* Work units between clock reads: ~0.1 ms, so the clock is a negligible share of the time. */
#define BENCH_UNIT_ITERATIONS 50000u
#define BENCH_MAX_DEPTH 4096

static double wall_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
               (double)ru.ru_stime.tv_usec / 1e6;
}

static double deadline;
static uint64_t units;

BENCH_NOINLINE uint64_t bench_leaf(uint64_t acc)
{
        while (wall_now() < deadline) {
                for (uint32_t i = 0; i < BENCH_UNIT_ITERATIONS; i++) {
                        acc = acc * 6364136223846793005ull + 1442695040888963407ull;
                        acc ^= acc >> 29;
                        BENCH_KEEP(acc);
                }
                units++;
        }
        return acc;
}

BENCH_NOINLINE uint64_t bench_descend(unsigned depth, uint64_t x)
{
        uint64_t r = depth <= 1 ? bench_leaf(x) : bench_descend(depth - 1, x + depth);
        BENCH_KEEP(r);
        return r + depth;
}

BENCH_NOINLINE uint64_t bench_start(unsigned depth, uint64_t x)
{
        uint64_t r = depth == 0 ? bench_leaf(x) : bench_descend(depth, x);
        BENCH_KEEP(r);
        return r;
}

int main(int argc, char **argv)
{
        double seconds, wall0, cpu0, wall, cpu;
        unsigned depth;
        uint64_t r;

        if (argc < 3) {
                fprintf(stderr, "usage: %s SECONDS DEPTH\n", argv[0]);
                return 2;
        }
        seconds = atof(argv[1]);
        depth = (unsigned)atoi(argv[2]);
        if (seconds <= 0 || seconds > 3600 || depth > BENCH_MAX_DEPTH) {
                fprintf(stderr, "SECONDS must be in (0, 3600], DEPTH at most %d\n", BENCH_MAX_DEPTH);
                return 2;
        }
        wall0 = wall_now();
        cpu0 = cpu_now();
        deadline = wall0 + seconds;
        r = bench_start(depth, 1);
        wall = wall_now() - wall0;
        cpu = cpu_now() - cpu0;
        printf("units %llu wall %.6f cpu %.6f per_cpu_second %.3f per_wall_second %.3f check %llu\n",
               (unsigned long long)units, wall, cpu, (double)units / cpu, (double)units / wall,
               (unsigned long long)(r & 1));
        return 0;
}
