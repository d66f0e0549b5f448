/* SPDX-License-Identifier: GPL-2.0-only */
/* Symbol names demangled: C++ through libstdc++'s demangler, Rust legacy names tidied after it. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/demangle.h"
#include "util/macro.h"

/* Itanium C++ ABI demangler from libstdc++ (also handles Rust's legacy mangling). elfutils has
 * none of its own. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* Rust's legacy mangling rides on Itanium's: after __cxa_demangle, names still carry "$LT$"
 * style escapes and a "::h<16 hex>" hash. Tidy both like rustc-demangle does. */
static char *rust_legacy_cleanup(char *d)
{
        static const struct {
                const char *esc, *rep;
        } escapes[] = {
                {"$SP$", "@"},  {"$BP$", "*"},  {"$RF$", "&"},   {"$LT$", "<"},  {"$GT$", ">"},
                {"$LP$", "("},  {"$RP$", ")"},  {"$C$", ","},    {"$u7e$", "~"}, {"$u20$", " "},
                {"$u27$", "'"}, {"$u5b$", "["}, {"$u5d$", "]"},  {"$u7b$", "{"}, {"$u7d$", "}"},
                {"$u3b$", ";"}, {"$u2b$", "+"}, {"$u22$", "\""},
        };
        size_t len = strlen(d), w = 0;
        bool rust = len > 19 && strncmp(d + len - 19, "::h", 3) == 0 &&
                    strspn(d + len - 16, "0123456789abcdef") == 16;

        if (!rust)
                return d;
        d[len - 19] = 0;
        for (size_t r = 0; d[r];) {
                bool done = false;
                /* Components that start with an escape carry a '_' in front of it. */
                if (d[r] == '_' && d[r + 1] == '$' &&
                    (r == 0 || (r >= 2 && d[r - 1] == ':' && d[r - 2] == ':'))) {
                        r++;
                        continue;
                }
                if (d[r] == '$')
                        for (size_t i = 0; i < ELEMENTSOF(escapes); i++) {
                                size_t el = strlen(escapes[i].esc);
                                if (strncmp(d + r, escapes[i].esc, el) == 0) {
                                        d[w++] = escapes[i].rep[0];
                                        r += el;
                                        done = true;
                                        break;
                                }
                        }
                else if (d[r] == '.' && d[r + 1] == '.') {
                        d[w++] = ':';
                        d[w++] = ':';
                        r += 2;
                        done = true;
                }
                if (!done)
                        d[w++] = d[r++];
        }
        d[w] = 0;
        return d;
}

char *demangle_symbol(const char *mangled)
{
        char *d;
        int status = 0;

        if (strncmp(mangled, "_Z", 2) != 0)
                return NULL;
        d = __cxa_demangle(mangled, NULL, NULL, &status);
        if (!d || status != 0) {
                free(d);
                return NULL;
        }
        return rust_legacy_cleanup(d);
}
