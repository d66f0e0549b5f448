/* SPDX-License-Identifier: GPL-2.0-only */
/* The frames of the last result and the strings they hold: kept until the next call, which keeps
 * the symbolizer's memory bounded however many addresses it resolves. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/demangle.h"
#include "symbolizer/result-frames.h"

void result_frames_clear(ResultFrames *r)
{
        for (size_t i = 0; i < r->n_strings; i++)
                free(r->strings[i]);
        r->n_strings = 0;
}

/* Keeps a string alive until the next call. */
const char *result_frames_keep(ResultFrames *r, char *str)
{
        if (!str)
                return NULL;
        if (r->n_strings >= ELEMENTSOF(r->strings)) {
                free(str);
                return NULL;
        }
        r->strings[r->n_strings++] = str;
        return str;
}

const char *result_frames_keep_printf(ResultFrames *r, const char *fmt, ...)
{
        va_list ap;
        char *str;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&str, fmt, ap);
        va_end(ap);
        return k < 0 ? NULL : result_frames_keep(r, str);
}

static const char *demangle(ResultFrames *r, const char *mangled)
{
        char *d = demangle_symbol(mangled);

        return d ? (result_frames_keep(r, d) ?: mangled) : mangled;
}

void result_frames_set(ResultFrames *r, SymFrame *f, const char *mangled, const char *file, int line,
                       int start_line)
{
        const char *at = strchr(mangled, '@');

        /* Versioned symbols ("__libc_start_main@@GLIBC_2.34", "memcpy@GLIBC_2.2.5" in a .symtab)
         * lose the version in both names: it is how the linker spelled a .symver alias, not part
         * of the function's name (.dynsym keeps versions apart, in .gnu.version). Aliases at one
         * address differ only in it, so it would also split one function in two across hosts.
         * Our own "func@plt" labels stay whole. */
        bool plt = at && strcmp(at, "@plt") == 0;

        if (at && at > mangled && !plt)
                mangled = result_frames_keep(r, strndup(mangled, (size_t)(at - mangled))) ?: mangled;
        f->name = demangle(r, mangled);
        /* A C++ function's PLT stub reads "std::foo(int)@plt", as gdb and perf show it. */
        if (plt && at > mangled && strncmp(mangled, "_Z", 2) == 0) {
                const char *fn = result_frames_keep(r, strndup(mangled, (size_t)(at - mangled)));
                const char *d = fn ? demangle(r, fn) : NULL;
                if (d && d != fn)
                        f->name = result_frames_keep_printf(r, "%s@plt", d) ?: mangled;
        }
        f->system_name = mangled;
        f->file = file;
        f->line = line;
        f->start_line = start_line;
}

void result_frames_unknown(ResultFrames *r, const char *name, SymResult *ret)
{
        r->frames[0] = (SymFrame){.name = name ?: "[unknown]", .system_name = name ?: "[unknown]"};
        *ret = (SymResult){.frames = r->frames, .n_frames = 1, .symbolized = false};
}
