/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-method.h"

/* CompressedStream's UNSIGNED5 (hotspot/share/code/compressedStream.hpp, utilities/unsigned5.hpp):
 * each byte holds its value + X; a value below L ends an int; each further byte adds its value
 * << 6 * i; at most 5 bytes. Up to JDK 20 X = 0, L = 192; from JDK 21 the byte 0 is excluded
 * (X = 1, L = 191), so that a table never holds a 0 byte but its end. Returns the bytes used, 0
 * past the end. */
#define U5_LG_H 6u
#define U5_MAX_BYTES 5
#define U5_ZERO_FREE_FROM_JDK 21

static size_t read_unsigned5(const uint8_t *p, size_t size, uint32_t x, uint32_t *ret)
{
        const uint32_t l = 256 - 64 - x;
        uint32_t sum = 0;

        for (size_t i = 0; i < U5_MAX_BYTES; i++) {
                if (i >= size || p[i] < x)
                        return 0;
                sum += (uint32_t)(p[i] - x) << (U5_LG_H * i);
                if ((uint32_t)(p[i] - x) < l || i == U5_MAX_BYTES - 1) {
                        *ret = sum;
                        return i + 1;
                }
        }
        return 0;
}

size_t hotspot_read_unsigned5(const uint8_t *p, size_t size, uint32_t jdk_major, uint32_t *ret)
{
        return read_unsigned5(p, size, jdk_major >= U5_ZERO_FREE_FROM_JDK ? 1 : 0, ret);
}

static int32_t decode_sign(uint32_t v)
{
        return (int32_t)(v >> 1) ^ -(int32_t)(v & 1);
}

/* The length of the table at table, its end marker included; 0 when size bytes do not hold all of
 * it (an escaped pair's ints may hold 0 bytes: the end is found by walking the pairs). */
static size_t line_table_size(const uint8_t *table, size_t size, uint32_t x)
{
        size_t pos = 0;

        /* Bounded by size: every pair takes at least one byte. */
        while (pos < size) {
                uint32_t u;
                size_t n;

                if (table[pos] == 0)
                        return pos + 1;
                if (table[pos++] != 0xff)
                        continue;
                for (int k = 0; k < 2; k++) { /* bci delta, line delta */
                        n = read_unsigned5(table + pos, size - pos, x, &u);
                        if (n == 0)
                                return 0;
                        pos += n;
                }
        }
        return 0;
}

uint32_t hotspot_line_at(const uint8_t *table, size_t size, uint32_t bci, uint32_t jdk_major)
{
        uint32_t x = jdk_major >= U5_ZERO_FREE_FROM_JDK ? 1 : 0;
        int64_t cur_bci = 0, cur_line = 0;
        uint32_t best = 0;
        int64_t best_bci = -1;
        size_t pos = 0;

        /* Bounded by size: every pair takes at least one byte. */
        while (pos < size && table[pos] != 0) {
                uint8_t b = table[pos++];

                if (b != 0xff) {
                        cur_bci += b >> 3;
                        cur_line += b & 7;
                } else {
                        uint32_t u;
                        size_t n = read_unsigned5(table + pos, size - pos, x, &u);

                        if (n == 0)
                                break;
                        pos += n;
                        cur_bci += decode_sign(u);
                        n = read_unsigned5(table + pos, size - pos, x, &u);
                        if (n == 0)
                                break;
                        pos += n;
                        cur_line += decode_sign(u);
                }
                if (cur_bci == bci)
                        return cur_line > 0 && cur_line <= UINT32_MAX ? (uint32_t)cur_line : 0;
                /* The nearest entry before bci: what Method::line_number_from_bci() gives. */
                if (cur_bci < bci && cur_bci > best_bci) {
                        best_bci = cur_bci;
                        best = cur_line > 0 && cur_line <= UINT32_MAX ? (uint32_t)cur_line : 0;
                }
        }
        return best;
}

typedef struct Rd {
        HotspotReadFn fn;
        void *userdata;
} Rd;

static int rd(const Rd *r, uint64_t addr, void *buf, size_t n)
{
        if (addr < 4096)
                return -EFAULT;
        return r->fn(r->userdata, addr, buf, n);
}

static int rd_u64(const Rd *r, uint64_t addr, uint64_t *ret)
{
        *ret = 0;
        return rd(r, addr, ret, sizeof(*ret));
}

static int rd_u16(const Rd *r, uint64_t addr, uint16_t *ret)
{
        *ret = 0;
        return rd(r, addr, ret, sizeof(*ret));
}

/* A Symbol's text as Java writes a class name: '/' becomes '.'. */
static int rd_symbol(const Rd *r, const HotspotOffsets *o, uint64_t sym, bool dots,
                     char ret[HOTSPOT_NAME_MAX])
{
        uint16_t len;
        size_t n;
        int e;

        e = rd_u16(r, sym + o->symbol_length, &len);
        if (e < 0)
                return e;
        n = len < HOTSPOT_NAME_MAX - 1 ? len : HOTSPOT_NAME_MAX - 1;
        e = rd(r, sym + o->symbol_body, ret, n);
        if (e < 0)
                return e;
        ret[n] = 0;
        if (memchr(ret, 0, n))
                return -EBADMSG; /* modified UTF-8 never holds a NUL byte */
        if (dots)
                for (size_t i = 0; i < n; i++)
                        if (ret[i] == '/')
                                ret[i] = '.';
        return 0;
}

/* The Symbol* in Utf8 slot index of the constant pool cp of length cp_len. */
static int rd_cp_symbol(const Rd *r, const HotspotOffsets *o, uint64_t cp, uint16_t index, uint64_t *ret)
{
        int e;

        if (index == 0)
                return -EBADMSG;
        e = rd_u64(r, cp + o->constant_pool_sizeof + (uint64_t)index * 8, ret);
        if (e < 0)
                return e;
        return *ret ? 0 : -EBADMSG;
}

int hotspot_method_read(const HotspotOffsets *o, HotspotReadFn read_fn, void *userdata, uint64_t method,
                        uint32_t bci, HotspotMethodInfo *ret)
{
        const Rd r = {.fn = read_fn, .userdata = userdata};
        uint64_t cm, cp, holder, klass_name, methods, sym, in_class;
        uint16_t code_size, name_index, sig_index, idnum, file_index = 0;
        uint32_t flags = 0;
        int32_t n_methods;
        int e;

        memset(ret, 0, sizeof(*ret));
        if ((e = rd_u64(&r, method + o->method_const_method, &cm)) < 0 ||
            (e = rd_u64(&r, cm + o->const_method_constants, &cp)) < 0 ||
            (e = rd_u16(&r, cm + o->const_method_code_size, &code_size)) < 0 ||
            (e = rd_u16(&r, cm + o->const_method_name_index, &name_index)) < 0 ||
            (e = rd_u16(&r, cm + o->const_method_signature_index, &sig_index)) < 0 ||
            (e = rd_u16(&r, cm + o->const_method_method_idnum, &idnum)) < 0 ||
            (e = rd(&r, cm + o->const_method_flags, &flags, o->const_method_flags_size)) < 0 ||
            (e = rd_u64(&r, cp + o->constant_pool_pool_holder, &holder)) < 0)
                return e;

        /* The method must be its class's: InstanceKlass::_methods[idnum] (methods are sorted by
         * name, and idnum is the index it was given; redefinition and overpass methods can move
         * it, so any slot holding it counts). */
        if ((e = rd_u64(&r, holder + o->instance_klass_methods, &methods)) < 0 ||
            (e = rd(&r, methods + o->array_length, &n_methods, sizeof(n_methods))) < 0)
                return e;
        if (n_methods <= 0 || n_methods > 65536)
                return -EBADMSG;
        in_class = 0;
        if (idnum < n_methods)
                (void)rd_u64(&r, methods + o->array_methods_data + (uint64_t)idnum * 8, &in_class);
        if (in_class != method) {
                /* Bounded by the 65536 methods a class file can declare. */
                for (int32_t i = 0; i < n_methods && in_class != method; i++)
                        if (rd_u64(&r, methods + o->array_methods_data + (uint64_t)i * 8, &in_class) < 0)
                                break;
                if (in_class != method)
                        return -ESTALE;
        }

        if ((e = rd_u64(&r, holder + o->klass_name, &klass_name)) < 0 ||
            (e = rd_symbol(&r, o, klass_name, true, ret->klass)) < 0)
                return e;
        if ((e = rd_cp_symbol(&r, o, cp, name_index, &sym)) < 0 ||
            (e = rd_symbol(&r, o, sym, false, ret->name)) < 0)
                return e;
        if ((e = rd_cp_symbol(&r, o, cp, sig_index, &sym)) < 0 ||
            (e = rd_symbol(&r, o, sym, false, ret->signature)) < 0)
                return e;
        /* The source file's constant pool index: in the constant pool from JDK 12, in the class
         * before. */
        if (((o->constant_pool_source_file_name_index != HOTSPOT_OFFSET_NONE &&
              rd_u16(&r, cp + o->constant_pool_source_file_name_index, &file_index) == 0) ||
             (o->instance_klass_source_file_name_index != HOTSPOT_OFFSET_NONE &&
              rd_u16(&r, holder + o->instance_klass_source_file_name_index, &file_index) == 0)) &&
            file_index && rd_cp_symbol(&r, o, cp, file_index, &sym) == 0)
                (void)rd_symbol(&r, o, sym, false, ret->file);
        ret->code_size = code_size;

        /* The compressed line number table follows the bytecodes. */
        if ((flags & o->const_method_has_linenumber_table) && bci < code_size) {
                uint64_t table = cm + o->const_method_sizeof + code_size;
                _cleanup_free_ uint8_t *buf = NULL;
                size_t want = 256;

                /* Read more until the table's end (a 0 byte) is in the buffer, up to the bound. */
                for (;;) {
                        uint8_t *nb = realloc(buf, want);

                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        if (rd(&r, table, buf, want) < 0) {
                                /* The end of the readable memory: take what a smaller read gives. */
                                if (want == 256)
                                        break;
                                want /= 2;
                                if (rd(&r, table, buf, want) < 0)
                                        break;
                                ret->line = hotspot_line_at(buf, want, bci, o->jdk_major);
                                break;
                        }
                        if (line_table_size(buf, want, o->jdk_major >= U5_ZERO_FREE_FROM_JDK ? 1 : 0) > 0 ||
                            want >= HOTSPOT_LINE_TABLE_MAX) {
                                ret->line = hotspot_line_at(buf, want, bci, o->jdk_major);
                                break;
                        }
                        want *= 2;
                }
        }
        return 0;
}
