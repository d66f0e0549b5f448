/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <stdint.h>
#include <time.h>

#include "util/macro.h"

/* Nanoseconds on clock. The clock is the caller's choice because both are in use: CLOCK_MONOTONIC
 * for deadlines and step budgets (immune to clock steps), CLOCK_REALTIME where times are compared
 * with other wall-clock timestamps (a process' exit time). */
static inline uint64_t now_ns(clockid_t clock)
{
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Microseconds on clock: what sd-event timers take. */
static inline uint64_t now_usec(clockid_t clock)
{
        return now_ns(clock) / NSEC_PER_USEC;
}
