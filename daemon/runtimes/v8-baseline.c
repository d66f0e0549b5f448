/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <string.h>

#include "runtimes/v8-baseline.h"
#include "runtimes/v8-lines.h"

/* Bytecodes a V8 build has, at least (about 180 since V8 7; 198 in 10.2 and 11.3, 208 in 13.6): a
 * shorter table of the shape is taken for something else. */
#define V8_BYTECODES_MIN 128
/* The longest bytecode, operands scaled by four included (13.6: 21 bytes). */
#define V8_BYTECODE_LEN_MAX 64
/* The prefix bytecodes (Wide, ExtraWide, DebugBreakWide, DebugBreakExtraWide) come first in every
 * V8's list, then DebugBreak0: 1 byte long at every scale. */
#define V8_PREFIX_BYTECODES 4
#define V8_LEADING_ONES 5

bool v8_bytecode_sizes_plausible(const uint8_t *t, size_t count)
{
        size_t scaling = 0;

        if (count < V8_BYTECODES_MIN || count > V8_BYTECODES_MAX)
                return false;
        for (size_t row = 0; row < 3; row++)
                for (size_t k = 0; k < V8_LEADING_ONES; k++)
                        if (t[row * count + k] != 1)
                                return false;
        for (size_t i = 0; i < count; i++) {
                unsigned a = t[i], b = t[count + i], c = t[2 * count + i];

                if (a < 1 || b < a || c < b || c > V8_BYTECODE_LEN_MAX || c - b != 2 * (b - a))
                        return false;
                scaling += b > a;
        }
        /* most bytecodes have an operand that scales (a register, an index, an immediate) */
        return scaling >= count / 2;
}

static void sizes_set(const uint8_t *t, size_t count, V8BytecodeSizes *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->count = (uint16_t)count;
        for (size_t row = 0; row < 3; row++)
                memcpy(ret->size[row], t + row * count, count);
}

int v8_bytecode_sizes_from_symbol(const uint8_t *bytes, size_t size, V8BytecodeSizes *ret)
{
        if (size % 3 || !v8_bytecode_sizes_plausible(bytes, size / 3))
                return -ENOENT;
        sizes_set(bytes, size / 3, ret);
        return 0;
}

int v8_bytecode_sizes_find(const uint8_t *data, size_t n, V8BytecodeSizes *ret)
{
        static const uint8_t ones[V8_LEADING_ONES] = {1, 1, 1, 1, 1};
        const uint8_t *hit = NULL;
        size_t hit_count = 0;

        /* Each table starts with five 1 in each row: only such places are looked at, each with every
         * count possible (bounded by V8_BYTECODES_MAX - V8_BYTECODES_MIN). */
        for (const uint8_t *p = data; p + 3 * V8_BYTECODES_MIN <= data + n; p++) {
                p = memmem(p, (size_t)(data + n - p), ones, sizeof(ones));
                if (!p)
                        break;
                for (size_t count = V8_BYTECODES_MIN; count <= V8_BYTECODES_MAX; count++) {
                        if (p + 3 * count > data + n)
                                break;
                        if (memcmp(p + count, ones, sizeof(ones)) != 0 ||
                            memcmp(p + 2 * count, ones, sizeof(ones)) != 0 ||
                            !v8_bytecode_sizes_plausible(p, count))
                                continue;
                        if (hit)
                                return -ENOTUNIQ; /* two places fit: neither is trusted */
                        hit = p;
                        hit_count = count;
                }
        }
        if (!hit)
                return -ENOENT;
        sizes_set(hit, hit_count, ret);
        return 0;
}

int v8_baseline_bytecode_offset(const V8BytecodeSizes *s, const uint8_t *table, size_t n,
                                const uint8_t *bytecodes, size_t len, uint32_t pc_offset,
                                bool return_address, int32_t *ret)
{
        /* An interrupted pc runs the instruction at it, which belongs to the bytecode whose code
         * range [start, end) holds it; a return address ends a call, and belongs to the bytecode
         * whose range (start, end] holds it (V8's own rule, BytecodeOffsetIterator). */
        uint64_t target = (uint64_t)pc_offset + (return_address ? 0 : 1), end, d;
        size_t ti = 0, pos = 0;
        bool found = false;
        int r;

        if (s->count == 0)
                return -EOPNOTSUPP;
        r = v8_vlq_read(table, n, &ti, &end); /* the prologue */
        if (r < 0)
                return r;
        if (target <= end) {
                *ret = V8_BASELINE_FUNCTION_ENTRY;
                found = true;
        }
        /* Bounded by len: each step takes at least one byte of bytecode. The whole table is walked
         * even after the pc's bytecode: that both end together is what checks the lengths. */
        while (pos < len) {
                size_t at = pos, size;
                unsigned scale = 0;
                uint8_t b = bytecodes[pos];

                if (b < V8_PREFIX_BYTECODES) {
                        scale = (b & 1) ? 2 : 1; /* ExtraWide and its debug break: by four */
                        if (++pos >= len)
                                return -EBADMSG;
                        b = bytecodes[pos];
                        if (b < V8_PREFIX_BYTECODES)
                                return -EBADMSG;
                }
                if (b >= s->count || (size = s->size[scale][b]) == 0)
                        return -EBADMSG;
                pos += size;
                if (pos > len)
                        return -EBADMSG;
                r = v8_vlq_read(table, n, &ti, &d);
                if (r < 0)
                        return r;
                end += d;
                if (!found && target <= end) {
                        *ret = (int32_t)at;
                        found = true;
                }
        }
        if (ti != n)
                return -EBADMSG;
        return found ? 0 : -ERANGE;
}
