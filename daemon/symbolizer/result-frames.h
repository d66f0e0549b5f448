/* SPDX-License-Identifier: GPL-2.0-only */
/* The frames of the last symbolizer result and the strings they point to, which live until the
 * next call. */
#pragma once

#include <stddef.h>

#include "symbolizer/symbolizer.h"
#include "util/macro.h"

/* Inline depth reported per address; deeper chains keep the innermost frames and the outer
 * function (real code rarely exceeds ~20). */
#define SYMBOLIZER_MAX_INLINE 64

typedef struct ResultFrames {
        SymFrame frames[SYMBOLIZER_MAX_INLINE + 1];
        char *strings[4 * (SYMBOLIZER_MAX_INLINE + 1)];
        size_t n_strings;
} ResultFrames;

/* Frees the strings of the last result. */
void result_frames_clear(ResultFrames *r);
/* Keeps a string alive until the next call; NULL (str freed) when there is no room. */
const char *result_frames_keep(ResultFrames *r, char *str);
const char *result_frames_keep_printf(ResultFrames *r, const char *fmt, ...) _printf_(2, 3);
/* Fills f for the symbol mangled: its name without a symbol version, demangled. */
void result_frames_set(ResultFrames *r, SymFrame *f, const char *mangled, const char *file, int line,
                       int start_line);
/* One placeholder frame, not symbolized. */
void result_frames_unknown(ResultFrames *r, const char *name, SymResult *ret);
