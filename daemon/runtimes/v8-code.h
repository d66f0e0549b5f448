/* SPDX-License-Identifier: GPL-2.0-only */
/* Source positions of optimized JavaScript frames (TurboFan, Maglev), read from another process's
 * V8 heap through the never-blocking remote memory path: the frame's pc -> the Code object whose
 * instructions hold it -> the last entry of its source position table at or before the pc's code
 * offset (v8-lines.h: same encoding as a BytecodeArray's; its inlining id) -> through the Code's
 * DeoptimizationData, the functions inlined there, innermost first, each with its position in
 * its caller. Every object's type is checked, and the Code must be that of the frame's own
 * function (its DeoptimizationData names the function's SharedFunctionInfo), so code freed,
 * moved or replaced since the sample gives no position rather than another function's.
 *
 * Finding the Code (V8 10.2, whose Code objects keep their instructions inline, after a header of
 * code_instruction_start bytes): the function's current code (JSFunction::code) when its
 * instructions hold the pc; otherwise (on-stack replacement code, which V8 never installs on the
 * function, or code the function left since) the Code header before the pc: Code objects start
 * V8_CODE_ALIGNMENT-aligned, so the first word at such an address, going down from the pc, that
 * is the Code map (the map of any JSFunction's code) starts the Code that holds the pc, if any. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-offsets.h"

/* Functions inlined into one another at one pc, kept at most: TurboFan's inlining budget
 * (max_inlined_bytecode_size_cumulative) keeps chains short; a deeper one gives the frame's own
 * position alone. */
#define V8_INLINE_DEPTH_MAX 8
/* The step of the search for a Code below a pc: the smaller kCodeAlignment of V8's 64-bit targets
 * (x86-64: 64; arm64: 32, as its 10.2 Code header of 96 bytes shows). Code objects (10.2) or their
 * instructions start at such addresses; stepping by 32 finds those aligned to 64 too. */
#define V8_CODE_ALIGNMENT 32
/* Bytes of code space looked at below a pc for its Code's header (each 4 KiB a remote read):
 * TurboFan code of a hot function is a few KiB; beyond, the frame gets no line. */
#define V8_CODE_SCAN_MAX (64 * 1024)

typedef enum V8CodeKind {
        V8_CODE_BASELINE,
        V8_CODE_MAGLEV,
        V8_CODE_TURBOFAN,
        V8_CODE_OTHER,
        _V8_CODE_KIND_MAX,
} V8CodeKind;

/* One function at the pc: its SharedFunctionInfo (tagged) and script offset (-1: none). */
typedef struct V8CodeScope {
        uint64_t shared;
        int32_t script_offset;
} V8CodeScope;

typedef struct V8CodeFrame {
        V8CodeKind kind;
        uint64_t code;  /* the Code (tagged) */
        uint64_t map;   /* its map word (checked to be a Code's) */
        uint64_t deopt; /* its DeoptimizationData word (baseline code: its bytecode's) */
        /* Baseline code: the BytecodeArray it was compiled from (tagged; checked to be the
         * function's) and the bytecode at the pc (v8-baseline.h; no scopes then). */
        uint64_t bytecode_array;
        int32_t bytecode_offset;
        size_t n; /* scopes: innermost first, the frame's own function last */
        V8CodeScope scopes[V8_INLINE_DEPTH_MAX + 1];
} V8CodeFrame;

/* Whether the build's metadata (or profd's table for its version) describes optimized code. */
bool v8_code_supported(const V8Offsets *o);

/* The source positions at pc of the frame of the JSFunction fn, whose SharedFunctionInfo is shared
 * (tagged; checked by the caller); for baseline code, its bytecode there instead (no scopes).
 * return_address: pc is a return address (a caller's frame), whose position is the call's (V8: the
 * last position before the pc). -EOPNOTSUPP: not described (the build's metadata, or its bytecode
 * lengths for baseline code), or code of a kind without positions; -EBADMSG with kind
 * V8_CODE_BASELINE: its offset table and bytecodes do not agree (v8-baseline.h); -ENOENT: no Code of the
 * function holds the pc (deoptimized or replaced since); -EMEDIUMTYPE: an object is not of the type
 * expected, or the Code is another function's; -ENODATA: no position at or before the pc; what
 * remote_memory_read() returns otherwise. */
int v8_code_frame(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, uint64_t shared, uint64_t pc,
                  bool return_address, V8CodeFrame *ret);

/* Whether the Code (tagged) code, which gave a frame at pc its positions before, still does: its
 * map word map (V8CodeFrame.map), instruction range and DeoptimizationData word deopt unchanged (a
 * Code freed since would have another), in one remote read. 0, -ESTALE, or what
 * remote_memory_read() returns. */
int v8_code_still(const RemoteMemory *m, const V8Offsets *o, uint64_t code, uint64_t pc, uint64_t deopt,
                  uint64_t map);
