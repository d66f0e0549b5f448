/* SPDX-License-Identifier: GPL-2.0-only */
/* The small building blocks behind profd's bounds and valid text: UTF-8 escaping of names that
 * are arbitrary bytes, and the interned-string pool that shares mapping paths. */
#include <stdlib.h>
#include <string.h>

#include "util/string-pool.h"
#include "util/utf8.h"

#include "lib/test-util.h"

static void expect_escape(const char *in, const char *want)
{
        char *out = NULL;
        int r = utf8_escape(in, &out);
        check(r == 0 && (want ? out && strcmp(out, want) == 0 : !out), "utf8_escape(%s) -> %s (got %s)",
              want ? want : in, want ? want : "unchanged", out ? out : "unchanged");
        free(out);
}

int main(void)
{
        /* Valid UTF-8 passes unchanged: ASCII, 2-, 3- and 4-byte characters. */
        expect_escape("main", NULL);
        expect_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5", NULL);
        /* Bad bytes, each written \xNN; the valid rest stays. */
        expect_escape("bad\xff\x80\x01;name", "bad\\xff\\x80\\x01;name");
        expect_escape("\xc0\xaf", "\\xc0\\xaf");                   /* overlong '/' */
        expect_escape("\xe0\x80\xaf", "\\xe0\\x80\\xaf");          /* overlong 3-byte */
        expect_escape("\xed\xa0\x80", "\\xed\\xa0\\x80");          /* UTF-16 surrogate */
        expect_escape("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
        expect_escape("x\xe2\x82", "x\\xe2\\x82");                 /* cut short at the end */
        expect_escape("\x7f", "\\x7f");
        check(utf8_char_len("\xe2\x82\xac", 3) == 3 && utf8_char_len("\xe2\x82\xac", 2) == 0,
              "utf8_char_len: a character needs all its bytes");

        StringPool *p = NULL;
        if (!check(string_pool_new(&p) == 0, "string pool created"))
                return 1;
        const char *a = string_pool_ref(p, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        const char *b = string_pool_ref(p, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        const char *c = string_pool_ref(p, "/usr/bin/python3");
        check(a && a == b && c && c != a && string_pool_count(p) == 2, "equal strings share one copy");
        /* Enough distinct strings to grow the bucket array several times. */
        char buf[64];
        const char *many[5000];
        for (int i = 0; i < 5000; i++) {
                snprintf(buf, sizeof(buf), "/lib/%d.so", i);
                many[i] = string_pool_ref(p, buf);
        }
        check(string_pool_count(p) == 5002, "5000 more distinct strings: %zu", string_pool_count(p));
        snprintf(buf, sizeof(buf), "/lib/%d.so", 4321);
        check(string_pool_ref(p, buf) == many[4321], "found again after growing");
        string_pool_unref(p, many[4321]);
        for (int i = 0; i < 5000; i++)
                string_pool_unref(p, many[i]);
        string_pool_unref(p, a);
        check(string_pool_count(p) == 2 && strcmp(b, "/usr/lib/x86_64-linux-gnu/libc.so.6") == 0,
              "a string lives until its last reference goes");
        string_pool_unref(p, b);
        string_pool_unref(p, c);
        string_pool_unref(p, NULL);
        check(string_pool_count(p) == 0, "empty after every reference went");
        string_pool_free(p);

        if (failures) {
                fprintf(stderr, "%u check(s) failed\n", failures);
                return 1;
        }
        return 0;
}
