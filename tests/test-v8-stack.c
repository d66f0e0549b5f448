/* SPDX-License-Identifier: GPL-2.0-only */
/* The drain's V8 splice (daemon/runtimes/v8-stack.h): each V8 entry BPF put after its frame's pc
 * entry takes that entry's place, the pc kept after it for the naming; native frames and named
 * entries are kept as they are. Source positions of optimized code and inlining chains too. */
#include <linux/types.h>
#include <errno.h>
#include <string.h>

#include "lib/test-util.h"
#include "runtimes/v8-baseline.h"
#include "runtimes/v8-lines.h"
#include "runtimes/v8-stack.h"
#include "symbolizer/v8-chains.h"

#define V8(fn) (PROFD_FRAME_V8 | (fn))
/* The pc entry the splice keeps after a function's (exact: the leaf's, frame 0 here). */
#define PC(pc) (PROFD_FRAME_V8 | V8_FRAME_PC | (pc))
#define PC_LEAF(pc) (PC(pc) | V8_FRAME_PC_EXACT)

static void expect(const char *what, const uint64_t *in, size_t n, const uint64_t *want, size_t n_want,
                   size_t want_v8)
{
        uint64_t frames[16];
        uint8_t exact[16];
        size_t v8 = 0, len;

        memcpy(frames, in, n * sizeof(*in));
        for (size_t i = 0; i < n; i++)
                exact[i] = i == 0;
        len = v8_stack_splice(frames, exact, n, &v8);
        check(len == n_want && memcmp(frames, want, n_want * sizeof(*want)) == 0 && v8 == want_v8,
              "%s: %zu frames (%zu), %zu V8 entries (%zu)", what, len, n_want, v8, want_v8);
}

/* V8's encoding (src/codegen/source-position-table.cc): zigzag, 7 bits a byte, low bits first. */
static size_t put_varint(uint8_t *b, int64_t v)
{
        uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
        size_t n = 0;

        do {
                b[n] = z & 0x7f;
                z >>= 7;
                if (z)
                        b[n] |= 0x80;
                n++;
        } while (z);
        return n;
}

/* An entry as V8 writes it: deltas from the previous entry; an expression's code delta as
 * -delta - 1; the source position's script offset + 1 at bit 1, its inlining id + 1 at bit 31. */
static size_t put_entry(uint8_t *b, int64_t code_delta, bool statement, int64_t script_offset,
                        int inlining_id, int64_t *prev_source)
{
        int64_t source = (script_offset + 1) << 1 | (int64_t)(inlining_id + 1) << 31;
        size_t n = put_varint(b, statement ? code_delta : -code_delta - 1);

        n += put_varint(b + n, source - *prev_source);
        *prev_source = source;
        return n;
}

static void check_positions(void)
{
        uint8_t b[64];
        int64_t prev = 0;
        size_t n = 0;
        uint32_t codes[8];
        int32_t sources[8];
        int got;

        n += put_entry(b + n, 0, true, 40, -1, &prev);   /* offset 0: 40 */
        n += put_entry(b + n, 5, false, 300, -1, &prev); /* offset 5: 300 */
        n += put_entry(b + n, 200, true, 12, -1, &prev); /* offset 205: 12 (back, a long delta) */
        n += put_entry(b + n, 1, true, 70000, 2, &prev); /* offset 206: 70000, inlined */
        got = v8_positions_decode(b, n, codes, sources, 8);
        check(got == 4 && codes[0] == 0 && sources[0] == 40 && codes[1] == 5 && sources[1] == 300 &&
                      codes[2] == 205 && sources[2] == 12 && codes[3] == 206 && sources[3] == 70000,
              "source position table decoded (%d entries)", got);
        check(v8_positions_decode(b, n - 1, codes, sources, 8) == -EBADMSG, "a cut table is refused");

        /* optimized code: the last position at or before a code offset, with its inlining id */
        int64_t pos = 0;
        check(v8_positions_at(b, n, 4, &pos) == 0 && ((pos >> 1) & ((1LL << 30) - 1)) - 1 == 40,
              "a code offset takes the last position at or before it");
        check(v8_positions_at(b, n, 1000, &pos) == 0 && ((pos >> 1) & ((1LL << 30) - 1)) - 1 == 70000 &&
                      (pos >> 31) - 1 == 2,
              "a position keeps its inlining id");
        check(v8_positions_at(b + 0, 0, 5, &pos) == -ENODATA, "no position in an empty table");
        check(v8_positions_at(b, n - 1, 1000, &pos) == -EBADMSG, "a cut table is refused at its end");

        V8LineEntry e[] = {{0, 3}, {5, 4}, {205, 9}};
        V8LineTable t = {.entries = e, .n = 3};
        check(v8_line_table_find(&t, 0) == 3 && v8_line_table_find(&t, 4) == 3 &&
                      v8_line_table_find(&t, 5) == 4 && v8_line_table_find(&t, 1000) == 9,
              "a bytecode offset takes the line of the last position at or before it");
}

/* Baseline frames (runtimes/v8-baseline.h): the bytecode offset table walked alongside the
 * bytecodes, with a made-up length table of kBytecodeSizes' shape. */
static void check_baseline(void)
{
        enum { N = 160 };
        uint8_t t[3 * N];
        V8BytecodeSizes s = {};
        int32_t off = 0;

        /* bytecodes 0-4 one byte (prefixes, DebugBreak0); the rest one opcode byte plus one
         * operand that scales (2, 3, 5 bytes) */
        for (size_t i = 0; i < N; i++) {
                t[i] = i < 5 ? 1 : 2;
                t[N + i] = i < 5 ? 1 : 3;
                t[2 * N + i] = i < 5 ? 1 : 5;
        }
        check(v8_bytecode_sizes_plausible(t, N), "a table of kBytecodeSizes' shape is taken");
        check(!v8_bytecode_sizes_plausible(t, 100), "a table of too few bytecodes is not");
        check(v8_bytecode_sizes_from_symbol(t, sizeof(t), &s) == 0 && s.count == N && s.size[2][7] == 5,
              "the symbol's bytes give the table");
        t[2 * N + 9] = 7; /* the operand at scale 4 not twice its growth at scale 2 */
        check(!v8_bytecode_sizes_plausible(t, N), "a row that does not scale as operands do is refused");
        t[2 * N + 9] = 5;

        /* the table found by its shape among other bytes, and refused when it is there twice */
        uint8_t data[4096];
        V8BytecodeSizes found = {};
        memset(data, 0x20, sizeof(data));
        memcpy(data + 100, t, sizeof(t));
        check(v8_bytecode_sizes_find(data, sizeof(data), &found) == 0 && found.count == N &&
                      memcmp(found.size, s.size, sizeof(found.size)) == 0,
              "the table is found by its shape");
        memcpy(data + 2000, t, sizeof(t));
        check(v8_bytecode_sizes_find(data, sizeof(data), &found) == -ENOTUNIQ,
              "two places of that shape: none taken");
        memset(data, 0x20, sizeof(data));
        check(v8_bytecode_sizes_find(data, sizeof(data), &found) == -ENOENT, "no place of that shape: none");

        /* bytecodes at 0 (7, 2 bytes), 2 (Wide + 9: 1 + 3 bytes), 6 (ExtraWide + 8: 1 + 5), 12 (4: 1);
         * machine code: prologue 10, then 5, 20, 200 (two VLQ bytes), 1 */
        const uint8_t bc[] = {7, 0x11, 0, 9, 0x22, 0x33, 1, 8, 1, 2, 3, 4, 4};
        const uint8_t table[] = {10, 5, 20, (200 & 0x7f) | 0x80, 200 >> 7, 1};
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 3, false, &off) == 0 &&
                      off == V8_BASELINE_FUNCTION_ENTRY,
              "a pc in the prologue is the function's entry");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 10, false, &off) == 0 &&
                      off == 0,
              "an interrupted pc at a bytecode's first instruction is that bytecode's");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 15, true, &off) == 0 &&
                      off == 0,
              "a return address at the end of a bytecode's code is that bytecode's");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 15, false, &off) == 0 &&
                      off == 2,
              "a wide bytecode's offset is its prefix's");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 100, false, &off) == 0 &&
                      off == 6,
              "a bytecode whose code length takes two VLQ bytes");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 235, false, &off) == 0 &&
                      off == 12,
              "the last bytecode");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc), 236, false, &off) ==
                      -ERANGE,
              "a pc past the code");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table) - 1, bc, sizeof(bc), 12, false, &off) ==
                      -EBADMSG,
              "a table shorter than the bytecodes is refused, even for a pc it covers");
        check(v8_baseline_bytecode_offset(&s, table, sizeof(table), bc, sizeof(bc) - 1, 12, false, &off) ==
                      -EBADMSG,
              "bytecodes that end inside one are refused");
        V8BytecodeSizes wrong = s;
        wrong.size[0][7] = 3;
        check(v8_baseline_bytecode_offset(&wrong, table, sizeof(table), bc, sizeof(bc), 12, false, &off) ==
                      -EBADMSG,
              "lengths that are not the build's do not end with the table");
}

/* Inlining chains (symbolizer/v8-chains.h): interned once, bounded, ids never another chain's. */
static void check_chains(void)
{
        V8Chains *c = NULL;
        const V8ChainLink *got;
        V8ChainLink a[] = {{.pair = 3, .line = 4}, {.pair = 2, .line = 9}, {.pair = 1, .line = 15}};
        V8ChainLink b[] = {{.pair = 3, .line = 5}, {.pair = 1, .line = 15}};
        uint32_t ida, idb, more = 0;

        check(v8_chains_new(4, 1000, &c) == 0, "chains table made");
        ida = v8_chains_intern(c, a, 3);
        idb = v8_chains_intern(c, b, 2);
        check(ida && idb && ida != idb && v8_chains_intern(c, a, 3) == ida, "a chain interned once");
        check(v8_chains_get(c, ida, &got) == 3 && got[0].pair == 3 && got[0].line == 4 && got[2].line == 15,
              "a chain read back by its id");
        for (uint32_t i = 0; i < 8; i++) {
                V8ChainLink x[] = {{.pair = 10 + i, .line = 1}, {.pair = 1, .line = 1}};

                more = v8_chains_intern(c, x, 2);
        }
        check(more > idb && v8_chains_get(c, ida, &got) == 0 && v8_chains_get(c, idb, &got) == 0,
              "beyond the bound the oldest chains are forgotten, their ids name nothing");
        check(v8_chains_intern(c, a, 3) > more, "a forgotten chain gets a new id");
        check(v8_chains_intern(c, a, V8_CHAIN_LEN_MAX + 1) == 0, "a chain too long is refused");
        v8_chains_free(c);
}

int main(void)
{
        check_positions();
        check_chains();
        check_baseline();
        const uint64_t JIT = 0x7f0000001000, TRAMP = 0x5500000100, CALL = 0x5500000200, START = 0x5500000300;
        const uint64_t F1 = 0x1c0000000011, F2 = 0x1c0000000051, F3 = 0x1c0000000091;

        {
                const uint64_t in[] = {CALL, START}, want[] = {CALL, START};
                expect("no V8 entries: unchanged", in, 2, want, 2, 0);
        }
        {
                /* leaf in optimized code, two interpreted callers, then native code */
                const uint64_t in[] = {JIT, V8(F1), TRAMP, V8(F2), TRAMP, V8(F3), CALL, START};
                const uint64_t want[] = {V8(F1), PC_LEAF(JIT), V8(F2), PC(TRAMP),
                                         V8(F3), PC(TRAMP),    CALL,   START};
                expect("each function takes its frame's pc's place, the pc kept after it", in, 8, want, 8,
                       3);
                check(v8_frame_is_pc(want[1]) && !v8_frame_is_pc(want[0]) && !v8_frame_is_bytecode(want[1]),
                      "pc entries told apart");
        }
        {
                /* a typed frame (no V8 entry) keeps its pc; a leading V8 entry has no pc before it */
                const uint64_t in[] = {V8(F1), TRAMP, TRAMP, V8(F2), START};
                const uint64_t want[] = {V8(F1), TRAMP, V8(F2), PC(TRAMP), START};
                expect("typed frames keep their pc", in, 5, want, 5, 2);
        }
        {
                /* two V8 entries in a row (never written by BPF): neither swallows the other */
                const uint64_t in[] = {JIT, V8(F1), V8(F2), START};
                const uint64_t want[] = {V8(F1), PC_LEAF(JIT), V8(F2), START};
                expect("adjacent V8 entries", in, 4, want, 4, 2);
        }
        {
                /* arm64: JIT code above 2^47 (user space reaches 2^48; V8's code lies by the
                 * libraries, near its top), a JIT frame marked so: its pc kept whole */
                const uint64_t HIGH = 0xffff8407992c, LEAF = 0xffff84115668;
                const uint64_t in[] = {LEAF, V8(F1) | PROFD_FRAME_V8_JIT, HIGH, V8(F2) | PROFD_FRAME_V8_JIT, START};
                const uint64_t want[] = {V8(F1) | PROFD_FRAME_V8_JIT, PC_LEAF(LEAF), V8(F2) | PROFD_FRAME_V8_JIT,
                                         PC(HIGH), START};
                expect("pcs above 2^47 (arm64) kept after their function", in, 5, want, 5, 2);
                check(v8_frame_is_pc(want[3]) && (want[3] & V8_FRAME_PC_ADDR_MASK) == HIGH &&
                              v8_frame_value(want[2]) == F2,
                      "a high pc and a marked function read back");
        }
        {
                /* named already (a stack handed over twice): left alone */
                const uint64_t named = PROFD_FRAME_V8 | V8_FRAME_NAMED | 7;
                const uint64_t in[] = {JIT, named, START}, want[] = {JIT, named, START};
                expect("named entries are not spliced again", in, 3, want, 3, 0);
        }
        {
                /* an interpreted frame's bytecode position stays after its function's entry */
                const uint64_t BC = PROFD_FRAME_V8 | PROFD_FRAME_V8_BYTECODE |
                                    60ULL << PROFD_V8_BC_ADDR_BITS | 0x1c0000000100 >> 3;
                const uint64_t in[] = {JIT, V8(F1), TRAMP, V8(F2), BC, START};
                const uint64_t want[] = {V8(F1), PC_LEAF(JIT), V8(F2), PC(TRAMP), BC, START};
                expect("bytecode entries kept after their function", in, 6, want, 6, 2);
                check(v8_frame_is_bytecode(BC) && !v8_frame_is_bytecode(V8(F1)) &&
                              v8_bytecode_array(BC) == 0x1c0000000101 && v8_bytecode_raw_offset(BC) == 60,
                      "bytecode entry fields");
        }
        {
                uint64_t f = v8_frame_make_named(12345, 987654);
                uint64_t none = v8_frame_make_named(7, -1);

                check(v8_frame_is(f) && v8_frame_named(f) && v8_frame_id(f) == 12345 &&
                              v8_frame_line(f) == 987654,
                      "a named entry keeps its id and line");
                check(v8_frame_id(none) == 7 && v8_frame_line(none) == 0, "a named entry without a line");
                check(!v8_frame_is_bytecode(f), "a named entry is not a bytecode entry");
        }
        check(!v8_frame_is(PROFD_FRAME_PYTHON | PROFD_FRAME_V8 | 1), "a Python entry is not a V8 one");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
