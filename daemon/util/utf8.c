/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

size_t utf8_char_len(const char *str, size_t len)
{
        const unsigned char *p = (const unsigned char *)str;
        unsigned char c;
        size_t n;

        if (len == 0)
                return 0;
        c = p[0];
        n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (n == 0 || n > len || c < 0x20 || c == 0x7f || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
                return 0;
        for (size_t k = 1; k < n; k++)
                if ((p[k] & 0xc0) != 0x80)
                        return 0;
        /* Overlong 3/4-byte forms, UTF-16 surrogates and code points past U+10FFFF. */
        if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
                return 0;
        if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
                return 0;
        return n;
}

int utf8_escape(const char *s, char **ret)
{
        size_t len = strlen(s), i = 0, n;
        char *out, *w;

        while (i < len && (n = utf8_char_len(s + i, len - i)) > 0)
                i += n;
        if (i == len) {
                *ret = NULL;
                return 0;
        }
        w = out = malloc(len * 4 + 1);
        if (!out)
                return -ENOMEM;
        memcpy(w, s, i);
        w += i;
        while (i < len) {
                n = utf8_char_len(s + i, len - i);
                if (n > 0) {
                        memcpy(w, s + i, n);
                        w += n;
                        i += n;
                } else
                        w += sprintf(w, "\\x%02x", (unsigned char)s[i++]);
        }
        *w = 0;
        *ret = out;
        return 0;
}
