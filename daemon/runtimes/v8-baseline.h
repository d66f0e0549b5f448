/* SPDX-License-Identifier: GPL-2.0-only */
/* The bytecode a baseline (Sparkplug) JavaScript frame runs, from its pc. Sparkplug code keeps no
 * source positions: its Code holds, where optimized code keeps its deoptimization data and source
 * position table, its function's BytecodeArray (or the InterpreterData holding it) and a bytecode
 * offset table (V8 10.2 to 13.6, src/baseline/bytecode-offset-iterator.h): one unsigned VLQ (7 bits
 * a byte, low bits first, bit 7: more follow) for the prologue's machine code length, then one per
 * bytecode, in bytecode order, for the length of the machine code Sparkplug emitted for it. The
 * pc's bytecode is found by walking that table alongside the bytecodes, whose lengths come from
 * V8's own table of them (Bytecodes::kBytecodeSizes), read from the build: the frame's line is then
 * the interpreted frame's at that bytecode (v8-lines.h).
 *
 * The walk must use up the table and the bytecodes together, or the lengths are not the build's:
 * then the frame gets no line (never one from a misread bytecode). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtimes/v8-offsets.h"

/* V8's bytecode offset for a function's entry (kFunctionEntryBytecodeOffset): the pc lies in the
 * prologue, before the first bytecode. */
#define V8_BASELINE_FUNCTION_ENTRY (-1)

/* The table from the bytes (size of them) of kBytecodeSizes' symbol, when they have its shape
 * (v8_bytecode_sizes_plausible()); -ENOENT when not. */
int v8_bytecode_sizes_from_symbol(const uint8_t *bytes, size_t size, V8BytecodeSizes *ret);

/* The one table of kBytecodeSizes' shape in data (a build's .rodata), checked by
 * v8_bytecode_sizes_plausible(); -ENOENT when there is none, -ENOTUNIQ when several. */
int v8_bytecode_sizes_find(const uint8_t *data, size_t n, V8BytecodeSizes *ret);

/* Whether the 3 * count bytes t have kBytecodeSizes' shape: three rows (operand scale 1, 2, 4)
 * of count lengths, the four prefix bytecodes (Wide, ExtraWide and their debug breaks) and
 * DebugBreak0 1 byte long in each, every operand that scales adding twice as much in the third
 * row as in the second. */
bool v8_bytecode_sizes_plausible(const uint8_t *t, size_t count);

/* The bytecode offset (0-based) whose machine code holds code offset pc_offset of a baseline Code,
 * from its bytecode offset table (table, n) and its bytecodes (bytecodes, len). return_address:
 * pc_offset follows a call (a caller's frame), which belongs to the bytecode whose code it ends.
 * *ret is V8_BASELINE_FUNCTION_ENTRY in the prologue. -EBADMSG: the table and the bytecodes do not
 * end together (lengths not the build's, or memory changed under the reads), an unknown bytecode;
 * -ERANGE: pc_offset beyond the code. */
int v8_baseline_bytecode_offset(const V8BytecodeSizes *s, const uint8_t *table, size_t n,
                                const uint8_t *bytecodes, size_t len, uint32_t pc_offset,
                                bool return_address, int32_t *ret);
