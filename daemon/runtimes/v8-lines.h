/* SPDX-License-Identifier: GPL-2.0-only */
/* Source lines of interpreted JavaScript frames, read from another process's V8 heap through the
 * never-blocking remote memory path: the frame's BytecodeArray (checked to be its function's) ->
 * its source position table (V8's encoding, below) -> script offsets -> lines through the
 * Script's line_ends. Every object's type is checked before its members are trusted.
 *
 * The source position table (V8 10.2 to 13.6, src/codegen/source-position-table.cc) is a byte
 * array of entries, each two deltas from the previous entry, each a zigzag varint (7 bits a byte,
 * low bits first, bit 7: more bytes follow): the code offset (bytecode offset here; negative,
 * -delta - 1, when the entry is an expression rather than a statement position), then the source
 * position (int64: bit 0 external (wasm), bits 1..30 the script offset + 1, bits 31..46 the inlining
 * id + 1). A bytecode's position is that of the last entry at or before its offset. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-offsets.h"

/* Bytes of a source position table read, at most: a function of thousands of lines has a few KiB. */
#define V8_POSITION_TABLE_MAX (64 * 1024)
/* Lines of a script whose line ends are kept, at most (4 bytes each: 1 MiB), and characters of a
 * source read to find them when V8 has not (16 MiB of UTF-16 at most; read once per script). */
#define V8_LINE_ENDS_MAX (256 * 1024)
#define V8_SOURCE_MAX (8 * 1024 * 1024)

/* A script's line ends: the offset (UTF-16 units) of each line's terminator, the last line's end. */
typedef struct V8LineEnds {
        uint32_t *ends;
        size_t n;
} V8LineEnds;

void v8_line_ends_done(V8LineEnds *e);

/* The line ends of the Script at script: V8's own (Script::line_ends) when it computed them, or
 * else counted from the source string (line feeds and U+2028/2029; a lone CR is not counted).
 * ret_source: the Script's source word, which identifies the result while it stays the same.
 * -EMEDIUMTYPE: not a Script; -EOPNOTSUPP: a source profd does not read (an external string: Node.js's
 * own modules); -E2BIG: beyond the bounds above. */
/* The source word of the Script at script (type checked). */
int v8_script_source(const RemoteMemory *m, const V8Offsets *o, uint64_t script, uint64_t *ret);

int v8_script_line_ends(const RemoteMemory *m, const V8Offsets *o, uint64_t script, V8LineEnds *ret,
                        uint64_t *ret_source);

typedef struct V8LineEntry {
        uint32_t offset; /* bytecode offset where the line starts to apply */
        uint32_t line;   /* 1-based */
} V8LineEntry;

/* The lines of one BytecodeArray, and the words that identify it (checked again on reuse). */
typedef struct V8LineTable {
        V8LineEntry *entries; /* by offset */
        size_t n;
        uint64_t map, length, positions; /* the array's map, length and position table words */
        int error; /* not 0: why it has no lines (as v8_bytecode_lines() says), kept not to ask again */
} V8LineTable;

void v8_line_table_done(V8LineTable *t);

/* The line of bytecode offset in t; 0 when none (no entry at or before it). */
uint32_t v8_line_table_find(const V8LineTable *t, uint32_t offset);

/* The bytecode offset a frame's raw offset slot stands for (bytes from the tagged array pointer);
 * -ERANGE when it points before the first bytecode. */
int v8_bytecode_offset(const V8Offsets *o, uint32_t raw, uint32_t *ret);

/* Whether the SharedFunctionInfo sfi (tagged) holds the BytecodeArray bca: directly, or through
 * its InterpreterData or baseline Code. -EMEDIUMTYPE: bca is not a BytecodeArray, or not sfi's;
 * -EOPNOTSUPP: the build lacks the metadata to tell. */
int v8_bytecode_belongs(const RemoteMemory *m, const V8Offsets *o, uint64_t sfi, uint64_t bca);

/* The words identifying bca (v8_line_table's map, length, positions), one remote read. */
int v8_bytecode_identity(const RemoteMemory *m, const V8Offsets *o, uint64_t bca, uint64_t *ret_map,
                         uint64_t *ret_length, uint64_t *ret_positions);

/* The lines of bca's bytecode in the script of line ends ends. -ENODATA: V8 has not collected its
 * source positions (lazy source positions: they are made when a stack trace or a profiler needs
 * them); -EMEDIUMTYPE: an object is not of the type expected; -E2BIG: a table beyond the bounds above;
 * -EOPNOTSUPP: the build lacks the metadata; what remote_memory_read() returns otherwise. */
int v8_bytecode_lines(const RemoteMemory *m, const V8Offsets *o, uint64_t bca, const V8LineEnds *ends,
                      V8LineTable *ret);

/* One unsigned VLQ at b[*i] (7 bits a byte, low bits first, bit 7: more follow), *i moved past
 * it; -EBADMSG when the bytes end inside it. The position tables' varints are these, zigzagged;
 * baseline code's offset tables use them as they are (v8-baseline.h). */
int v8_vlq_read(const uint8_t *b, size_t n, size_t *i, uint64_t *ret);

/* Decodes a source position table into (code offset, script offset) pairs, in table order, at
 * most max; the number of entries decoded, -EBADMSG when the bytes end inside an entry. External
 * positions are skipped. Exposed for the unit test. */
int v8_positions_decode(const uint8_t *bytes, size_t n, uint32_t *ret_code_offsets,
                        int32_t *ret_script_offsets, size_t max);

/* The last source position (raw: bit 0 external, bits 1..30 the script offset + 1, 31..46 the
 * inlining id + 1) of a position table at or before code offset offset. -ENODATA: none; -EBADMSG:
 * the bytes end inside an entry. */
int v8_positions_at(const uint8_t *bytes, size_t n, uint32_t offset, int64_t *ret);

/* 1-based line of script offset pos in ends; 0 when beyond them or pos < 0. */
uint32_t v8_line_of(const V8LineEnds *ends, int32_t pos);
