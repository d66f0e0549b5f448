/* SPDX-License-Identifier: GPL-2.0-only */
/* A compiled frame's scope chain (daemon/runtimes/hotspot-scopes.h): scope descriptors as HotSpot's
 * DebugInformationRecorder writes them (CompressedWriteStream ints: sender offset, method index,
 * bci + 1), in both encodings (JDK <= 20, and UNSIGNED5 without 0 bytes from JDK 21), decoded
 * innermost first; malformed chains fail instead of naming a frame. */
#include <errno.h>
#include <linux/types.h>
#include <string.h>

#include "lib/test-util.h"
#include "runtimes/hotspot-method.h"
#include "runtimes/hotspot-scopes.h"

typedef struct Buf {
        uint8_t data[512];
        size_t len;
        uint32_t x; /* the encoding's excluded byte count: 0 (JDK <= 20) or 1 */
        uint64_t metadata[8];
        size_t n_metadata;
} Buf;

/* UNSIGNED5 as CompressedWriteStream::write_int writes it. */
static void put(Buf *b, uint32_t v)
{
        const uint32_t l = 256 - 64 - b->x;

        for (int i = 0; i < 4 && v >= l; i++) {
                b->data[b->len++] = (uint8_t)(b->x + l + (v - l) % 64);
                v = (v - l) / 64;
        }
        b->data[b->len++] = (uint8_t)(b->x + v);
}

/* A scope as describe_scope() writes it: its offset. */
static uint32_t scope(Buf *b, uint32_t sender, uint32_t method_index, int32_t bci)
{
        uint32_t off = (uint32_t)b->len;

        put(b, sender);
        put(b, method_index);
        put(b, (uint32_t)(bci + 1));
        put(b, 0); /* locals, expressions, monitors: none */
        put(b, 0);
        put(b, 0);
        return off;
}

static int rd_scopes(void *userdata, uint32_t off, uint8_t *buf, size_t n)
{
        const Buf *b = userdata;

        if (off >= b->len)
                return -EBADMSG;
        if (n > b->len - off)
                n = b->len - off;
        memcpy(buf, b->data + off, n);
        return (int)n;
}

static int rd_metadata(void *userdata, uint32_t index, uint64_t *ret)
{
        const Buf *b = userdata;

        if (index == 0 || index > b->n_metadata)
                return -EBADMSG;
        *ret = b->metadata[index - 1];
        return 0;
}

static void chains(uint32_t jdk)
{
        Buf b = {.x = jdk >= 21 ? 1 : 0,
                 .n_metadata = 4,
                 .metadata = {0x7f0000001000, 0x7f0000002000, 0x7f0000003000, 0x7f0000004004}};
        const HotspotScopesSource src = {.scopes = rd_scopes, .metadata = rd_metadata, .userdata = &b};
        HotspotScope got[HOTSPOT_SCOPES_MAX];
        uint32_t outer, mid, inner, entry, deep;
        size_t n = 0;
        int r;

        b.data[b.len++] = 0xff;           /* offset 0 is serialized_null: never a scope */
        outer = scope(&b, 0, 1, 300);     /* fromC, at its call of middle */
        mid = scope(&b, outer, 2, 70000); /* middle (bci > 16 bits: 3-byte ints) */
        inner = scope(&b, mid, 3, 5);     /* hot, where it runs */
        r = hotspot_scopes_decode(&src, inner, jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == 0 && n == 3 && got[0].method == 0x7f0000003000 && got[0].bci == 5 &&
                      got[1].method == 0x7f0000002000 && got[1].bci == 70000 &&
                      got[2].method == 0x7f0000001000 && got[2].bci == 300,
              "JDK %u: three scopes innermost first with their bcis (%d, %zu)", jdk, r, n);

        entry = scope(&b, outer, 2, -1); /* InvocationEntryBci: the method's entry */
        r = hotspot_scopes_decode(&src, entry, jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == 0 && n == 2 && got[0].bci == 0, "JDK %u: a method's entry has bci 0 (%d)", jdk, r);

        r = hotspot_scopes_decode(&src, inner, jdk, got, 2, &n);
        check(r == -E2BIG, "JDK %u: a chain deeper than the room is refused, not cut (%d)", jdk, r);

        r = hotspot_scopes_decode(&src, scope(&b, 0, 4, 1), jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == -EBADMSG, "JDK %u: a Method* that is not 8-byte aligned is refused (%d)", jdk, r);
        r = hotspot_scopes_decode(&src, scope(&b, 0, 5, 1), jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == -EBADMSG, "JDK %u: a method index past the table is refused (%d)", jdk, r);
        r = hotspot_scopes_decode(&src, scope(&b, 0, 0, 1), jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == -EBADMSG, "JDK %u: a scope without a method is refused (%d)", jdk, r);
        deep = scope(&b, (uint32_t)b.len + 1, 1, 1); /* a sender written after it: a loop */
        r = hotspot_scopes_decode(&src, deep, jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == -EBADMSG, "JDK %u: a sender that is not before its scope is refused (%d)", jdk, r);
        r = hotspot_scopes_decode(&src, (uint32_t)b.len + 10, jdk, got, HOTSPOT_SCOPES_MAX, &n);
        check(r == -EBADMSG, "JDK %u: a scope past the data is refused (%d)", jdk, r);
}

int main(void)
{
        static const uint8_t zero_free[] = {1, 0};
        uint32_t v = 7;

        chains(17);
        chains(21);
        /* The two encodings differ: 0 is byte 0 up to JDK 20, byte 1 from JDK 21. */
        check(hotspot_read_unsigned5(zero_free, 2, 21, &v) == 1 && v == 0, "JDK 21: byte 1 is 0");
        check(hotspot_read_unsigned5(zero_free, 2, 17, &v) == 1 && v == 1, "JDK 17: byte 1 is 1");
        check(hotspot_read_unsigned5(zero_free + 1, 1, 21, &v) == 0, "JDK 21: byte 0 is no int");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
