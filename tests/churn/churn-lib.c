/* SPDX-License-Identifier: GPL-2.0-only */
/* The library tests/churn/churn.c maps over and over (storm copies, dlopen loop). */
#include <time.h>

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) double churn_lib_spin(double seconds)
{
        double end = now_s() + seconds, x = 0;
        while (now_s() < end)
                for (int i = 0; i < 100000; i++)
                        x += i * 0.5;
        return x;
}
