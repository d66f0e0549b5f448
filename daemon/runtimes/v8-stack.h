/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 frames in drained user stacks (bpf/profd-v8.h): how to read an entry, and the splice that
 * makes each JavaScript frame one entry. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-python.h */

#include "bpf/profd-hotspot.h"
#include "bpf/profd-python.h"
#include "bpf/profd-v8.h"

/* After the drain named it, a V8 entry is PROFD_FRAME_V8 | V8_FRAME_NAMED | (line + 1) <<
 * V8_FRAME_LINE_SHIFT | the id of its names (v8-symbols.h; id 0: none could be read, an unnamed
 * JavaScript frame; line + 1 == 0: no line known). Before, it holds the function's address as BPF
 * read it, and an interpreted frame's bytecode position follows it (PROFD_FRAME_V8_BYTECODE), which
 * the naming folds into the line. */
#define V8_FRAME_NAMED (1ULL << 58)
#define V8_FRAME_ID_BITS 20
#define V8_FRAME_ID_MASK ((1ULL << V8_FRAME_ID_BITS) - 1)
#define V8_FRAME_LINE_SHIFT V8_FRAME_ID_BITS
#define V8_FRAME_LINE_MAX ((1ULL << (47 - V8_FRAME_ID_BITS)) - 2)

/* A Java frame (profd-hotspot.h) may have bit 59 set in its bytecode index: bit 61 tells it apart. */
static inline bool v8_frame_is(uint64_t f)
{
        return (f & PROFD_FRAME_V8) && !(f & (PROFD_FRAME_PYTHON | PROFD_FRAME_HOTSPOT));
}

static inline bool v8_frame_named(uint64_t f)
{
        return f & V8_FRAME_NAMED;
}

/* The bytecode position BPF recorded after an interpreted frame's function entry. */
static inline bool v8_frame_is_bytecode(uint64_t f)
{
        return v8_frame_is(f) && !v8_frame_named(f) && (f & PROFD_FRAME_V8_BYTECODE);
}

/* An unnamed entry's JSFunction address. */
static inline uint64_t v8_frame_value(uint64_t f)
{
        return f & PROFD_V8_ADDR_MASK;
}

/* A bytecode entry's BytecodeArray (tagged address: V8's heap object tag is 1 in every build, and
 * BPF checked the word had it) and raw offset (bytes from that pointer). */
static inline uint64_t v8_bytecode_array(uint64_t f)
{
        return (f & ((1ULL << PROFD_V8_BC_ADDR_BITS) - 1)) << 3 | 1;
}
static inline uint32_t v8_bytecode_raw_offset(uint64_t f)
{
        return (uint32_t)((f >> PROFD_V8_BC_ADDR_BITS) & PROFD_V8_BC_OFFSET_MAX);
}

/* A named entry's pair id and line (0: none). */
static inline uint64_t v8_frame_id(uint64_t f)
{
        return f & V8_FRAME_ID_MASK;
}
static inline uint32_t v8_frame_line(uint64_t f)
{
        uint64_t l = (f & PROFD_V8_ADDR_MASK) >> V8_FRAME_LINE_SHIFT;

        return l ? (uint32_t)(l - 1) : 0;
}
static inline uint64_t v8_frame_make_named(uint64_t id, int64_t line)
{
        uint64_t l = line >= 0 && (uint64_t)line <= V8_FRAME_LINE_MAX ? (uint64_t)line + 1 : 0;

        return PROFD_FRAME_V8 | V8_FRAME_NAMED | l << V8_FRAME_LINE_SHIFT | (id & V8_FRAME_ID_MASK);
}

/* A named entry of an optimized frame with functions inlined at its pc: its low bits are the id of
 * that chain (symbolizer/v8-chains.h: each function with its line), not of a pair. */
#define V8_FRAME_INLINED (1ULL << 56)
/* Before naming only: the pc of a JavaScript frame, which the splice below moves after its
 * function's entry (bits 0..46; V8_FRAME_PC_EXACT: the interrupted pc, not a return address).
 * Optimized frames find their Code and source positions through it (runtimes/v8-code.h). */
#define V8_FRAME_PC (1ULL << 55)
#define V8_FRAME_PC_EXACT (1ULL << 54)
/* A pc entry's address: 48 bits, not the 47 of a function's (arm64's user space reaches 2^48, and
 * V8's JIT code lies near its top there, by libraries; x86-64's ends at 2^47). */
#define V8_FRAME_PC_ADDR_MASK ((1ULL << 48) - 1)

static inline bool v8_frame_is_pc(uint64_t f)
{
        return v8_frame_is(f) && !v8_frame_named(f) && (f & V8_FRAME_PC);
}
static inline bool v8_frame_inlined(uint64_t f)
{
        return v8_frame_named(f) && (f & V8_FRAME_INLINED);
}

/* BPF puts each V8 entry right after the entry of its frame's pc, which lies in JIT code or a
 * builtin (the interpreter's trampoline for an interpreted frame): the function says more, so that
 * pc entry goes, kept as a V8_FRAME_PC entry right after the function's for the naming, which
 * folds it into the name. frames and exact (per frame) are rewritten in place; returns the new
 * length and adds the V8 entries seen to *ret_v8. */
static inline size_t v8_stack_splice(uint64_t *frames, uint8_t *exact, size_t len, size_t *ret_v8)
{
        size_t out = 0;

        for (size_t i = 0; i < len; i++) {
                if (v8_frame_is(frames[i]) && !v8_frame_named(frames[i]) &&
                    !v8_frame_is_bytecode(frames[i]) && !v8_frame_is_pc(frames[i])) {
                        (*ret_v8)++;
                        if (out > 0 && !v8_frame_is(frames[out - 1]) &&
                            frames[out - 1] <= V8_FRAME_PC_ADDR_MASK) {
                                /* its pc's entry: after it, as a pc entry */
                                uint64_t pc = PROFD_FRAME_V8 | V8_FRAME_PC |
                                              (exact[out - 1] ? V8_FRAME_PC_EXACT : 0) | frames[out - 1];

                                frames[out - 1] = frames[i];
                                exact[out - 1] = exact[i];
                                frames[out] = pc;
                                exact[out] = 0;
                                out++;
                                continue;
                        }
                        if (out > 0 && !v8_frame_is(frames[out - 1]))
                                out--; /* not an address: nothing to keep */
                }
                frames[out] = frames[i];
                exact[out] = exact[i];
                out++;
        }
        return out;
}
