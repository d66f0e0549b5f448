/* SPDX-License-Identifier: GPL-2.0-only */
#include <stdarg.h>
#include <stdio.h>

#include "cfi-error.h"

int cfi_fail(CfiError *e, int r, const char *fmt, ...)
{
        if (e->r == 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
                va_end(ap);
                e->r = r;
        }
        return r;
}
