/* SPDX-License-Identifier: GPL-2.0-only */
/* Internal: the first error of a table build, with its message (the parser and the builder both
 * report through it). */
#pragma once

typedef struct CfiError {
        int r; /* first error wins */
        char msg[256];
} CfiError;

int cfi_fail(CfiError *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
