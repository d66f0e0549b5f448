/* SPDX-License-Identifier: GPL-2.0-only */
/* Assertions shared by the C unit tests. Each test is one program, so the counter is per test;
 * main() reports it and exits non-zero when it is not 0. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static unsigned failures;

/* Prints every check ("ok" or "FAIL"), for tests whose log should show what was covered.
 * Returns cond so a test can skip what depends on a failed step. */
__attribute__((format(printf, 2, 3))) static inline bool check(bool cond, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        printf("%s ", cond ? "ok  " : "FAIL");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        if (!cond)
                failures++;
        return cond;
}

/* Prints only failures, with file and line: the message when one is given, else the condition.
 * (__VA_OPT__ picks between the two at compile time, so the message keeps printf checking.) */
#define CHECK(cond, ...)                                                                                    \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        failures++;                                                                         \
                        printf("FAIL %s:%d: ", __FILE__, __LINE__);                                         \
                        __VA_OPT__(printf(__VA_ARGS__); if (0))                                             \
                        printf("check failed: %s", #cond);                                                  \
                        printf("\n");                                                                       \
                }                                                                                           \
        } while (0)
