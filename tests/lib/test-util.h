/* SPDX-License-Identifier: GPL-2.0-only */
/* Assertions shared by the C unit tests. Each test is one program, so the counter is per test;
 * main() reports it and exits non-zero when it is not 0. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The number after `line` in a metrics text; ~0 when the line is not there. */
static inline unsigned long long metric_value_in(const char *text, const char *line)
{
        const char *at = text ? strstr(text, line) : NULL;

        return at ? strtoull(at + strlen(line), NULL, 10) : ~0ULL;
}

/* The number after `line` in what write(obj, FILE *) prints: the metrics of one component. */
#define METRIC_VALUE(write, obj, line)                                                                      \
        ({                                                                                                  \
                char *text_ = NULL;                                                                         \
                size_t size_ = 0;                                                                           \
                unsigned long long v_ = ~0ULL;                                                              \
                FILE *f_ = open_memstream(&text_, &size_);                                                  \
                if (f_) {                                                                                   \
                        write(obj, f_);                                                                     \
                        fclose(f_);                                                                         \
                        v_ = metric_value_in(text_, line);                                                  \
                }                                                                                           \
                free(text_);                                                                                \
                v_;                                                                                         \
        })
